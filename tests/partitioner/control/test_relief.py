"""The fast path's delta: only the surging cells move, within the fill, on the newest published spec."""

from __future__ import annotations

import pytest

from geokernel.contracts.surge import SurgeCell, SurgeSignal
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.rules import validate
from partitioner.control.relief import relieve
from tests.geokernel.surge.surge_testkit import CAP, WINDOW_S, cell, qk, row_spec

NOW = 10_000.0


def signal(spec_version: int, worker: str, cells: tuple[SurgeCell, ...], loads: dict[str, float]) -> SurgeSignal:
    return SurgeSignal(spec_version, worker, NOW, WINDOW_S, 150.0, CAP, 850.0, loads[worker], 1100.0, cells,
                       tuple(loads.items()))


def owner(spec, i: int) -> str:
    x, y = cell(i)
    return spec.partitions[int(SpecIndex(spec).locate_xy([x], [y], 12)[0])].worker


def test_a_surging_cell_moves_alone_to_the_fullest_worker_with_room_and_nothing_else_moves():
    # GIVEN w0001 at 85 % with a crowd on cell 1 projected to 40 % of the cap, w0002 at 50 %, w0003 at 20 %
    spec = row_spec([[425.0, 425.0], [500.0], [200.0]])
    s = signal(3, "w0001", (SurgeCell(qk(1), 25.0, 300.0, 0.1),), {"w0001": 1150.0, "w0002": 500.0, "w0003": 200.0})
    # WHEN the relief is built at the window path's fill 0.9, projecting 15 minutes
    relief = relieve(spec, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN cell 1 (projected 300 + 0.1 x 900 = 390) goes to w0002, the fullest with room, as v4; all else stays
    out = relief.spec
    assert out is not None and out.version == 4 and out.previous_version == 3 and validate(out) == []
    assert owner(out, 1) == "w0002" and owner(out, 0) == "w0001" and owner(out, 2) == "w0002"
    assert [(m.quadkey, m.source, m.targets, m.new_workers) for m in relief.moves] == [(qk(1), "w0001", ("w0002",), 0)]
    assert out.worker("w0002").load == pytest.approx(890.0)
    assert {p.id for p in spec.partitions} <= {p.id for p in out.partitions}
    assert "window_end" not in out.source and list(out.source["relief"]["cells"]) == [qk(1)]
    # AND the cell is a surge for the window path to reserve, at its projection, for hold_s
    (c,) = relief.surges
    assert c.load_per_s * WINDOW_S == pytest.approx(390.0) and c.end - c.start == pytest.approx(1200.0)


def test_no_room_anywhere_opens_a_new_worker_and_keys_every_shard_again():
    # GIVEN every worker at 85 % and a crowd projected past any worker's room
    spec = row_spec([[425.0, 425.0], [850.0]])
    s = signal(3, "w0001", (SurgeCell(qk(1), 25.0, 300.0, 1.0),), {"w0001": 1150.0, "w0002": 850.0})
    # WHEN relieved
    relief = relieve(spec, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN the cell alone goes to a new worker w0003, at most fill x the cap, and the three workers own 3 shards
    out = relief.spec
    assert out is not None and validate(out) == [] and owner(out, 1) == "w0003"
    assert out.worker("w0003").load == pytest.approx(900.0)
    assert len({w.hash_key for w in out.workers}) == 3 and relief.moves[0].new_workers == 1


def test_a_cell_the_newest_spec_already_placed_with_room_stays():
    # GIVEN a signal measured under v3, while v4 (published since) has cell 1 alone on w0002 with room
    v4 = row_spec([[425.0], [300.0], [200.0]], version=4)
    s = signal(3, "w0001", (SurgeCell(qk(1), 25.0, 300.0, 0.1),), {"w0001": 1150.0, "w0002": 300.0, "w0003": 200.0})
    # WHEN relieved on v4
    relief = relieve(v4, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN nothing moves, and the reason says where it fits
    assert relief.spec is None and relief.moves == ()
    assert "fits on w0002" in relief.reasons[0]


def test_a_cell_bigger_than_a_worker_is_split_by_hash_keeping_a_share_on_its_own_worker():
    # GIVEN cell 0 alone on w0001, measured at 130 % of the cap and rising
    spec = row_spec([[1000.0], [500.0]])
    s = signal(3, "w0001", (SurgeCell(qk(0), 900.0, 1300.0, 0.5),), {"w0001": 1300.0, "w0002": 500.0})
    # WHEN relieved at fill 0.9
    relief = relieve(spec, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN it is split into 2 hash shares (1300 + 0.5 x 150 = 1375 over 900 of room): one stays on w0001, one new
    out = relief.spec
    assert out is not None and validate(out) == []
    shares = sorted((p.hash_range, p.worker) for p in out.partitions if p.quadkeys == (qk(0),))
    assert [r for r, _ in shares] == [(0, 32768), (32768, 65536)]
    assert {w for _, w in shares} == {"w0001", "w0003"}


def test_a_cell_that_has_its_worker_to_itself_is_not_moved_to_another_empty_one():
    # GIVEN cell 1 at 80 % (a crowd a relief moved there) on w0001, which carries 5 % besides, projected past the fill
    spec = row_spec([[50.0, 800.0], [500.0]])
    s = signal(3, "w0001", (SurgeCell(qk(1), 500.0, 800.0, 0.5),), {"w0001": 850.0, "w0002": 500.0})
    # WHEN relieved
    relief = relieve(spec, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN nothing moves: another worker would give it no more room
    assert relief.spec is None and "has w0001 to itself" in relief.reasons[0]


def test_bad_arguments_are_named():
    # GIVEN a relief asked for with a fill of 0
    # WHEN built
    # THEN the error names the value
    spec = row_spec([[800.0]])
    s = signal(3, "w0001", (SurgeCell(qk(0), 1.0, 2.0, 0.0),), {"w0001": 800.0})
    with pytest.raises(ValueError, match=r"fill must be in \(0, 1\] .* got 0"):
        relieve(spec, s, fill=0, reach_s=1.0, hold_s=1.0, now=NOW)


def test_a_signal_under_an_older_spec_keeps_a_cell_the_newest_spec_moved_alone_to_a_new_worker():
    # GIVEN v4, a relief that put cell 1 alone on a new worker w0003 planned at its projection (85 %), and a second
    # signal for the same surge measured under v3 (where cell 1 was still on w0001)
    v4 = row_spec([[425.0], [500.0], [850.0]], version=4)
    s = signal(3, "w0001", (SurgeCell(qk(2), 25.0, 300.0, 1.0),), {"w0001": 1150.0, "w0002": 500.0})
    # WHEN relieved on v4
    relief = relieve(v4, s, fill=0.9, reach_s=900.0, hold_s=1200.0, now=NOW)
    # THEN nothing moves: the cell's worker carries nothing else (its plan less the cell's own partition)
    assert relief.spec is None and "fits on w0003" in relief.reasons[0]


def test_a_cell_relieved_twice_is_reserved_once_at_its_latest_projection():
    # GIVEN a surge kept from a first relief, one that ended, and a second relief of the first one's cell
    from partitioner.control.crowds import DeclaredCrowd
    from partitioner.control.relief import merge_surges

    first = DeclaredCrowd("surge a (v3 w0001)", 51.5, -0.1, NOW - 60, NOW + 900, 1.0)
    ended = DeclaredCrowd("surge b (v2 w0002)", 48.8, 2.3, NOW - 2000, NOW - 1, 1.0)
    again = DeclaredCrowd("surge a (v4 w0001)", 51.5, -0.1, NOW, NOW + 1200, 2.0)
    other = DeclaredCrowd("surge c (v4 w0002)", 40.4, -3.7, NOW, NOW + 1200, 1.5)
    # WHEN merged
    out = merge_surges([first, ended], [again, other], NOW)
    # THEN the cell is reserved once (the latest), the ended one is gone, the other one added
    assert out == (again, other)
