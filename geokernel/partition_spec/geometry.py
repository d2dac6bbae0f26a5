"""Where a spec's regions are: the squares they own, their cells, and the shape of each.

A region is a partition that is neither the catch-all nor a hash-split share. It lists
quadtree squares of mixed zooms; a finer square listed by another partition inside one
of them carves a hole (longest prefix wins). This module turns that into geometry:

* :func:`owned_squares`: per partition, the squares it really owns (holes carved out),
  what :mod:`partitioner.output.geojson` and :mod:`partitioner.output.plot` draw;
* :func:`region_cells`: the regions' cells at one zoom;
* :func:`square_shapes`: per region, its area in cells, its 8-connected components and
  its compactness ``P^2 / (4 pi A)``, measured on the owned squares without expanding them;
* :func:`geometry_zoom`: the zoom at which those shapes fit :data:`GEOMETRY_BUDGET`.

Notes
-----
* **Antimeridian.** Adjacency wraps in x (column ``2^z - 1`` touches column 0), never
  in y: a region spanning the antimeridian is one piece, one touching the pole rows has
  boundary edges there.
* **Zoom limits.** Shapes cost about the squares' perimeters. If their rings would exceed
  :data:`GEOMETRY_BUDGET` cells, measure at a coarser zoom (:func:`geometry_zoom`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.geo.graph import component_roots
from geokernel.geo.quadtree import has_square_inside, morton, square_spans
from geokernel.geo.tiles import FloatArray, IntArray, arrays_to_quadkeys, quadkeys_to_arrays, unique_ints
from geokernel.partition_spec.index import Listed, SpecIndex
from geokernel.partition_spec.model import Spec

GEOMETRY_BUDGET = 50_000_000  # max ring cells looked up to measure the regions' shapes


class RegionCells(NamedTuple):
    """Cells at one zoom of some regions: the region (partition index) of each, and its tile."""

    label: IntArray
    x: IntArray
    y: IntArray


class Shapes(NamedTuple):
    """Per partition index: cells at the measured zoom, 8-connected components, ``P^2 / (4 pi A)``."""

    cells: FloatArray
    components: IntArray
    compactness: FloatArray


def region_cells(spec: Spec, index: SpecIndex, regions: Sequence[int], zoom: int) -> RegionCells:
    """Return ``(label, x, y)``: the cells at ``zoom`` of each region (label = partition index).

    Coarser listed cells are expanded and then kept only where the spec's lookup at ``zoom``
    says they belong to the region (finer cells listed elsewhere carve holes); deeper listed
    cells are coarsened to their ancestor. Each (label, cell) appears once.
    """
    listed = index.listed
    sel = np.isin(listed.label, np.asarray(regions, dtype=np.int64))
    labels, x, y, z = listed.label[sel], listed.x[sel], listed.y[sel], listed.z[sel]
    if len(labels) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return RegionCells(empty, empty.copy(), empty.copy())
    out_l: list[IntArray] = []
    out_x: list[IntArray] = []
    out_y: list[IntArray] = []
    deep = z >= zoom
    if deep.any():
        shift = z[deep] - zoom
        out_l.append(labels[deep])
        out_x.append(x[deep] >> shift)
        out_y.append(y[deep] >> shift)
    for depth in unique_ints(zoom - z[~deep]):
        sel = (~deep) & (zoom - z == depth)
        side = 1 << int(depth)
        off = np.arange(side, dtype=np.int64)
        ex = ((x[sel] << depth)[:, None, None] + off[None, None, :]).repeat(side, axis=1).ravel()
        ey = ((y[sel] << depth)[:, None, None] + off[None, :, None]).repeat(side, axis=2).ravel()
        el = np.repeat(labels[sel], side * side)
        owner = index.locate_xy(ex, ey, zoom)
        keep = owner == el
        out_l.append(el[keep])
        out_x.append(ex[keep])
        out_y.append(ey[keep])
    lab = np.concatenate(out_l)
    cx = np.concatenate(out_x)
    cy = np.concatenate(out_y)
    key = (lab << (2 * zoom)) | (cx << zoom) | cy
    _, first = np.unique(key, return_index=True)
    return RegionCells(lab[first], cx[first], cy[first])


def owned_square_arrays(index: SpecIndex) -> Listed:
    """The squares each partition owns (holes carved out), as arrays in spec order; none for the catch-all.

    A listed square holding a finer square listed anywhere is replaced by its children
    that stay, recursively (Python work per such square only: the others are found with
    one sort of their quadtree intervals).
    """
    lab, x, y, z = index.listed
    if len(lab) == 0:
        return index.listed
    nested = has_square_inside(x, y, z)
    catch_all = np.array([p.is_catch_all for p in index.partitions], dtype=bool)
    rows = np.flatnonzero(~catch_all[lab])
    if not nested[rows].any():
        return Listed(lab[rows], x[rows], y[rows], z[rows])
    listed = sorted(set(arrays_to_quadkeys(x[z > 0], y[z > 0], z[z > 0])))
    parts: list[Listed] = []
    lo = 0
    for r in rows[nested[rows]].tolist():
        keep = rows[lo:int(np.searchsorted(rows, r))]
        parts.append(Listed(lab[keep], x[keep], y[keep], z[keep]))
        q = arrays_to_quadkeys(x[r:r + 1], y[r:r + 1], int(z[r]))[0]
        sq = _carve(q, listed)
        sx, sy, sz = quadkeys_to_arrays(sq)
        parts.append(Listed(np.full(len(sq), lab[r], dtype=np.int64), sx, sy, sz))
        lo = int(np.searchsorted(rows, r)) + 1
    keep = rows[lo:]
    parts.append(Listed(lab[keep], x[keep], y[keep], z[keep]))
    return Listed(*(np.concatenate([getattr(p, f) for p in parts]) for f in Listed._fields))


def _carve(q: str, listed: list[str]) -> list[str]:
    """The squares of ``q`` left when the finer squares in ``listed`` (sorted) are carved out."""

    def has_listed_descendant(c: str) -> bool:
        i = bisect.bisect_right(listed, c)
        return i < len(listed) and listed[i].startswith(c)

    listed_set = set(listed)
    squares: list[str] = []
    stack = [q]
    while stack:
        c = stack.pop()
        if not has_listed_descendant(c):
            squares.append(c)
            continue
        stack.extend(c + d for d in "3210" if c + d not in listed_set)
    return squares


def owned_squares(spec: Spec, index: SpecIndex | None = None) -> dict[str, list[str]]:
    """Return, per partition id, the quadkeys of the squares it owns (holes carved out).

    A listed cell with finer cells listed by others inside it is replaced by its children
    that stay, recursively, so the squares of all partitions never overlap (except the
    shares of a hash-split cell, which each own their whole cell). The catch-all gets [].
    """
    owned = owned_square_arrays(index or SpecIndex(spec))
    qks = arrays_to_quadkeys(owned.x, owned.y, owned.z)
    bounds = np.searchsorted(owned.label, np.arange(len(spec.partitions) + 1)).tolist()
    return {p.id: qks[bounds[i]:bounds[i + 1]] for i, p in enumerate(spec.partitions)}


class _Squares:
    """The regions' owned squares at or above a zoom, with a lookup of the square containing a cell."""

    def __init__(self, index: SpecIndex, regions: Sequence[int], zoom: int) -> None:
        owned = owned_square_arrays(index)
        sel = np.isin(owned.label, np.asarray(regions, dtype=np.int64))
        lab, x, y, z = owned.label[sel], owned.x[sel], owned.y[sel], owned.z[sel]
        deep = z > zoom
        x = np.where(deep, x >> np.maximum(z - zoom, 0), x)
        y = np.where(deep, y >> np.maximum(z - zoom, 0), y)
        z = np.minimum(z, zoom)
        if len(lab):
            rows = np.unique(np.stack([lab, z, x, y], axis=1), axis=0)
            lab, z, x, y = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
        self.zoom = zoom
        self.lab, self.x, self.y, self.z = lab, x, y, z
        self.side = np.left_shift(1, zoom - z).astype(np.int64)
        # squares do not overlap (coarsened duplicates aside): one sorted array of their code intervals
        start, end = square_spans(x, y, z, zoom)
        self._order = np.lexsort((np.arange(len(start)), start))
        self._start = start[self._order]
        self._end = end[self._order]
        self._end_by_square = end
        run = np.ones(len(start), dtype=bool)
        run[1:] = self._start[1:] != self._start[:-1]
        self._run_first = np.maximum.accumulate(np.where(run, np.arange(len(start)), 0))

    def find(self, gx: IntArray, gy: IntArray) -> IntArray:
        """Index of the square containing each cell (at ``zoom``), -1 where none does."""
        return self.containing(morton(gx, gy))

    def containing(self, code: IntArray) -> IntArray:
        """Index of the square whose code interval holds each code, -1 where none does."""
        if len(self._start) == 0:
            return np.full(code.shape, -1, dtype=np.int64)
        pos = np.searchsorted(self._start, code, side="right") - 1
        found = pos >= 0
        pos = self._run_first[np.maximum(pos, 0)]
        found &= code < self._end[pos]
        out: IntArray = np.where(found, self._order[pos], -1)
        return out

    def end_of(self, square: IntArray) -> IntArray:
        """One past the last code of each square (-1 gives -1)."""
        out: IntArray = np.where(square >= 0, self._end_by_square[np.maximum(square, 0)], -1)
        return out

    def any_start_in(self, lo: IntArray, hi: IntArray) -> npt.NDArray[np.bool_]:
        """Does a square start in ``[lo, hi)``?"""
        pos = np.searchsorted(self._start, lo, side="left")
        inside: npt.NDArray[np.bool_] = (pos < len(self._start)) & (
            self._start[np.minimum(pos, len(self._start) - 1)] < hi)
        return inside


