"""Cutting a region of grid cells to size: the region of some cells, and a shave of a region down to a load.

A sticky repair (:mod:`partitioner.builders.repair`, :class:`partitioner.builders.plan.RepairPlan`) cuts an
overloaded region or worker down to the cap moving as little load as it can: :func:`shave` keeps the largest
connected piece within the load asked and returns the pieces shaved off.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from geokernel.geo.graph import components, group_indices
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys
from partitioner.builders.bisection import axes
from partitioner.builders.region import Region
from partitioner.load.counts import Grid


def region_of(cells: IntArray, grid: Grid) -> Region:
    """The region listing ``cells`` (grid cells, by index) with their load (quadkeys made for these cells only: a
    repair re-makes few regions of a grid of tens of thousands of cells)."""
    return Region(tuple(sorted(arrays_to_quadkeys(grid.x[cells], grid.y[cells], grid.zoom))),
                  float(grid.weight[cells].sum()))


class Shaved(NamedTuple):
    """A region cut to size: the piece it keeps and the connected pieces shaved off."""

    keep: IntArray
    pieces: list[IntArray]


class Side(NamedTuple):
    """One way to shave a region: from one side, the load it moves, the cells kept and the cells shaved."""

    moved: float
    keep: IntArray
    shaved: IntArray


def shave(cells: IntArray, grid: Grid, keep_load: float, below: float = math.inf) -> Shaved | None:
    """Cut a region's cells so the piece kept is at most ``keep_load``; return it and the shaved pieces.

    Returns None when no cut keeps a non-empty piece within ``keep_load``, or when every cut moves ``below`` or
    more load (a caller that only wants a shave cheaper than something else says so: the sides that cannot be
    cheaper are not split into components).

    Notes
    -----
    A side moves at least the load past its cut (splitting the kept piece only adds to that), so a side whose
    load past the cut already reaches ``below`` or the best side so far is skipped: the result is the same as
    trying every side.
    """
    u, v = axes(grid.x[cells], grid.y[cells], grid.zoom)
    w = grid.weight[cells]
    # shave from the side whose edge cells add up to the excess: try all four sides, keep the cheapest (the first
    # of the four in this order on a tie); the sides are tried cheapest load-past-the-cut first, so the others can
    # usually be skipped without splitting their kept piece into components
    tries: list[tuple[float, int, IntArray, int]] = []
    orders = [seq for order in (np.lexsort((v, u)), np.lexsort((u, v))) for seq in (order, order[::-1])]
    for k, seq in enumerate(orders):
        csum = np.cumsum(w[seq])
        cut = min(int(np.searchsorted(csum, keep_load * (1 + 1e-12), side="right")), len(cells) - 1)
        if cut >= 1:
            tries.append((float(csum[-1] - csum[cut - 1]), k, seq, cut))
    best: Side | None = None
    best_k = len(orders)
    for past_cut, k, seq, cut in sorted(tries, key=lambda t: (t[0], t[1])):
        if past_cut * (1 - 1e-9) >= below or (best is not None and past_cut * (1 - 1e-9) > best.moved):
            break  # neither this side nor a later one can be cheaper
        keep, shaved = cells[seq[:cut]], cells[seq[cut:]]
        n, labels = components(grid.x[keep], grid.y[keep], grid.zoom)
        if n > 1:  # keep the heaviest connected piece (the first on a tie), shave the rest too
            in_big = labels == int(np.argmax(np.bincount(labels, weights=grid.weight[keep], minlength=n)))
            shaved = np.concatenate([shaved, np.sort(keep[~in_big])])
            keep = keep[in_big]
        side = Side(float(grid.weight[shaved].sum()), keep, shaved)
        if best is None or (side.moved, k) < (best.moved, best_k):
            best, best_k = side, k
    if best is None:
        return None
    n, labels = components(grid.x[best.shaved], grid.y[best.shaved], grid.zoom)
    return Shaved(best.keep, [best.shaved[g] for g in group_indices(labels, n)])
