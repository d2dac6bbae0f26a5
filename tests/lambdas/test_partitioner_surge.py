"""The partitioner's fast path over moto: a router's signal -> a relief version, and one writer of ``desired``.

The window path (a snapshot) and the fast path (a signal) both publish by compare and swap on ``desired``
(:mod:`lambdas.partitioner.publish`): the tests make them fire at once, each way round, and with two threads meeting
at the compare and swap, and check that the versions form one chain in which nothing either published is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from geokernel.contracts.control import ControlKey
from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.surge import SURGES_KEY, SurgeCell, SurgeSignal
from geokernel.geo.tiles import Tile, quadkey
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from lambdas.partitioner import handler as partitioner_handler
from lambdas.partitioner.logic import PartitionerDeps, load_policy, process_snapshot
from lambdas.partitioner.surge import process_surge
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.records import read_desired
from lambdas.runtime.s3 import SurgeStore
from partitioner.control.crowds import parse_crowds
from tests.lambdas.conftest import CTX, Aws, snapshot_rows, t, write_test_snapshot
from tests.lambdas.partitioner_testkit import CELLS, deps

HOT = (8, 8)  # the cell the crowd comes to (700 of the cap's 1000 in CELLS)


def hot_qk() -> str:
    return quadkey(Tile(2000 + HOT[0], 1300 + HOT[1], 12))


def owner(spec: Spec, qk: str) -> str:
    x, y = 2000 + HOT[0], 1300 + HOT[1]
    assert qk == hot_qk()
    return spec.partitions[int(SpecIndex(spec).locate_xy([x], [y], 12)[0])].worker


def first_spec(aws: Aws, d: PartitionerDeps) -> Spec:
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    return aws.specs.get(spec_key(1))


def put_signal(aws: Aws, spec: Spec, now: float = 1.0) -> str:
    """A router's signal: the hot cell's worker under ``spec``, its cell at 900 and rising."""
    w = owner(spec, hot_qk())
    loads = {x.id: x.load for x in spec.workers}
    loads[w] += 600.0
    s = SurgeSignal(spec.version, w, now, 300.0, 150.0, spec.max_load, spec.worker(w).load, loads[w], loads[w] + 150,
                    (SurgeCell(hot_qk(), 300.0, 900.0, 1.0),), tuple(loads.items()))
    assert SurgeStore(aws.clients.s3, aws.cfg.specs_bucket).put_signal(s)
    return s.key


def test_a_signal_publishes_a_relief_moving_only_the_surging_cell(aws: Aws) -> None:
    # GIVEN v1, and a router's signal that the hot cell's worker heads past its cap
    d = deps(aws)
    v1 = first_spec(aws, d)
    key = put_signal(aws, v1)
    # WHEN the partitioner's S3 notification for the signal arrives
    partitioner_handler.deps.cache_clear()
    event = {"Records": [{"s3": {"bucket": {"name": aws.cfg.specs_bucket}, "object": {"key": key}}}]}
    out = partitioner_handler.handler(event, CTX)
    # THEN v2 is published with the hot cell on another worker and every other partition where it was
    assert [(r["signal"], r["status"], r["version"]) for r in out["results"]] == [(key, "published", 2)]
    v2 = aws.specs.get(spec_key(2))
    assert read_desired(aws.control).version == 2  # type: ignore[union-attr]
    assert owner(v2, hot_qk()) != owner(v1, hot_qk()) and v2.previous_version == 1
    assert {(p.id, p.worker) for p in v1.partitions if hot_qk() not in p.quadkeys} <= \
        {(p.id, p.worker) for p in v2.partitions}
    assert "window_end" not in v2.source and v2.stream_name == "georebal-geo-v2"
    # AND the cell is kept as a surge the window path reserves
    raw = aws.clients.s3.get_object(Bucket=aws.cfg.specs_bucket, Key=SURGES_KEY)["Body"].read()
    (surge,) = parse_crowds(raw, SURGES_KEY)
    assert hot_qk() in surge.name and surge.load_per_s * 300 >= 900


def test_the_next_window_sizes_for_the_relieved_surge_and_keeps_the_cell_where_the_relief_put_it(aws: Aws) -> None:
    # GIVEN a relief v2 of the hot cell, two minutes before the next window ends
    d = deps(aws, policy=load_policy('{"cooldown_s": 0}'), clock=lambda: t(8).timestamp())
    v1 = first_spec(aws, d)
    assert process_surge(d, put_signal(aws, v1)).status == "published"
    target = owner(aws.specs.get(spec_key(2)), hot_qk())
    # WHEN the next window (from before the crowd showed in full) is processed and its load overloads another cell
    out = process_snapshot(d, write_test_snapshot(aws, snapshot_rows({**CELLS, (0, 0): 1900}), t(10)))
    # THEN the window path sizes for the surge as for a declared crowd, and its spec keeps the cell on its worker
    assert out.status == "published", out.reason
    assert "sized for declared crowds: surge " + hot_qk() in out.reason
    assert owner(aws.specs.get(spec_key(out.version or 0)), hot_qk()) == target


def test_a_bad_or_missing_signal_is_rejected_naming_it(aws: Aws) -> None:
    # GIVEN v1 and a signal object that does not decode
    d = deps(aws)
    first_spec(aws, d)
    key = "control/surge/v00000001/w0001-0231.json"
    aws.clients.s3.put_object(Bucket=aws.cfg.specs_bucket, Key=key, Body=b"{}")
    # WHEN processed
    out = process_surge(d, key)
    # THEN it is rejected, naming the object; a missing one too; nothing is published
    assert (out.status, out.code) == ("rejected", "bad_signal") and key in out.reason
    assert process_surge(d, key.replace("0231", "0232")).code == "missing_signal"
    assert read_desired(aws.control).version == 1  # type: ignore[union-attr]


class RacingControl(ControlTable):
    """The control table, running ``before`` (once) just before the first compare and swap on ``desired``."""

    def __init__(self, inner: ControlTable, before: Callable[[], Any]) -> None:
        super().__init__(inner._ddb, inner.table)
        self._before: Callable[[], Any] | None = before

    def put_after(self, pk: str, item: Any, expected_version: int | None) -> bool:
        if pk == ControlKey.DESIRED and self._before is not None:
            run, self._before = self._before, None
            run()
        return super().put_after(pk, item, expected_version)


def chain(aws: Aws) -> list[tuple[int, int | None]]:
    """(version, previous version) from ``desired`` back to v1."""
    out = []
    v: int | None = read_desired(aws.control).version  # type: ignore[union-attr]
    while v is not None:
        spec = aws.specs.get(spec_key(v))
        out.append((v, spec.previous_version))
        v = spec.previous_version
    return out


def test_both_firing_at_once_the_window_path_loses_the_race_and_builds_again_on_the_relief(aws: Aws) -> None:
    # GIVEN v1, a signal, and a window whose load makes the window path publish
    plain = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    v1 = first_spec(aws, plain)
    key = put_signal(aws, v1)
    snap = write_test_snapshot(aws, snapshot_rows({**CELLS, (0, 0): 1900}), t(10))
    relief: list[Any] = []
    racing = PartitionerDeps(**{**plain.__dict__,
                                "control": RacingControl(plain.control, lambda: relief.append(process_surge(plain, key)))})
    # WHEN the window path, about to move desired from v1, meets the fast path publishing its relief first
    out = process_snapshot(racing, snap)
    # THEN the relief is published on v1, and the window path's spec is built again on the relief and published after
    (r,) = relief
    assert r.status == "published" and out.status == "published", (r.reason, out.reason)
    assert out.version == (r.version or 0) + 1
    assert chain(aws) == [(out.version, r.version), (r.version, 1), (1, None)]
    # AND the window path's spec keeps the relief's move (nothing either path published is lost)
    assert owner(aws.specs.get(spec_key(out.version or 0)), hot_qk()) == \
        owner(aws.specs.get(spec_key(r.version or 0)), hot_qk())


def test_both_firing_at_once_the_fast_path_loses_the_race_and_relieves_the_window_paths_spec(aws: Aws) -> None:
    # GIVEN v1, a signal, and a window whose load makes the window path publish
    plain = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    v1 = first_spec(aws, plain)
    key = put_signal(aws, v1)
    snap = write_test_snapshot(aws, snapshot_rows({**CELLS, (0, 0): 1900}), t(10))
    window: list[Any] = []
    racing = PartitionerDeps(**{**plain.__dict__,
                                "control": RacingControl(plain.control, lambda: window.append(process_snapshot(plain, snap)))})
    # WHEN the fast path, about to move desired from v1, meets the window path publishing first
    out = process_surge(racing, key)
    # THEN the window path's spec is published on v1, and the relief is built again on it (or finds the cell placed)
    (w,) = window
    assert w.status == "published", w.reason
    assert out.status in ("published", "held"), out.reason
    versions = chain(aws)
    assert versions[-2:] == [(w.version, 1), (1, None)]
    if out.status == "published":
        assert versions[0] == (out.version, w.version)


def test_both_firing_at_once_in_two_threads_make_one_chain(aws: Aws) -> None:
    # GIVEN v1, a signal and a window, and both paths held at the compare and swap until the other gets there too
    plain = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    v1 = first_spec(aws, plain)
    key = put_signal(aws, v1)
    snap = write_test_snapshot(aws, snapshot_rows({**CELLS, (0, 0): 1900}), t(10))
    meet = threading.Barrier(2, timeout=30)
    results: dict[str, Any] = {}

    def racing() -> PartitionerDeps:
        return PartitionerDeps(**{**plain.__dict__, "control": RacingControl(plain.control, meet.wait)})

    threads = [threading.Thread(target=lambda: results.__setitem__("window", process_snapshot(racing(), snap))),
               threading.Thread(target=lambda: results.__setitem__("fast", process_surge(racing(), key)))]
    # WHEN both run at once
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    # THEN both publish, one after the other, each built on the version before it: one chain from v1
    assert results["window"].status == "published", results["window"].reason
    assert results["fast"].status in ("published", "held"), results["fast"].reason
    published = sorted(v for v in (results["window"].version, results["fast"].version
                                   if results["fast"].status == "published" else None) if v is not None)
    versions = chain(aws)
    assert [v for v, _ in versions][:len(published)] == published[::-1]
    assert all(prev == versions[i + 1][0] for i, (_, prev) in enumerate(versions[:-1]))
