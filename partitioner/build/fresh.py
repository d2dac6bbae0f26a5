"""A fresh compact build: carve the cold cells, pack the regions onto workers, keep the better of two carves."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from partitioner.build.carving import BRIDGE_LEVELS, Labels, label_regions, region_labels
from partitioner.build.cuts import CutBudget
from partitioner.build.hot import HotSplit
from partitioner.build.packing import level_workers, pack_best_fit
from partitioner.build.region import Placement
from partitioner.counts import Grid
from partitioner.tiles import tile_codes


class _Candidate(NamedTuple):
    """One carve, packed."""

    workers: int  # workers it needs, any count up to the target counted as the target
    cut_load: float  # boundary load of its cuts
    labels: Labels
    workers_of: list[int]  # worker of each region: the hot ones first, then the carved ones

    @property
    def rank(self) -> tuple[int, float]:
        """Fewest workers first, then the least boundary load."""
        return self.workers, self.cut_load


def fresh_placement(grid: Grid, cap: float, hot: HotSplit, lb: int) -> Placement:
    """Carve and pack from scratch, within the lower bound + 1 workers and with the least cut boundary load.

    Parameters
    ----------
    grid : Grid
        Every grid cell of the counts (hot ones included: they are split already, in ``hot``).
    cap : float
        Worker capacity the regions are packed to.
    hot : HotSplit
        The regions the hot cells became; they come first in the placement.
    lb : int
        The lower bound on workers at ``cap``.

    Notes
    -----
    Two carves are made: one at a slightly lower cap (half the average slack that
    ``lower_bound + 1`` workers leave, so that routine load noise does not push a
    worker over the cap right after a deploy) and one at the real cap, whose
    exact cuts leave more slack to the loose ones. Both are packed at the real
    cap and levelled; the one with fewer workers (counting any number up to the
    target as equal), then the lower boundary load of its cuts, is kept (the
    headroom one on a tie).
    """
    is_hot = grid.weight > cap
    cold = grid.take(~is_hot & (grid.weight > 0))
    total = float(grid.weight.sum())
    slack = ((lb + 1) * cap - total) / (lb + 1)
    margin = min(0.05 * cap, max(0.0, 0.5 * slack))
    # cut windows: any slack, 20 %, 10 % and 5 % of a worker, one spare worker spread over the cuts (exact is implied)
    spare = max(0.0, (lb + 1) * cap - total)
    budget = CutBudget(windows=(math.inf, 0.2 * cap, 0.1 * cap, 0.05 * cap, spare / max(lb, 1)), workers=lb + 1,
                       pack_cap=cap, other_loads=tuple(r.load for r in hot.regions))
    best: _Candidate | None = None
    for carve_cap in (cap - margin, cap) if margin > 0 else (cap,):
        carved = region_labels(cold, carve_cap, BRIDGE_LEVELS, 0.0, budget)
        loads = [*budget.other_loads,
                 *np.bincount(carved.labels, weights=cold.weight, minlength=carved.n_regions).tolist()]
        workers_of = level_workers(loads, pack_best_fit(loads, cap), cap)
        cand = _Candidate(max(max(workers_of, default=0) + 1, lb + 1), carved.cut_load, carved, workers_of)
        if best is None or cand.rank < best.rank:
            best = cand
        if cand.workers == lb + 1 and carved.cut_load <= carved.cut_floor:  # fits, every cut its cheapest way
            break
    assert best is not None
    regions = label_regions(cold, best.labels, bridge_levels=BRIDGE_LEVELS, fill=True,
                            blocked=tile_codes(grid.x[is_hot], grid.y[is_hot], grid.zoom))
    return Placement(tuple(hot.regions + regions), tuple(best.workers_of))
