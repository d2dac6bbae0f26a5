"""Territories: a worker's small regions own the coarsest quadtree squares that hold no one else's load.

On sparse data a worker's small regions (gathered near each other, :mod:`partitioner.builders.gather`)
are islands with empty tiles between them. Each island's squares grow to the coarsest ancestor that
no other listed square reaches into, and the grown squares of one worker that touch (8-neighbours,
across sizes and the antimeridian) become one region. So a cold worker lists a few squares instead
of hundreds of islands, and every region is still contiguous.

Definitions
-----------
pure
    A square is pure for worker ``w`` when every listed square inside it is a movable square of
    ``w``. Squares of the other regions (the *fixed* ones: carved pieces, pieces of hot cells, a
    worker's own big regions) and hash-split cells (*blockers*) are never inside a grown square, so
    no grown square covers another partition's load or listed cells, and none makes a hole in
    another region (the longest-prefix rule never cuts one).

Notes
-----
* Growth stops at ``min_zoom``: a worker never claims more than a square of that zoom around an
  island (the caller keeps it a few levels above the grid, so new load far away still lands on
  the catch-all).
* Pure squares of two workers never nest (the larger would hold the other's square), and two
  squares of one worker that nest grow to the same square, so the grown squares are disjoint.
* An island's squares are 8-connected, so they grow into one region: an island's load lands in one
  territory. Squares already coarser than ``min_zoom`` do not grow but still join what they touch.
* Inputs as :func:`partitioner.builders.carving.label_squares` gives them: the squares of different items
  never nest, and every movable item lists at least one square.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.geo.graph import components_of_pairs
from geokernel.geo.quadtree import square_spans, tree_keys
from geokernel.geo.tiles import FloatArray, IntArray

_AROUND = tuple((dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy)


class Squares(NamedTuple):
    """Quadtree squares (tile ``x``, ``y`` at zoom ``z``) and the item (region) each belongs to."""

    x: IntArray
    y: IntArray
    z: IntArray
    item: IntArray


class Territories(NamedTuple):
    """The regions after merging: their squares, worker and load; ``of_item``: the region of each input item."""

    squares: Squares  # ``item`` is the new region
    workers: IntArray
    loads: FloatArray
    of_item: IntArray


def territories(squares: Squares, blockers: Squares, worker: IntArray, load: FloatArray,
                movable: npt.NDArray[np.bool_], min_zoom: int) -> Territories:
    """Grow the movable items' squares to their coarsest pure ancestors and merge touching ones per worker.

    Parameters
    ----------
    squares : Squares
        Every square every item lists (items ``0 .. len(worker) - 1``).
    blockers : Squares
        Other listed squares no territory may reach into (hash-split cells; ``item`` unused).
    worker, load : array
        Worker and load of each item.
    movable : bool array
        Items that may grow and merge; the others stay as they are, in their order, first.
    min_zoom : int
        The coarsest zoom a square may grow to (at least 1: zoom 0 is the catch-all's root).

    Returns
    -------
    Territories
        Fixed items first (one region each, unchanged), then one region per connected group of
        grown squares of one worker, ordered by worker and first square.
    """
    n_items = len(worker)
    fixed_items = np.flatnonzero(~movable)
    item_region = np.full(n_items, -1, dtype=np.int64)
    item_region[fixed_items] = np.arange(len(fixed_items))
    on_fixed = ~movable[squares.item]
    mov = np.flatnonzero(~on_fixed)
    if len(mov) == 0:
        return Territories(Squares(squares.x, squares.y, squares.z, item_region[squares.item]),
                           worker[fixed_items], load[fixed_items], item_region)
    gx, gy, gz = _grow(squares, blockers, worker, movable, max(1, min_zoom))
    gw = worker[squares.item[mov]]
    keys = tree_keys(gx, gy, gz)
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    ux, uy, uz, uw = gx[first], gy[first], gz[first], gw[first]
    n_comp, comp = _touching(ux, uy, uz, uw)
    # number the groups by worker, then by their first square
    first_sq = np.full(n_comp, len(uniq), dtype=np.int64)
    np.minimum.at(first_sq, comp, np.arange(len(uniq)))
    rank = np.empty(n_comp, dtype=np.int64)
    rank[np.lexsort((first_sq, uw[first_sq]))] = np.arange(n_comp)
    base = len(fixed_items)
    region_of_square = base + rank[comp]
    mov_items = squares.item[mov]
    item_region[mov_items] = region_of_square[inv]
    n_regions = base + n_comp
    workers = np.empty(n_regions, dtype=np.int64)
    workers[:base] = worker[fixed_items]
    workers[region_of_square] = uw
    loads = np.zeros(n_regions)
    loads[:base] = load[fixed_items]
    moved = np.flatnonzero(movable)
    np.add.at(loads, item_region[moved], load[moved])
    fx, fy, fz = squares.x[on_fixed], squares.y[on_fixed], squares.z[on_fixed]
    out = Squares(np.concatenate([fx, ux]), np.concatenate([fy, uy]), np.concatenate([fz, uz]),
                  np.concatenate([item_region[squares.item[on_fixed]], region_of_square]))
    return Territories(out, workers, loads, item_region)


def _grow(squares: Squares, blockers: Squares, worker: IntArray, movable: npt.NDArray[np.bool_], min_zoom: int
          ) -> tuple[IntArray, IntArray, IntArray]:
    """The coarsest pure ancestor (down to ``min_zoom``) of every movable item's square."""
    ax = np.concatenate([squares.x, blockers.x])
    ay = np.concatenate([squares.y, blockers.y])
    az = np.concatenate([squares.z, blockers.z])
    is_mov = movable[squares.item]
    owner = np.concatenate([np.where(is_mov, worker[squares.item], -1), np.full(len(blockers.x), -1, dtype=np.int64)])
    top = int(az.max())
    start, _ = square_spans(ax, ay, az, top)
    order = np.argsort(start, kind="stable")
    starts, owners = start[order], owner[order]
    # run_end[i]: the first position after i whose owner differs from owners[i]
    change = np.flatnonzero(owners[1:] != owners[:-1]) + 1
    bounds = np.append(change, len(owners))
    run_end = bounds[np.searchsorted(bounds, np.arange(len(owners)), side="right")]
    n_sq = len(squares.x)
    mov = order[order < n_sq]  # the movable squares in Morton order (each level's ancestors come sorted too)
    mov = mov[is_mov[mov]]
    x, y, z = squares.x[mov], squares.y[mov], squares.z[mov]
    corner = start[mov]  # an ancestor's interval starts at its square's corner code with the finer digits cleared
    w = worker[squares.item[mov]]
    best = z.copy()
    alive = z > min_zoom
    zoom = int(z.max()) - 1 if len(z) else min_zoom - 1
    live = np.flatnonzero(alive)  # the squares still growing, in Morton order
    while zoom >= min_zoom and len(live):
        k = live[z[live] > zoom]
        size = np.int64(1) << (2 * (top - zoom))
        a0 = corner[k] & ~(size - 1)
        a1 = a0 + size
        # the ancestors come sorted: search each distinct one once (squares share few ancestors at coarse zooms)
        first = np.ones(len(a0), dtype=bool)
        first[1:] = a0[1:] != a0[:-1]
        of = np.cumsum(first) - 1
        lo = np.searchsorted(starts, a0[first], side="left")[of]
        hi = np.searchsorted(starts, a1[first], side="left")[of]
        pure = (owners[lo] == w[k]) & (run_end[lo] >= hi)
        best[k[pure]] = zoom
        alive[k[~pure]] = False
        live = live[alive[live]]
        zoom -= 1
    d = z - best
    rank = np.empty(n_sq, dtype=np.int64)
    rank[mov] = np.arange(len(mov))
    back = rank[np.flatnonzero(is_mov)]  # the squares' own order again
    return (x >> d)[back], (y >> d)[back], best[back]


def _touching(x: IntArray, y: IntArray, z: IntArray, w: IntArray) -> tuple[int, IntArray]:
    """Connected groups of squares of one worker that share an edge or a corner (the squares are disjoint).

    Notes
    -----
    Each square's 8 neighbours at its own zoom are looked up among the squares' quadtree intervals (Morton codes
    at the finest zoom): disjoint squares hold a tile in at most one of them, found with one binary search per
    direction, whatever the zooms. A finer square starting inside the neighbour tile does not hold it (and then
    no coarser one does); it finds this square from its own side.
    """
    top = int(z.max())
    starts, ends = square_spans(x, y, z, top)
    order = np.argsort(starts, kind="stable")
    s_starts, s_ends = starts[order], ends[order]
    s_z = z[order]
    pairs_i: list[IntArray] = []
    pairs_j: list[IntArray] = []
    for dx, dy in _AROUND:
        ny = y + dy
        k = np.flatnonzero((ny >= 0) & (ny < (np.int64(1) << z)))
        nx = (x[k] + dx) & ((np.int64(1) << z[k]) - 1)  # the antimeridian: columns wrap
        want, _ = square_spans(nx, ny[k], z[k], top)
        at = np.searchsorted(s_starts, want, side="right") - 1
        ok = at >= 0
        k, want, at = k[ok], want[ok], at[ok]
        hit = (want < s_ends[at]) & (s_z[at] <= z[k])
        k, j = k[hit], order[at[hit]]
        same = w[j] == w[k]
        pairs_i.append(k[same])
        pairs_j.append(j[same])
    i = np.concatenate(pairs_i) if pairs_i else np.zeros(0, dtype=np.int64)
    j = np.concatenate(pairs_j) if pairs_j else np.zeros(0, dtype=np.int64)
    return components_of_pairs(len(x), i, j)