def ring_cells(side: IntArray) -> int:
    """Number of cells in the one-cell rings around squares of the given sides."""
    return int(np.sum(4 * side + 4))


def square_shapes(spec: Spec, regions: Sequence[int], zoom: int, index: SpecIndex | None = None) -> Shapes:
    """Return per partition index: cells ``A`` at ``zoom``, 8-connected components, ``P^2 / (4 pi A)``.

    Works on the owned squares (quadtree cells, holes carved) without expanding them: ``A``
    is the sum of the squares' areas in cells; the boundary and the adjacency come from the
    one-cell ring around each square. A ring cell on a side that belongs to another region,
    to nothing or beyond a pole adds one edge to ``P``; a ring cell (corners included) in a
    square of the same region joins the two squares. Partitions that are not in ``regions``
    get 0 cells, 0 components, NaN.

    Notes
    -----
    A side of a square is settled in one lookup when the neighbouring square of the same
    size is inside one owned square or touches none; only the other sides are looked up
    cell by cell (:class:`_Ring`).
    """
    n_labels = len(spec.partitions)
    sq = _Squares(index or SpecIndex(spec), regions, zoom)
    area: FloatArray = np.bincount(sq.lab, weights=(sq.side * sq.side).astype(np.float64),
                                   minlength=n_labels).astype(np.float64)
    comps: IntArray = np.zeros(n_labels, dtype=np.int64)
    compact: FloatArray = np.full(n_labels, np.nan)
    m = len(sq.lab)
    if m == 0:
        return Shapes(area, comps, compact)
    ring = _Ring(sq)
    ring.sides()
    ring.corners()
    i, j = np.concatenate(ring.src), np.concatenate(ring.dst)
    comp_of = component_roots(m, i, j)
    pairs = unique_ints((sq.lab << 32) | comp_of)
    comps = np.bincount(pairs >> 32, minlength=n_labels).astype(np.int64)
    perimeter = np.bincount(sq.lab, weights=ring.perim, minlength=n_labels)
    has = area > 0
    compact[has] = perimeter[has] ** 2 / (4.0 * math.pi * area[has])
    return Shapes(area, comps, compact)


