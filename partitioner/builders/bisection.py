"""Cutting one connected set of cells into pieces within the cap by recursive bisection.

:func:`carve` cuts a component by recursive bisection: cells are ordered along the
longer axis and cut where the first side holds ``k // 2`` full workers of load
(``k = ceil(load / cap)``). The exact cut is a staircase across the longer axis
(straight except for one step), so pieces are square-ish. A cut with a load *window*
may leave up to that much slack to pass where the fewest loaded neighbours are
separated, along either axis (:func:`cut_at`). Which window each component gets is
:mod:`partitioner.builders.cuts`' choice.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.geo.graph import components, group_indices, neighbour_pairs, run_components
from geokernel.geo.tiles import FloatArray, IntArray, unique_ints
from partitioner.load.counts import Grid

BoolArray = npt.NDArray[np.bool_]

Pairs = tuple[IntArray, IntArray]

#: A load within this factor of a multiple of the cap counts as fitting it (float sums of the same loads differ).
_TOL = 1 + 1e-12


class Cut(NamedTuple):
    """Where to cut cells taken in some order (the first side is ``order[:position]``) and what it costs."""

    position: int
    cost: float



class _Cutting(NamedTuple):
    """How one piece is cut: the cap, its full workers of load, the window, the boundary mask to mark (or None)."""

    cap: float
    k: int
    window: float
    boundary: BoolArray | None


class Order(NamedTuple):
    """Cells sorted by ``(u, v)`` with their ``u``, ``v`` and weights, gathered once and sliced down the recursion
    (a side of a cut in this order is a slice; in the other order, a mask keeps its order)."""

    cells: IntArray
    u: IntArray
    v: IntArray
    w: FloatArray

    def take(self, sel: slice | IntArray | BoolArray) -> Order:
        return Order(self.cells[sel], self.u[sel], self.v[sel], self.w[sel])


class Piece(NamedTuple):
    """Cells to carve; with ``by_x``/``by_y`` (the same cells sorted by ``(x, y)``/``(y, x)``, ``u`` the first
    axis) when known (:func:`sorted_piece`)."""

    cells: IntArray
    by_x: Order | None = None
    by_y: Order | None = None

    def load(self, w: FloatArray) -> float:
        """The piece's load, summed in the order of ``cells`` (the same float whichever copy holds them)."""
        for order in (self.by_x, self.by_y):
            if order is not None and order.cells is self.cells:
                return float(order.w.sum())
        return float(w[self.cells].sum())


def carve(idx: IntArray | Piece, grid: Grid, cap: float, *, window: float = 0.0, boundary: BoolArray | None = None
          ) -> list[IntArray]:
    """Recursively cut one connected set of cells into connected pieces within ``cap`` (see :func:`cut_at`).

    ``idx`` are cell indices into ``grid``, or a :class:`Piece` of them (its sorted orders found
    once for several carves, by :func:`sorted_piece`). With ``boundary`` (a mask over ``grid``'s cells), the
    cells of every pair a cut separates are marked in it: the cells on the pieces' boundaries,
    which :func:`cut_load` would find from all the pairs. Notes: cuts are priced from the pairs near them
    (:func:`_band_pairs`) and each side's connected pieces are found from its runs of cells
    (:func:`_side_components`), so no neighbour pairs are carried down the recursion. A piece
    that does not straddle the antimeridian carries its cells sorted along both axes down to
    its sides (:func:`_split_sorted`), so no piece is sorted again below the first.
    """
    w = grid.weight
    stack = [idx if isinstance(idx, Piece) else sorted_piece(idx, grid)]
    tag = np.empty(len(w), dtype=np.int64)  # scratch: the side of each cell of the piece being split
    done: list[IntArray] = []
    while stack:
        piece = stack.pop()
        cur = piece.cells
        load = piece.load(w)
        if load <= cap * _TOL or len(cur) == 1:
            # a single cell cannot be cut: callers only pass cells within the real cap
            done.append(cur)
            continue
        k = math.ceil(load / cap - 1e-12)
        if piece.by_x is not None:
            stack.extend(_split_sorted(piece, grid, _Cutting(cap, k, window, boundary), tag))
        else:
            stack.extend(Piece(c) for c in _split_general(cur, grid, _Cutting(cap, k, window, boundary)))
    return done


