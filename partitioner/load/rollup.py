"""Rolled-up quadtrees: each row's nearest listed ancestor, and the check that a row holds its sub-cells' load.

A load file may list a tile and deeper tiles under it (the aggregation job's rolled-up quadtree):
a deeper row refines the load of its *nearest listed ancestor*. :func:`nearest_ancestors` finds
that ancestor for every row in one sorted search per zoom; :func:`check_rollup` refuses files in
which a row's listed sub-cells weigh more than the row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from geokernel.errors import CountsError
from geokernel.geo.quadtree import tree_keys
from geokernel.geo.shape import is_member
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys

FloatArray = npt.NDArray[np.float64]


def nearest_ancestors(x: IntArray, y: IntArray, z: IntArray, *, first_deep: int, grid_zoom: int) -> IntArray:
    """Per row (from ``first_deep`` on), the index of its nearest listed ancestor (-1: none, or before ``first_deep``)."""
    keys = tree_keys(x, y, z)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    out = np.full(len(x), -1, dtype=np.int64)
    pending = np.ones(len(x), dtype=bool)  # rows whose nearest listed ancestor is not found yet
    pending[:first_deep] = False
    for a in range(int(z.max(initial=grid_zoom)) - 1, grid_zoom - 1, -1):
        rows = np.flatnonzero(pending & (z > a))
        if len(rows) == 0:
            continue
        shift = z[rows] - a
        anc = tree_keys(x[rows] >> shift, y[rows] >> shift, a)
        hit = is_member(anc, sorted_keys)
        out[rows[hit]] = order[np.searchsorted(sorted_keys, anc[hit])]
        pending[rows[hit]] = False
    return out


def check_rollup(tiles: tuple[IntArray, IntArray, IntArray], weights: FloatArray, lines: IntArray, source: str) -> None:
    """Refuse a rolled-up quadtree where a row's listed sub-cells weigh more than the row itself.

    A deeper row refines the load of its nearest listed ancestor, so the ancestor must hold at
    least the sum of them (a relative tolerance of 1e-9 allows for rounding). The error names
    the first such row (in file order), its weight, one of its sub-cells and their sum.
    """
    x, y, z = tiles
    if len(z) == 0 or int(z.min()) == int(z.max()):
        return
    anc = nearest_ancestors(x, y, z, first_deep=0, grid_zoom=int(z.min()))
    has = anc >= 0
    under = np.bincount(anc[has], weights=weights[has], minlength=len(weights))
    over = under > weights * (1.0 + 1e-9) + 1e-9
    if not over.any():
        return
    rows = np.flatnonzero(over)
    i = int(rows[np.argmin(lines[rows])])
    child = int(np.flatnonzero(anc == i)[0])
    q, c = (arrays_to_quadkeys(x[k:k + 1], y[k:k + 1], int(z[k]))[0] for k in (i, child))
    raise CountsError(f"{source} line {int(lines[i])}: quadkey {q!r} has weight {weights[i]:g} but its listed "
                      f"sub-cells (such as {c!r} on line {int(lines[child])}) add up to {under[i]:g}; a row "
                      "must hold at least the load of the deeper rows under it")
