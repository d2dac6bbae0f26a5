"""Tests for partitioner.builders.fresh: carve and pack from scratch."""

from __future__ import annotations

import numpy as np
import pytest
from build_data import regions_connected
from spec_factory import make_counts, qk

from partitioner.builders import build_spec
from partitioner.builders.fresh import fresh_placement
from partitioner.builders.hot import split_hot_cells
from partitioner.load.bound import lower_bound
from partitioner.load.counts import Counts
from partitioner.output.metrics import evaluate


def test_fresh_placement_packs_hot_shares_and_carved_regions_within_the_lower_bound_plus_one(metro: Counts) -> None:
    # GIVEN a dense metro area, a cap giving ~12 workers, and its hottest cell three caps hot
    grid = metro.grid()
    cap = metro.total / 11.5
    hottest = int(np.argmax(grid.weight))
    counts = Counts(metro.quadkeys, np.where(np.arange(len(metro)) == hottest, 3 * cap, metro.weights), "hot")
    grid = counts.grid()
    hot = split_hot_cells(counts, grid, cap)
    lb = lower_bound(float(grid.weight.sum()), cap)
    # WHEN placed from scratch
    placement = fresh_placement(grid, cap, hot, lb)
    # THEN the hot shares come first, all load is placed, and the workers fit the cap within lb + 1
    assert hot.cells == 1 and list(placement.regions[:len(hot.regions)]) == hot.regions
    assert sum(r.load for r in placement.regions) == pytest.approx(float(grid.weight.sum()))
    assert placement.worker_count <= lb + 1
    per_worker = np.bincount(placement.workers_of, weights=[r.load for r in placement.regions])
    assert per_worker.max() <= cap * (1 + 1e-9)


def test_a_worker_of_many_small_islands_owns_a_few_territories_that_hold_only_its_own_load() -> None:
    # GIVEN 3,000 islands of one to four cells scattered over a continent at zoom 12, ~60 islands per worker
    rng = np.random.default_rng(5)
    x0, y0 = rng.integers(1800, 2300, 3000), rng.integers(1200, 1600, 3000)
    cells = {qk(int(x + dx), int(y + dy), 12): float(rng.integers(1, 20))
             for x, y, k in zip(x0, y0, rng.integers(1, 5, 3000), strict=True)
             for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1))[:k]}
    counts = make_counts(cells, "islands")
    cap = counts.total / 49.5
    # WHEN a compact spec is built and measured under the same load
    spec = build_spec(counts, cap)
    m = evaluate(spec, counts)
    median_regions, _ = m.regions_per_worker
    # THEN each worker owns a few regions instead of its ~60 islands, every region is one piece, and the load each
    # worker gets is the load it was planned for (no territory reaches into another worker's cells)
    assert median_regions <= 15 and m.contiguous and regions_connected(spec, 12)
    assert m.worker_count <= m.lower_bound + 1 and m.max_utilisation <= 1 + 1e-9
    for w in m.workers:
        assert w.load == pytest.approx(w.planned_load, rel=1e-9, abs=1e-9)