def sorted_piece(idx: IntArray, grid: Grid) -> Piece:
    """``idx`` as a piece, with its two sorted orders unless it spans half the globe's columns or more."""
    x, y, zoom = grid.x[idx], grid.y[idx], grid.zoom
    if len(idx) < 2 or int(x.max() - x.min()) >= (1 << zoom) // 2:
        return Piece(idx)
    lo_x, lo_y = int(x.min()), int(y.min())
    span_x, span_y = int(x.max()) - lo_x + 1, int(y.max()) - lo_y + 1
    ox = np.argsort((x - lo_x) * span_y + (y - lo_y))
    oy = np.argsort((y - lo_y) * span_x + (x - lo_x))
    w = grid.weight[idx]
    return Piece(idx, Order(idx[ox], x[ox], y[ox], w[ox]), Order(idx[oy], y[oy], x[oy], w[oy]))


def _split_sorted(piece: Piece, grid: Grid, how: _Cutting, tag: IntArray) -> list[Piece]:
    """Cut a piece whose sorted orders are known; its sides (or their connected parts) keep theirs.

    Notes
    -----
    The same cut as :func:`_split_general` makes (the orders it would sort are these ones:
    a piece within half the globe's columns is not unwrapped), found without sorting.
    """
    assert piece.by_x is not None and piece.by_y is not None
    bx, by = piece.by_x, piece.by_y
    ext_x, ext_y = int(bx.u[-1] - bx.u[0]), int(by.u[-1] - by.u[0])
    if ext_y >= (1 << grid.zoom) - 1:  # from pole to pole: neighbours may wrap
        return [Piece(c) for c in _split_general(piece.cells, grid, how)]
    cap, k, window = how.cap, how.k, how.window
    along_x = ext_x >= ext_y
    views = [bx, by] if along_x else [by, bx]
    if window <= 0:
        views = views[:1]
    cuts = [cut_at(np.cumsum(o.w), k, cap, window, None, None, o.w, (o.u, o.v)) for o in views]
    best = min(range(len(views)), key=lambda c: cuts[c].cost)  # the first on a tie
    cut, pos = views[best], cuts[best].position
    if how.boundary is not None:
        _mark_cut(how.boundary, cut.cells, _band_pairs(pos, pos, None, cut.u, cut.v), None, pos)
    other = views[1 - best] if len(views) == 2 else (by if along_x else bx)
    # the first side is every cell before the cut's cell in the cut's (u, v) order; the other order has the axes
    # swapped, so its cells compare as (v, u)
    u0, v0 = cut.u[pos], cut.v[pos]
    first = (other.v < u0) | ((other.v == u0) & (other.u < v0))
    out: list[Piece] = []
    for part, mine in ((slice(0, pos), first), (slice(pos, len(cut.cells)), ~first)):
        for group, rest in _side_parts(cut.take(part), other.take(mine), tag):
            out.append(Piece(group.cells, group, rest) if cut is bx else Piece(group.cells, rest, group))
    return out


def _side_parts(cells: Order, other: Order, tag: IntArray) -> list[tuple[Order, Order]]:
    """The connected parts of one side (``cells`` in its cut's order; ``other``: the same cells in the other
    order), each in both orders."""
    n, labels = _side_components(cells.u, cells.v, None)
    if n == 1:
        return [(cells, other)]
    tag[cells.cells] = labels
    groups = group_indices(labels, n)
    in_other = group_indices(tag[other.cells], n)
    return [(cells.take(g), other.take(h)) for g, h in zip(groups, in_other, strict=True)]


