"""Region shape clean-up: claim the empty cells in a region's notches and holes, list squares.

Both work on labelled grid cells (``x``, ``y`` at one zoom, ``label`` per cell) and are
vectorised: the Python work is per round or per zoom level, never per cell.

Notes
-----
A region that lists only its loaded cells has a ragged outline wherever load is
patchy (coasts, parks, lakes): every empty cell inside it adds four edges to its
perimeter. :func:`fill_gaps` lets regions take such cells, which makes their shapes
compact without moving any load. Adjacency wraps across the antimeridian and stops at
the poles, as in :mod:`geokernel.geo.graph`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import IntArray, unique_ints

#: The four edge neighbours.
_EDGES = ((1, 0), (-1, 0), (0, 1), (0, -1))

Blocked = Callable[[IntArray, IntArray], npt.NDArray[np.bool_]]


def fill_gaps(x: IntArray, y: IntArray, label: IntArray, zoom: int, *, blocked: Blocked | None = None,
              min_sides: int = 2, rounds: int = 6) -> tuple[IntArray, IntArray, IntArray]:
    """Return the empty cells ``(x, y, label)`` that regions take to fill their notches and holes.

    Parameters
    ----------
    x, y, label : IntArray
        The regions' cells at ``zoom`` and the region of each (non-negative labels).
    zoom : int
        Zoom of the cells.
    blocked : callable, optional
        ``blocked(x, y) -> bool mask`` of cells that must stay out of every region here
        (loaded cells handled elsewhere, squares listed by other regions).
    min_sides : int
        An empty cell joins a region when at least this many of its four edge
        neighbours belong to it (3 or 4: the winner is then unique).
    rounds : int
        Passes; each pass can take the cells that the previous one exposed, so
        holes and notches up to about ``2 * rounds`` cells across fill up.

    Returns
    -------
    tuple of IntArray
        New cells (each claimed by one region only, none of them given or blocked).

    Notes
    -----
    Taking a cell with ``k`` sides on its region changes the perimeter by
    ``4 - 2k`` (3 sides: -2, 4 sides: -4) and adds area, so every step makes the
    region more compact; it stays 8-connected since every new cell touches it. At the
    poles a cell has fewer neighbours and so needs the same count from fewer sides.
    """
    if min_sides not in (2, 3, 4):
        raise ValueError(f"fill_gaps: min_sides must be 2, 3 or 4, got {min_sides!r}")
    n = 1 << zoom
    codes = (x.astype(np.int64) << zoom) | y
    order = np.argsort(codes, kind="stable")
    sc, sl = codes[order], label.astype(np.int64)[order]  # every region cell so far, sorted by code
    new_x: list[IntArray] = []
    new_y: list[IntArray] = []
    new_l: list[IntArray] = []
    exposed = _exposed(sc, zoom)
    frontier_codes, frontier_labels = sc[exposed], sl[exposed]
    for _ in range(rounds):
        cc, cl = _claims(frontier_codes, frontier_labels, zoom, sc, sl, min_sides=min_sides, blocked=blocked)
        if len(cc) == 0:
            break
        new_x.append(cc >> zoom)
        new_y.append(cc & (n - 1))
        new_l.append(cl)
        at = np.searchsorted(sc, cc)  # cc is sorted and disjoint from sc
        sc, sl = np.insert(sc, at, cc), np.insert(sl, at, cl)
        frontier_codes, frontier_labels = cc, cl
    if not new_x:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    return np.concatenate(new_x), np.concatenate(new_y), np.concatenate(new_l)


def _exposed(sc: IntArray, zoom: int) -> npt.NDArray[np.bool_]:
    """Mask of the cells (``sc``: sorted distinct codes) with an edge neighbour on the map that is not among them.

    Only those can claim a cell, so the first round of :func:`fill_gaps` starts from them (the same claims: the
    others' neighbours are all taken). Above and below are the next and previous codes; left and right are searched
    only for the cells closed above and below.
    """
    n = 1 << zoom
    y = sc & (n - 1)
    out = np.zeros(len(sc), dtype=bool)
    if len(sc) == 0:
        return out
    out[:-1] |= (y[:-1] < n - 1) & (sc[1:] != sc[:-1] + 1)
    out[-1] |= bool(y[-1] < n - 1)
    out[1:] |= (y[1:] > 0) & (sc[:-1] != sc[1:] - 1)
    out[0] |= bool(y[0] > 0)
    rest = np.flatnonzero(~out)  # (on sparse data few: most cells are exposed above or below)
    x, yr = sc[rest] >> zoom, y[rest]
    for dx in (1, -1):
        out[rest] |= ~is_member((((x + dx) % n) << zoom) | yr, sc)
    return out


def _claims(frontier_codes: IntArray, frontier_labels: IntArray, zoom: int, sc: IntArray, sl: IntArray, *,
            min_sides: int, blocked: Blocked | None) -> tuple[IntArray, IntArray]:
    """One round of :func:`fill_gaps`: the free cells next to the frontier that a region takes, and its label.

    ``sc``/``sl``: the codes (sorted) and labels of every region cell so far. Returns codes sorted
    and disjoint from ``sc``, one claim per cell (empty when nothing is taken).
    """
    n = 1 << zoom
    fx, fy = frontier_codes >> zoom, frontier_codes & (n - 1)
    cand_c: list[IntArray] = []
    cand_l: list[IntArray] = []
    for dx, dy in _EDGES:
        ny = fy + dy
        ok = (ny >= 0) & (ny < n)
        cand_c.append((((fx[ok] + dx) % n) << zoom) | ny[ok])
        cand_l.append(frontier_labels[ok])
    cc = np.concatenate(cand_c)
    cl = np.concatenate(cand_l)
    free = ~is_member(cc, sc)
    cc, cl = unique_pairs(cc[free], cl[free])
    if len(cc) == 0:
        return cc, cl
    sides = _count_sides(cc, cl, zoom, sc, sl)
    win = sides >= min_sides
    cc, cl, sides = cc[win], cl[win], sides[win]
    if min_sides < 3 and len(cc):
        # several regions may reach one cell: the one on most of its sides (then the lowest label) takes it
        order = np.lexsort((cl, -sides, cc))
        first = np.ones(len(order), dtype=bool)
        first[1:] = cc[order][1:] != cc[order][:-1]
        cc, cl = cc[order][first], cl[order][first]
    if blocked is not None and len(cc):
        ok = ~blocked(cc >> zoom, cc & (n - 1))
        cc, cl = cc[ok], cl[ok]
    return cc, cl


def unique_pairs(a: IntArray, b: IntArray) -> tuple[IntArray, IntArray]:
    """Distinct ``(a, b)`` pairs of non-negative ints, sorted by ``a`` then ``b``."""
    if len(a) == 0:
        return a, b
    span = int(b.max()) + 1
    if int(a.max()) < (1 << 62) // span:
        key = unique_ints(a * span + b)
        return key // span, key % span
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[first], b[first]


def is_member(values: IntArray, sorted_codes: IntArray | None) -> npt.NDArray[np.bool_]:
    """Mask of ``values`` found in ``sorted_codes`` (ascending; None or empty: none are)."""
    if sorted_codes is None or len(sorted_codes) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_codes, values), len(sorted_codes) - 1)
    found: npt.NDArray[np.bool_] = sorted_codes[pos] == values
    return found


def _count_sides(cand: IntArray, cand_label: IntArray, zoom: int, sc: IntArray, sl: IntArray) -> IntArray:
    """How many of each candidate's edge neighbours carry the candidate's label (``sc`` sorted codes)."""
    n = 1 << zoom
    cx, cy = cand >> zoom, cand & (n - 1)
    count = np.zeros(len(cand), dtype=np.int64)
    for dx, dy in _EDGES:
        ny = cy + dy
        ok = (ny >= 0) & (ny < n)
        nc = (((cx + dx) % n) << zoom) | np.where(ok, ny, 0)
        pos = np.minimum(np.searchsorted(sc, nc), len(sc) - 1)
        count += ok & (sc[pos] == nc) & (sl[pos] == cand_label)
    return count


def coalesce(x: IntArray, y: IntArray, zoom: int, label: IntArray, *, min_zoom: int = 1
             ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Replace every four sibling cells of one label by their parent, recursively.

    Returns ``(x, y, z, label)`` of the squares; they cover exactly the input cells.
    Cells must be unique. Stops at ``min_zoom`` (a region never lists a zoom-0 cell,
    which would read as the catch-all).
    """
    xs, ys, ls = x.astype(np.int64), y.astype(np.int64), label.astype(np.int64)
    out_x: list[IntArray] = []
    out_y: list[IntArray] = []
    out_z: list[IntArray] = []
    out_l: list[IntArray] = []
    z = zoom
    while z > min_zoom and len(xs):
        px, py = xs >> 1, ys >> 1
        order = np.lexsort((py, px, ls))
        key_l, key_x, key_y = ls[order], px[order], py[order]
        start = np.ones(len(order), dtype=bool)
        start[1:] = (key_l[1:] != key_l[:-1]) | (key_x[1:] != key_x[:-1]) | (key_y[1:] != key_y[:-1])
        group = np.cumsum(start) - 1
        size = np.bincount(group)
        full = size[group] == 4
        keep = order[~full]
        out_x.append(xs[keep])
        out_y.append(ys[keep])
        out_z.append(np.full(len(keep), z, dtype=np.int64))
        out_l.append(ls[keep])
        parents = order[full & start]
        xs, ys, ls = px[parents], py[parents], ls[parents]
        z -= 1
    out_x.append(xs)
    out_y.append(ys)
    out_z.append(np.full(len(xs), z, dtype=np.int64))
    out_l.append(ls)
    return np.concatenate(out_x), np.concatenate(out_y), np.concatenate(out_z), np.concatenate(out_l)
