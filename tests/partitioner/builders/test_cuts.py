"""Tests for partitioner.builders.cuts: cut windows and the cut budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from build_data import cells_of, dumbbell

from geokernel.geo.tiles import arrays_to_quadkeys
from partitioner.builders.carving import carve_cells
from partitioner.builders.cuts import CutBudget
from partitioner.builders.packing import pack_best_fit
from partitioner.load.counts import Grid


def test_a_cut_with_slack_goes_through_the_thin_bridge_between_two_hot_spots() -> None:
    # GIVEN two dense 10x10 blocks (800 each) joined by a one-cell road (10), under a cap of 1000
    x, y, w = dumbbell(300)
    block_b = x >= 20
    # WHEN carved exactly, and with a window of slack
    exact = carve_cells(Grid(10, x, y, w), 1000.0, bridge_levels=0)
    loose = carve_cells(Grid(10, x, y, w), 1000.0, bridge_levels=0, window=math.inf)
    # THEN the exact cut bites into the second block, the loose one keeps both blocks whole
    b_quadkeys = set(arrays_to_quadkeys(x[block_b], y[block_b], 10))

    def pieces_holding_b(regions: list) -> int:
        return sum(1 for r in regions if cells_of(r.quadkeys, 10) & b_quadkeys)

    assert len(exact) == len(loose) == 2
    assert pieces_holding_b(exact) == 2
    assert pieces_holding_b(loose) == 1
    assert max(r.load for r in loose) <= 1000.0


@pytest.mark.parametrize(("workers", "whole_dumbbells"), [(4, 0), (5, 2)])
def test_a_cut_budget_spends_slack_only_on_the_cuts_the_packing_can_afford(workers: int,
                                                                           whole_dumbbells: int) -> None:
    # GIVEN two dumbbells (exact cuts ~1000 + ~610, loose cuts at the road ~805 + ~805) and two lone cells of
    # 380: exact cuts pack onto 4 workers (each 610 piece with a lone cell), loose ones need 5
    (ax, ay, aw), (bx, by, bw) = dumbbell(300), dumbbell(400)
    x = np.concatenate([ax, bx, [100, 100]]).astype(np.int64)
    y = np.concatenate([ay, by, [100, 600]]).astype(np.int64)
    w = np.concatenate([aw, bw, [380.0, 380.0]])
    # WHEN carved with a budget of `workers` workers of 1000
    budget = CutBudget(windows=(math.inf,), workers=workers, pack_cap=1000.0)
    regions = carve_cells(Grid(10, x, y, w), 1000.0, bridge_levels=0, budget=budget)
    # THEN exactly the affordable number of dumbbells is cut at its road (the far block whole, not bitten
    # into by an exact cut) and the regions still pack onto that many workers
    far_blocks = [set(arrays_to_quadkeys(x[m], y[m], 10)) for m in
                  ((x >= 20) & (x < 30) & (y // 100 == 3), (x >= 20) & (x < 30) & (y // 100 == 4))]
    assert sum(any(b <= cells_of(r.quadkeys, 10) for r in regions) for b in far_blocks) == whole_dumbbells
    assert max(pack_best_fit([r.load for r in regions], 1000.0)) + 1 == workers
    assert sum(r.load for r in regions) == pytest.approx(w.sum())