# the four sides (N, S, W, E): the neighbouring square's offset, then where the side's cells are
_SIDE_DX = np.array([0, 0, -1, 1], dtype=np.int64)
_SIDE_DY = np.array([-1, 1, 0, 0], dtype=np.int64)


class _Ring:
    """The one-cell ring around each square: boundary edges per square, and links between squares of a region."""

    def __init__(self, sq: _Squares) -> None:
        self.sq = sq
        self.n = 1 << sq.zoom
        self.perim = np.zeros(len(sq.lab), dtype=np.float64)
        self.src: list[IntArray] = [np.zeros(0, dtype=np.int64)]
        self.dst: list[IntArray] = [np.zeros(0, dtype=np.int64)]

    def _meet(self, own: IntArray, other: IntArray, weight: IntArray | None) -> None:
        """Record ring cells of squares ``own`` falling in squares ``other`` (-1: none); ``weight``: edges, if a side."""
        sq = self.sq
        same = (other >= 0) & (sq.lab[np.maximum(other, 0)] == sq.lab[own])
        if weight is not None:
            self.perim += np.bincount(own[~same], weights=weight[~same], minlength=len(self.perim))
        link = same & (other != own)
        self.src.append(own[link])
        self.dst.append(other[link])

    def sides(self) -> None:
        """Each side in one lookup where the neighbouring square of the same size is settled, else cell by cell."""
        sq = self.sq
        m = len(sq.lab)
        own = np.repeat(np.arange(m, dtype=np.int64), 4)
        d = np.tile(np.arange(4), m)
        z, side = sq.z[own], sq.side[own]
        nz = np.left_shift(1, z)
        tx, ty = (sq.x[own] + _SIDE_DX[d]) % nz, sq.y[own] + _SIDE_DY[d]
        pole = (ty < 0) | (ty >= nz)
        start, end = square_spans(tx, np.clip(ty, 0, nz - 1), z, sq.zoom)
        holder = sq.containing(start)
        whole = ~pole & (holder >= 0) & (sq.end_of(holder) >= end)
        empty = pole | ((holder < 0) & ~sq.any_start_in(start, end))
        settled = whole | empty
        self._meet(own[settled], np.where(whole, holder, -1)[settled], side[settled])
        rest = np.flatnonzero(~settled)
        for s in unique_ints(side[rest]).tolist():
            self._side_cells(own[rest][side[rest] == s], d[rest][side[rest] == s], int(s))

    def _side_cells(self, own: IntArray, d: IntArray, s: int) -> None:
        """Look up cell by cell the sides ``d`` of squares ``own`` (all of side ``s``)."""
        sq = self.sq
        for chunk in np.array_split(np.arange(len(own)), max(1, len(own) * s // 4_000_000 + 1)):
            o, dd = own[chunk], d[chunk]
            x0, y0 = sq.x[o] << (sq.zoom - sq.z[o]), sq.y[o] << (sq.zoom - sq.z[o])
            r = np.arange(s, dtype=np.int64)[None, :]
            along_x = dd[:, None] < 2
            fixed_x = np.where(dd == 2, x0 - 1, x0 + s)[:, None]
            fixed_y = np.where(dd == 0, y0 - 1, y0 + s)[:, None]
            gx = np.where(along_x, x0[:, None] + r, fixed_x) % self.n
            gy = np.where(along_x, fixed_y, y0[:, None] + r)
            self._lookup(np.broadcast_to(o[:, None], gx.shape).ravel(), gx.ravel(), gy.ravel(), side=True)

    def corners(self) -> None:
        """The four corner cells of every square (they join squares; they are not edges)."""
        sq = self.sq
        m = len(sq.lab)
        own = np.repeat(np.arange(m, dtype=np.int64), 4)
        k = np.tile(np.arange(4), m)
        x0, y0, side = sq.x[own] << (sq.zoom - sq.z[own]), sq.y[own] << (sq.zoom - sq.z[own]), sq.side[own]
        gx = np.where(k % 2 == 0, x0 - 1, x0 + side) % self.n
        gy = np.where(k < 2, y0 - 1, y0 + side)
        self._lookup(own, gx, gy, side=False)

    def _lookup(self, own: IntArray, gx: IntArray, gy: IntArray, *, side: bool) -> None:
        ok = (gy >= 0) & (gy < self.n)
        other = np.full(len(own), -1, dtype=np.int64)
        other[ok] = self.sq.find(gx[ok], gy[ok])
        self._meet(own, other, np.ones(len(own), dtype=np.int64) if side else None)


def geometry_zoom(spec: Spec, grid_zoom: int, regions: Sequence[int], index: SpecIndex | None = None) -> int:
    """The deepest zoom <= grid_zoom whose square rings fit :data:`GEOMETRY_BUDGET` cells."""
    listed = (index or SpecIndex(spec)).listed
    depths = listed.z[np.isin(listed.label, np.asarray(regions, dtype=np.int64))]
    zoom = grid_zoom
    while zoom > 1 and ring_cells(np.left_shift(1, np.maximum(zoom - depths, 0))) > GEOMETRY_BUDGET:
        zoom -= 1
    return zoom
