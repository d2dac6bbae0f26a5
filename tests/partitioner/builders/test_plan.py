"""Tests for partitioner.builders.plan: the working plan of a sticky repair (shedding, joining, placing)."""

from __future__ import annotations

import itertools
import math

import pytest

from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders.plan import SLIVER_FILL, RepairPlan
from partitioner.builders.region import Region
from partitioner.load.counts import counts_from_pairs

HALF = HASH_BUCKETS // 2
GRID = counts_from_pairs([("0231", 1.0)]).grid()  # only a shave looks at the grid; these regions list no cells


def _shares(plan: RepairPlan, quadkey: str) -> list[tuple[tuple[int, int] | None, str, str]]:
    return sorted((it.region.hash_range, it.pid, it.worker) for it in plan.items if it.region.quadkeys == (quadkey,))


def test_a_worker_over_the_cap_gives_up_exactly_its_overflow_to_the_next_share_of_its_cell() -> None:
    # GIVEN a cell of 120 split in two shares of 60: p1 on w1 (with a region of 50: w1 at 110) and p2 on w2 (room 40)
    plan = RepairPlan(100.0)
    plan.add(Region(("0231",), 60.0, (0, HALF)), "p1", "w1")
    plan.add(Region(("0230",), 50.0), "p3", "w1")
    plan.add(Region(("0231",), 60.0, (HALF, HASH_BUCKETS)), "p2", "w2")
    # WHEN the plan sheds overflow and places what moved
    notes: list[str] = []
    plan.shed_overflow(GRID, notes)
    plan.place_unassigned(["w1", "w2"])
    # THEN p1 gave up just enough buckets from the end of its range for 10 load, and p2 took them: no new share,
    #      no region moved, and both workers fit
    k = math.ceil(10.0 / (120.0 / HASH_BUCKETS))
    assert _shares(plan, "0231") == [((0, HALF - k), "p1", "w1"), ((HALF - k, HASH_BUCKETS), "p2", "w2")]
    assert next(it for it in plan.items if it.pid == "p3").worker == "w1"
    loads = plan.worker_loads()
    assert loads["w1"] == pytest.approx(100.0, abs=0.01) and loads["w1"] <= 100.0
    assert loads["w2"] == pytest.approx(70.0, abs=0.01)


def test_an_end_no_neighbour_has_room_for_becomes_a_share_of_its_own_on_the_fullest_worker_it_fits() -> None:
    # GIVEN the same cell, but w2 full; w3 has room 30 and w4 room 80
    plan = RepairPlan(100.0)
    plan.add(Region(("0231",), 60.0, (0, HALF)), "p1", "w1")
    plan.add(Region(("0230",), 50.0), "p3", "w1")
    plan.add(Region(("0231",), 60.0, (HALF, HASH_BUCKETS)), "p2", "w2")
    plan.add(Region(("0232",), 40.0), "p4", "w2")
    plan.add(Region(("0233",), 70.0), "p5", "w3")
    plan.add(Region(("0220",), 20.0), "p6", "w4")
    # WHEN the plan sheds overflow and places what moved
    plan.shed_overflow(GRID, [])
    plan.place_unassigned(["w1", "w2", "w3", "w4"])
    # THEN the end p1 gave up is a new share (no id yet) on w3, the fullest worker it fits
    shares = _shares(plan, "0231")
    assert len(shares) == 3
    (lo, hi), pid, worker = shares[1]
    assert (pid, worker, hi) == ("", "w3", HALF) and shares[0][0] == (0, lo)
    assert max(plan.worker_loads().values()) <= 100.0


def test_a_worker_moves_a_small_region_and_trims_its_share_rather_than_move_its_big_cell() -> None:
    # GIVEN w1 with one big cell (95), a small region (4) and a share of 3 of a cell of 6: 102, 2 over
    plan = RepairPlan(100.0)
    plan.add(Region(("0231",), 95.0), "big", "w1")
    plan.add(Region(("0230",), 4.0), "small", "w1")
    plan.add(Region(("0232",), 3.0, (0, HALF)), "share", "w1")
    plan.add(Region(("0232",), 3.0, (HALF, HASH_BUCKETS)), "other", "w2")
    # WHEN the plan sheds overflow
    plan.shed_overflow(GRID, [])
    # THEN the share gives up its 2 alone (the least load that can move): the big cell and the small region stay
    stays = {it.pid: it.worker for it in plan.items if it.pid}
    assert stays["big"] == "w1" and stays["small"] == "w1"
    moved = sum(it.region.load for it in plan.items if not it.worker)
    assert moved == pytest.approx(2.0, abs=1e-3) and moved >= 2.0


def test_slivers_join_their_neighbouring_share_where_load_has_fallen_but_not_onto_full_workers() -> None:
    for neighbour_load, joins in ((30.0, True), (100.0 * SLIVER_FILL - 1.0, False)):
        # GIVEN a share on w1 (w1 holds neighbour_load in all) and a sliver of 2.5 next to it on w2
        plan = RepairPlan(100.0)
        plan.add(Region(("0231",), 30.0, (0, 60000)), "p1", "w1")
        plan.add(Region(("0230",), neighbour_load - 30.0), "p3", "w1")
        plan.add(Region(("0231",), 2.5, (60000, HASH_BUCKETS)), "p2", "w2")
        plan.add(Region(("0232",), 90.0), "p4", "w2")
        # WHEN slivers are joined
        notes: list[str] = []
        plan.join_slivers(notes)
        # THEN the sliver joins p1 (one share of the whole range on w1) only where w1 stays within SLIVER_FILL
        if joins:
            assert _shares(plan, "0231") == [((0, HASH_BUCKETS), "p1", "w1")]
            assert plan.worker_loads()["w1"] == pytest.approx(neighbour_load + 2.5)
            assert "joined" in notes[0]
        else:
            assert len(_shares(plan, "0231")) == 2 and notes == []


def test_an_end_given_up_that_is_larger_than_the_cap_is_placed_as_shares_within_the_cap() -> None:
    # GIVEN a cell of 600 split in two shares of 300: p1 on w1 is 2.5x over a cap of 120, and so is p2 on w2
    plan = RepairPlan(120.0)
    plan.add(Region(("0231",), 300.0, (0, HALF)), "p1", "w1")
    plan.add(Region(("0231",), 300.0, (HALF, HASH_BUCKETS)), "p2", "w2")
    # WHEN the plan sheds overflow (each worker gives up 180, more than the cap) and places what moved
    notes: list[str] = []
    plan.shed_overflow(GRID, notes)
    plan.place_unassigned(["w1", "w2"])
    # THEN no worker is over the cap (before: one new worker per end, each at 180), p1 and p2 keep their ids and
    #      workers, and the shares still tile the hash space
    loads = plan.worker_loads()
    assert max(loads.values()) <= 120.0 * (1 + 1e-9)
    assert sum(loads.values()) == pytest.approx(600.0)
    shares = _shares(plan, "0231")
    ranges = sorted(hr for hr, _, _ in shares if hr is not None)
    assert ranges[0][0] == 0 and ranges[-1][1] == HASH_BUCKETS
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert {(pid, w) for _, pid, w in shares if pid} == {("p1", "w1"), ("p2", "w2")}
