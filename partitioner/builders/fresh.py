"""A fresh compact build: carve the cold cells, pack the regions, pour the hot cells, keep the better of two carves."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from geokernel.geo.tiles import FloatArray, IntArray, quadkeys_to_arrays, tile_codes
from partitioner.builders.carving import (
    BRIDGE_LEVELS,
    ComponentMemo,
    Labels,
    label_squares,
    region_labels,
    squares_to_regions,
)
from partitioner.builders.cuts import CutBudget
from partitioner.builders.gather import curve_keys, gather
from partitioner.builders.hot import HotSplit, split_hot_cells
from partitioner.builders.packing import level_workers
from partitioner.builders.pour import Liquid, Share, pour
from partitioner.builders.region import Placement, Region
from partitioner.builders.territory import Squares, territories
from partitioner.load.counts import Counts, Grid

#: When hot cells and big cells leave the packing above ``lower bound + 1`` workers, the cold
#: cells above these shares of the cap are split by entity hash too, in turn (they fill rooms).
LIQUEFY = (0.5, 0.25)
#: Whole regions of at most this share of the cap are gathered by place into territories (see :func:`settle`).
GATHER_SHARE = 0.1
#: A territory's squares grow at most this many zooms above the grid.
TERRITORY_LEVELS = 8
#: Territories are made only when the workers hold more regions than this on average: on dense data a worker's few
#: regions keep their own (more compact) shapes, and the spec stays as it was before territories existed.
FRAGMENTED = 15


class _Candidate(NamedTuple):
    """One carve, packed and poured."""

    workers: int  # workers it needs, any count up to the target counted as the target
    cut_load: float  # boundary load of its cuts
    labels: Labels
    workers_of: list[int]  # worker of each region: the hot pieces, the carved regions, then the shares
    shares: list[Share]
    used: int  # workers it really uses

    @property
    def rank(self) -> tuple[int, float]:
        """Fewest workers first, then the least boundary load."""
        return self.workers, self.cut_load


class FreshBuild(NamedTuple):
    """A fresh placement and the hot step it was built with."""

    placement: Placement
    hot: HotSplit


def fresh_build(counts: Counts, grid: Grid, cap: float, lb: int) -> FreshBuild:
    """Split the hot cells and place everything from scratch (:func:`fresh_placement`).

    Notes
    -----
    If that needs more than ``lb + 1`` workers, cells within the cap but big enough to
    leave workers short (above each share of :data:`LIQUEFY` of the cap, in turn) are
    split by entity hash too and the build is made again; the build with the fewest
    workers is kept (the first on a tie).
    """
    hot = split_hot_cells(counts, grid, cap)
    best = FreshBuild(fresh_placement(grid, cap, hot, lb), hot)
    for share in LIQUEFY:
        if best.placement.worker_count <= lb + 1:
            break
        big = np.flatnonzero((grid.weight > share * cap) & (grid.weight <= cap))
        if len(big) == 0:
            continue
        hot_big = split_hot_cells(counts, grid, cap, also=big)
        trial = FreshBuild(fresh_placement(grid, cap, hot_big, lb), hot_big)
        if trial.placement.worker_count < best.placement.worker_count:
            best = trial
    return best


def fresh_placement(grid: Grid, cap: float, hot: HotSplit, lb: int) -> Placement:
    """Carve and pack from scratch, within the lower bound + 1 workers and with the least cut boundary load.

    Parameters
    ----------
    grid : Grid
        Every grid cell of the counts (hot ones included: the hot step handles them).
    cap : float
        Worker capacity the regions are packed to.
    hot : HotSplit
        The pieces the hot cells became (they come first in the placement) and the cells
        to split by entity hash (their shares come last).
    lb : int
        The lower bound on workers at ``cap``.

    Notes
    -----
    Two carves are made: one at a slightly lower cap (half the average slack that
    ``lower_bound + 1`` workers leave, so that routine load noise does not push a
    worker over the cap right after a deploy) and one at the real cap, whose
    exact cuts leave more slack to the loose ones. Both are packed at the real cap, the
    hash-split cells poured into the room left (next to their neighbours first,
    :func:`partitioner.builders.pour.pour`) and levelled; the one with fewer workers
    (counting any number up to the target as equal), then the lower boundary load of its
    cuts, is kept (the headroom one on a tie).
    """
    taken = np.zeros(len(grid.x), dtype=bool)
    taken[hot.taken] = True
    cold_idx = np.flatnonzero(~taken & (grid.weight > 0))
    cold = grid.take(cold_idx)
    total = float(grid.weight.sum())
    slack = ((lb + 1) * cap - total) / (lb + 1)
    margin = min(0.05 * cap, max(0.0, 0.5 * slack))
    # cut windows: any slack, 20 %, 10 % and 5 % of a worker, one spare worker spread over the cuts (exact is implied)
    spare = max(0.0, (lb + 1) * cap - total)
    budget = CutBudget(windows=(math.inf, 0.2 * cap, 0.1 * cap, 0.05 * cap, spare / max(lb, 1)), workers=lb + 1,
                       pack_cap=cap, other_loads=tuple(r.load for r in hot.regions),
                       liquid=tuple(q.load for q in hot.liquid))
    best: _Candidate | None = None
    memo = ComponentMemo(cold)  # both carves mostly look for the components of the same cells
    for carve_cap in (cap - margin, cap) if margin > 0 else (cap,):
        cand = _candidate(grid, cold, cold_idx, region_labels(cold, carve_cap, BRIDGE_LEVELS, 0.0, budget, memo),
                          hot, cap, lb)
        if best is None or cand.rank < best.rank:
            best = cand
        if cand.workers == lb + 1 and cand.labels.cut_load <= cand.labels.cut_floor:  # fits, cuts their cheapest
            break
    assert best is not None
    unfilled = None
    if fragmented(len(best.workers_of), len(set(best.workers_of))):  # the small islands grow into territories: no gap filling for them
        region_load = np.bincount(best.labels.labels, weights=cold.weight, minlength=best.labels.n_regions)
        unfilled = np.arange(best.labels.n_regions) < best.labels.whole
        unfilled &= region_load <= GATHER_SHARE * cap
    squares, loads = label_squares(cold, best.labels, bridge_levels=BRIDGE_LEVELS, fill=True,
                                   blocked=tile_codes(grid.x[taken], grid.y[taken], grid.zoom), unfilled=unfilled)
    shares = [Region((hot.liquid[s.liquid].quadkey,), s.load, (s.lo, s.hi)) for s in best.shares]
    return settle(grid.zoom, cap, hot.regions, squares, loads, best.labels.whole, shares, best.workers_of)


def fragmented(regions: int, workers: int) -> bool:
    """True when ``workers`` hold more than :data:`FRAGMENTED` of the ``regions`` on average: a build (fresh or
    sticky) then merges the small islands into territories."""
    return regions > FRAGMENTED * max(1, workers)


def settle(zoom: int, cap: float, fixed: list[Region], squares: Squares, loads: FloatArray, whole: int,
           shares: list[Region], workers_of: list[int]) -> Placement:
    """Gather the small whole regions by place and merge each worker's into territories (fragmented data only).

    ``fixed``: regions that keep their squares (pieces of hot cells); ``squares`` and ``loads``: the carved
    regions (the first ``whole`` of them whole clusters or components); ``shares``: entity-hash shares;
    ``workers_of``: the worker of each, in that order. Whole regions of at most :data:`GATHER_SHARE` of
    the cap move along the Hilbert curve (:func:`partitioner.builders.gather.gather`) and grow into
    territories up to :data:`TERRITORY_LEVELS` zooms above the grid
    (:func:`partitioner.builders.territory.territories`). When the workers hold at most :data:`FRAGMENTED` regions on
    average, the regions are returned as they are.

    Notes
    -----
    A territory lists coarse squares around a worker's islands, so its outline is blockier than the islands'
    own (on the bench's sparse_global set the median P^2/(4 pi A) goes from 1.27 to 1.54): the price of a
    worker owning a few regions instead of hundreds, paid only on fragmented data.
    """
    n_fixed, n_carved = len(fixed), len(loads)
    if not fragmented(len(workers_of), len(set(workers_of))):  # few regions per worker: keep their shapes
        return Placement(tuple(fixed + squares_to_regions(squares, loads) + shares), tuple(workers_of))
    hx, hy, hz = quadkeys_to_arrays([q for r in fixed for q in r.quadkeys])
    sx, sy, sz = quadkeys_to_arrays([r.quadkeys[0] for r in shares])
    hitem = np.repeat(np.arange(n_fixed, dtype=np.int64), [len(r.quadkeys) for r in fixed])
    items = Squares(np.concatenate([hx, squares.x]), np.concatenate([hy, squares.y]),
                    np.concatenate([hz, squares.z]), np.concatenate([hitem, squares.item + n_fixed]))
    n_items = n_fixed + n_carved
    item_load = np.concatenate([np.array([r.load for r in fixed], dtype=np.float64), loads])
    movable = np.zeros(n_items, dtype=bool)
    movable[n_fixed:n_fixed + whole] = loads[:whole] <= GATHER_SHARE * cap
    top = max(zoom, int(items.z.max()) if len(items.z) else zoom, int(sz.max()) if len(sz) else zoom)
    first = np.full(n_items, len(items.z), dtype=np.int64)
    np.minimum.at(first, items.item, np.arange(len(items.z)))
    keys = curve_keys(np.concatenate([items.x[first], sx]), np.concatenate([items.y[first], sy]),
                      np.concatenate([items.z[first], sz]), top).tolist()
    all_loads = item_load.tolist() + [r.load for r in shares]
    workers = gather(workers_of, all_loads, np.flatnonzero(movable).tolist(), keys, cap)
    terr = territories(items, Squares(sx, sy, sz, np.zeros(len(sx), dtype=np.int64)),
                       np.asarray(workers[:n_items], dtype=np.int64), item_load, movable,
                       max(1, zoom - TERRITORY_LEVELS))
    regions = squares_to_regions(terr.squares, terr.loads)
    return Placement(tuple(regions + shares), tuple(terr.workers.tolist() + workers[n_items:]))


def _candidate(grid: Grid, cold: Grid, cold_idx: IntArray, carved: Labels, hot: HotSplit, cap: float, lb: int
               ) -> _Candidate:
    """Pack one carve's regions (after the hot pieces), pour the hash-split cells, level the workers."""
    solids = [*(r.load for r in hot.regions),
              *np.bincount(carved.labels, weights=cold.weight, minlength=carved.n_regions).tolist()]
    near = _near_regions(grid, hot.liquid, cold_idx, carved.labels, len(hot.regions))
    pouring = pour(solids, [q._replace(near=n) for q, n in zip(hot.liquid, near, strict=True)], cap, lb + 1)
    loads = solids + [s.load for s in pouring.shares]
    workers_of = level_workers(loads, pouring.bins_of + [s.bin for s in pouring.shares], cap)
    used = max(workers_of, default=-1) + 1
    return _Candidate(max(used, lb + 1), carved.cut_load, carved, workers_of, pouring.shares, used)


_AROUND = tuple((dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy)


def _near_regions(grid: Grid, liquid: list[Liquid], cold_idx: IntArray, labels: IntArray, offset: int
                  ) -> list[tuple[int, ...]]:
    """Per hash-split cell, the carved regions next to it (most shared cells first), as solid item indices."""
    cells = np.array([q.cell for q in liquid], dtype=np.int64)
    out: list[tuple[int, ...]] = [() for _ in liquid]
    with_cell = np.flatnonzero(cells >= 0)
    if len(with_cell) == 0 or len(cold_idx) == 0:
        return out
    n = 1 << grid.zoom
    codes = tile_codes(grid.x[cold_idx], grid.y[cold_idx], grid.zoom)
    order = np.argsort(codes)
    sorted_codes = codes[order]
    x, y = grid.x[cells[with_cell]], grid.y[cells[with_cell]]
    found: list[list[int]] = [[] for _ in with_cell]
    for dx, dy in _AROUND:
        ny = y + dy
        want = (((x + dx) % n) << grid.zoom) | np.clip(ny, 0, n - 1)
        pos = np.minimum(np.searchsorted(sorted_codes, want), len(sorted_codes) - 1)
        hit = (sorted_codes[pos] == want) & (ny >= 0) & (ny < n)
        for k in np.flatnonzero(hit).tolist():
            found[k].append(int(labels[order[pos[k]]]) + offset)
    for k, regions in zip(with_cell.tolist(), found, strict=True):
        out[k] = tuple(sorted(set(regions), key=lambda r: (-regions.count(r), r)))
    return out