def _split_general(cur: IntArray, grid: Grid, how: _Cutting) -> list[IntArray]:
    """Cut a piece anywhere on the globe (unwrapped at the antimeridian, neighbours wrapping if it circles it)."""
    x, y, w, zoom = grid.x, grid.y, grid.weight, grid.zoom
    window = how.window
    u, v = axes(x[cur], y[cur], zoom)
    # unwrapped coordinates make neighbours exactly the cells one step apart, unless a piece circles the globe
    circles = int(max(u.max() - u.min(), v.max() - v.min())) >= (1 << zoom) - 1
    orders = [_order(u, v)]
    if window > 0:
        orders.append(_order(v, u))
    wc = w[cur]
    pairs = neighbour_pairs(x[cur], y[cur], zoom) if circles and (window > 0 or how.boundary is not None) else None
    coords = [(u, v), (v, u)] if window > 0 and not circles else [None, None]
    cuts = [cut_at(np.cumsum(wc[o]), how.k, how.cap, window, pairs, o, wc, coords[c]) for c, o in enumerate(orders)]
    best = min(range(len(orders)), key=lambda c: cuts[c].cost)  # the first on a tie
    cut, order = cuts[best], orders[best]
    prim, sec = (u, v) if best == 0 else (v, u)
    if how.boundary is not None:
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        near = pairs if pairs is not None else _band_pairs(cut.position, cut.position, order, prim, sec)
        _mark_cut(how.boundary, cur, near, rank, cut.position)
    out: list[IntArray] = []
    for side in (order[:cut.position], order[cut.position:]):
        cells = cur[side]
        n, labels = _side_components(prim[side], sec[side], None if not circles else (x[cells], y[cells], zoom))
        out.extend([cells] if n == 1 else [cells[g] for g in group_indices(labels, n)])
    return out


def _mark_cut(boundary: BoolArray, cells: IntArray, pairs: Pairs, rank: IntArray | None, position: int) -> None:
    """Mark in ``boundary`` the cells of the ``pairs`` (positions in ``cells``) that a cut at ``position`` separates.

    ``rank``: each position's rank in the order cut (None: positions are ranks).
    """
    i, j = pairs
    ri, rj = (i, j) if rank is None else (rank[i], rank[j])
    cut = (np.minimum(ri, rj) < position) & (np.maximum(ri, rj) >= position)
    boundary[cells[i[cut]]] = True
    boundary[cells[j[cut]]] = True


def _side_components(u: IntArray, v: IntArray, wrapped: tuple[IntArray, IntArray, int] | None
                     ) -> tuple[int, IntArray]:
    """8-connected components of cells sorted by ``(u, v)`` (labels in order of each one's first cell).

    ``wrapped``: the cells' tiles and zoom when the piece circles the globe (neighbours then wrap).
    """
    if _columns_connected(u, v):
        return 1, np.zeros(len(u), dtype=np.int64)
    if wrapped is not None:
        return components(*wrapped)
    return run_components(u, v)


def _columns_connected(u: IntArray, v: IntArray) -> bool:
    """A quick proof that cells sorted by ``(u, v)`` are 8-connected: gapless columns, each touching the next.

    False means "not proven" (the caller then computes the components).
    """
    if len(u) < 2:
        return True
    steps = np.flatnonzero(v[1:] != v[:-1] + 1)  # where v does not go on by one: only between columns, if gapless
    if np.any(u[steps] == u[steps + 1]):  # a gap inside a column
        return False
    first = np.concatenate([[0], np.flatnonzero(u[1:] != u[:-1]) + 1])
    if np.any(np.diff(u[first]) != 1):  # a missing column
        return False
    lo, hi = v[first], v[np.append(first[1:], len(v)) - 1]
    return bool(np.all((lo[1:] <= hi[:-1] + 1) & (lo[:-1] <= hi[1:] + 1)))


