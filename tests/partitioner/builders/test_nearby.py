"""Tests for partitioner.builders.nearby: a sticky repair on fragmented data keeps the spec small."""

from __future__ import annotations

import numpy as np
from build_data import regions_connected
from spec_factory import make_counts, qk

from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders import build_spec
from partitioner.builders.nearby import merge_territories, place_nearby
from partitioner.builders.plan import RepairPlan
from partitioner.builders.region import Region
from partitioner.output.metrics import evaluate

Z = 10


def test_a_new_island_goes_to_the_worker_of_its_neighbour_along_the_curve_when_it_has_room() -> None:
    # GIVEN w1's island at (100, 100) and w2's far away at (900, 900), and two new islands: one next to w1's, one next
    # to w2's, whose worker is full
    plan = RepairPlan(100.0)
    plan.add(Region((qk(100, 100, Z),), 10.0), "p1", "w1")
    plan.add(Region((qk(900, 900, Z),), 100.0), "p2", "w2")
    plan.add(Region((qk(101, 100, Z),), 5.0), "", "")
    plan.add(Region((qk(901, 900, Z),), 5.0), "", "")
    # WHEN the new small islands are placed near their neighbours
    placed = place_nearby(plan, Z, 10.0)
    # THEN the one next to w1's went to w1; the one next to the full w2 is left for the best-fit placement
    assert placed == 1 and [it.worker for it in plan.items] == ["w1", "w2", "w1", ""]


def test_a_workers_touching_islands_merge_keeping_the_largest_ones_id_and_no_cell_changes_worker() -> None:
    # GIVEN w1's islands at (100,100) (load 3, p1) and (102,100) (load 5, p2), w2's at (104,100), and a hash share of
    # a hot cell at (100,104)
    plan = RepairPlan(100.0)
    plan.add(Region((qk(100, 100, Z),), 3.0), "p1", "w1")
    plan.add(Region((qk(102, 100, Z),), 5.0), "p2", "w1")
    plan.add(Region((qk(104, 100, Z),), 4.0), "p3", "w2")
    plan.add(Region((qk(100, 104, Z),), 60.0, (0, HASH_BUCKETS // 2)), "p4", "w2")
    before = {q: it.worker for it in plan.items if it.region.hash_range is None for q in it.region.quadkeys}
    # WHEN the small regions merge into territories
    fewer = merge_territories(plan, Z, 10.0, 8)
    # THEN w1's two islands are one region named p2 (the larger) holding both islands' load, every cell kept its
    #      worker, the share is untouched, and the loads add up
    by_pid = {it.pid: it for it in plan.items}
    assert fewer == 1 and set(by_pid) == {"p2", "p3", "p4"}
    assert by_pid["p2"].worker == "w1" and by_pid["p2"].region.load == 8.0
    assert by_pid["p4"].region.hash_range == (0, HASH_BUCKETS // 2)
    spec_like = [(it.region.quadkeys, it.worker) for it in plan.items if it.region.hash_range is None]
    for q, w in before.items():
        owners = [wk for qks, wk in spec_like if any(q.startswith(s) for s in qks)]
        assert owners == [w], (q, owners)
    assert sum(it.region.load for it in plan.items) == 72.0


def test_repairs_of_a_day_of_scattered_islands_keep_a_few_regions_per_worker() -> None:
    # GIVEN windows of 3,000 islands over a continent, a third of them new each window (fragmented, sparse load)
    rng = np.random.default_rng(3)
    pool_x, pool_y = rng.integers(1800, 2300, 9000), rng.integers(1200, 1600, 9000)
    weight = rng.integers(1, 20, 9000).astype(float)
    spec = None
    counts = None
    for t in range(6):
        pick = rng.choice(9000, 3000, replace=False)
        counts = make_counts({qk(int(pool_x[i]), int(pool_y[i]), 12): float(weight[i]) for i in pick}, f"w{t}")
        # WHEN each window is built sticky to the last
        spec = build_spec(counts, 400.0, previous=spec)
    assert spec is not None and counts is not None
    m = evaluate(spec, counts)
    # THEN the spec still has a few regions per worker (not thousands of islands), every region is one piece,
    #      and no worker is over the cap
    assert m.region_count <= 15 * m.worker_count and m.regions_per_worker[0] <= 15
    assert m.contiguous and regions_connected(spec, 12) and m.max_utilisation <= 1 + 1e-9
    assert SpecIndex(spec).catch_all_index is not None
