"""Tests for partitioner.build.fresh: carve and pack from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.build.fresh import fresh_placement
from partitioner.build.hot import split_hot_cells
from partitioner.build.packing import lower_bound
from partitioner.counts import Counts


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