def _order(u: IntArray, v: IntArray) -> IntArray:
    """Cells ordered by ``u``, then ``v`` (the pairs are unique, so any sort gives this one order)."""
    key = (u - u.min()) * (int(v.max() - v.min()) + 1) + (v - v.min())
    order: IntArray = np.argsort(key)
    return order


def cut_at(csum: FloatArray, k: int, cap: float, window: float, pairs: Pairs | None, order: IntArray | None,
           w: FloatArray, coords: tuple[IntArray, IntArray] | None = None) -> Cut:
    """Where to cut cells taken in ``order`` (``csum``: their running load), and the cost of that cut.

    Notes
    -----
    The exact cut (``window`` 0) leaves ``k // 2`` full workers of load on the first
    side: in the primary-axis order a staircase, straight except for one step. With
    a ``window`` the cut may go anywhere the first side holds ``j * cap`` minus at
    most ``window`` and both sides still fit in ``j`` and ``k - j`` workers (``j`` =
    ``k // 2`` or ``k - k // 2``); it takes the cut through the least load, counted
    over the 8-neighbour ``pairs`` it separates (each pair weighs the lighter of its
    two cells; with ``coords``, the cells' ``(u, v)`` sorted by ``order``, only the pairs
    near the candidate cuts are searched, see :func:`_band_pairs`). That keeps hot spots whole and boundary load low, at the price of
    pieces that pack less tightly (the caller narrows the window if that costs a
    worker). ``order`` None: the cells are already in order (``w``, ``pairs`` and ``coords`` by rank).
    """
    n = len(csum)
    load = float(csum[-1])
    exact = int(np.searchsorted(csum, (k // 2) * cap * _TOL, side="right"))
    exact = min(max(exact, 1), n - 1)
    if window <= 0 or (pairs is None and coords is None):
        return Cut(exact, 0.0)
    left = csum[:-1]  # load of the first side when cutting before position c = 1 .. n-1
    cand = _window_positions(left, load, k, cap, window)
    if len(cand) == 0:
        return Cut(exact, math.inf)
    c0, c1 = int(cand[0]) + 1, int(cand[-1]) + 1
    priced = _band_pairs(c0, c1, order, *coords) if coords is not None else pairs
    assert priced is not None  # checked above: pairs or coords
    cost = _cut_costs(c0, c1, priced, order, w)[cand - cand[0]]
    best = int(np.lexsort((np.abs(left[cand] - (k // 2) * cap), cost))[0])
    return Cut(int(cand[best]) + 1, float(cost[best]))


def _window_positions(left: FloatArray, load: float, k: int, cap: float, window: float) -> IntArray:
    """The positions ``c`` (ascending) where the first side's load ``left[c]`` is within ``window`` below ``j * cap``
    and both sides fit ``j`` and ``k - j`` workers, for ``j`` = ``k // 2`` or ``k - k // 2`` (see :func:`cut_at`).

    ``left`` is a running sum of non-negative loads, so each condition holds on a prefix or a suffix of it: each
    ``j`` gives one interval, found by binary search with the very comparisons a mask would make.
    """
    spans: list[IntArray] = []
    for j in sorted({k // 2, k - k // 2}):
        hi = int(np.searchsorted(left, j * cap * _TOL, side="right"))  # left <= j cap
        lo = int(np.searchsorted(left, j * cap - window, side="left"))  # left >= j cap - window
        room = (k - j) * cap * _TOL
        lo = max(lo, bisect.bisect_left(range(len(left)), True, key=lambda c: bool(load - left[c] <= room)))
        if lo < hi:
            spans.append(np.arange(lo, hi))
    if len(spans) == 2 and spans[0][-1] >= spans[1][0]:  # overlapping intervals
        return np.arange(int(spans[0][0]), max(int(spans[0][-1]), int(spans[1][-1])) + 1)
    return np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)


def _band_pairs(c0: int, c1: int, order: IntArray | None, u: IntArray, v: IntArray) -> Pairs:
    """The 8-neighbour pairs that a cut at a rank in ``c0 .. c1`` (cells sorted by ``(u, v)``) can separate.

    A pair joins cells at most one ``u`` apart, so it straddles such a cut only if both its
    cells lie in the columns from one before the first cut's column to one after the last
    one's; those cells are a contiguous run of ranks, searched for neighbours alone.
    """
    pu, pv = (u, v) if order is None else (u[order], v[order])
    r0 = int(np.searchsorted(pu, pu[c0 - 1] - 1, side="left"))
    r1 = int(np.searchsorted(pu, pu[min(c1, len(pu) - 1)] + 1, side="right"))
    bu, bv = pu[r0:r1], pv[r0:r1]
    span = int(bv.max() - bv.min()) + 3
    codes = (bu - bu[0] + 1) * span + (bv - bv.min() + 1)  # ascending and distinct: the run is sorted by (u, v)
    below = np.flatnonzero(codes[1:] == codes[:-1] + 1)  # (0, 1): the next cell
    src: list[IntArray] = [below]
    dst: list[IntArray] = [below + 1]
    right = codes + span  # (1, 0)
    pos = np.searchsorted(codes, right - 1)  # the first cell at or after (1, -1); then (1, 0) and (1, 1) follow it
    for dv in (-1, 0, 1):
        at = np.minimum(pos, len(codes) - 1)
        found = codes[at] == right + dv
        hit = np.flatnonzero(found)
        src.append(hit)
        dst.append(at[hit])
        pos = pos + found  # past the cell found: the first at or after the next offset
    i, j = np.concatenate(src), np.concatenate(dst)
    if order is None:
        return i + r0, j + r0
    band = order[r0:r1]
    return band[i], band[j]


def _cut_costs(c0: int, c1: int, pairs: Pairs, order: IntArray | None, w: FloatArray) -> FloatArray:
    """Load on the pairs each cut position ``c0 .. c1`` separates (a pair weighs the lighter of its cells).

    A pair at ranks ``lo < hi`` is cut by every position ``c`` with ``lo < c <= hi``; only
    the pairs that straddle some position of the range are summed.
    """
    i, j = pairs
    if order is None:
        ri, rj = i, j
    else:
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        ri, rj = rank[i], rank[j]
    lo, hi = np.minimum(ri, rj), np.maximum(ri, rj)
    rel = (lo < c1) & (hi >= c0)
    lo, hi = lo[rel], hi[rel]
    weight = np.minimum(w[i[rel]], w[j[rel]])
    size = c1 - c0 + 1
    enter = np.bincount(np.maximum(lo + 1, c0) - c0, weights=weight, minlength=size)[:size]
    leave = np.bincount(np.minimum(hi + 1 - c0, size), weights=weight, minlength=size + 1)[:size]
    out: FloatArray = np.cumsum(enter, dtype=np.float64) - np.cumsum(leave, dtype=np.float64)
    return out


def axes(x: IntArray, y: IntArray, zoom: int) -> tuple[IntArray, IntArray]:
    """Return (primary, secondary) coordinates: the longer extent first, x unwrapped at the antimeridian."""
    n = 1 << zoom
    lo_x, hi_x = int(x.min()), int(x.max())
    if hi_x - lo_x < n // 2:  # cannot wrap: the gap outside [min, max] is the largest
        xu = x - lo_x
        ext_y = int(y.max() - y.min())
        return (xu, y) if hi_x - lo_x >= ext_y else (y, xu)
    ux = unique_ints(x)
    if len(ux) > 1:
        gaps = np.diff(np.append(ux, ux[0] + n))
        g = int(np.argmax(gaps))
        start = int(ux[(g + 1) % len(ux)])
        xu = (x - start) % n
    else:
        xu = x - x.min()
    ext_x = int(xu.max() - xu.min())
    ext_y = int(y.max() - y.min())
    return (xu, y) if ext_x >= ext_y else (y, xu)
