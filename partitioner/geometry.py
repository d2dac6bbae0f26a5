"""Where a spec's regions are: the squares they own, their cells, and the shape of each.

A region is a partition that is neither the catch-all nor a hash-split share. It lists
quadtree squares of mixed zooms; a finer square listed by another partition inside one
of them carves a hole (longest prefix wins). This module turns that into geometry:

* :func:`owned_squares`: per partition, the squares it really owns (holes carved out),
  what :mod:`partitioner.geojson` and :mod:`partitioner.plot` draw;
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
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from partitioner.index import SpecIndex
from partitioner.spec import Spec
from partitioner.tiles import FloatArray, IntArray, quadkeys_to_arrays

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
    labels_l: list[int] = []
    qks: list[str] = []
    for i in regions:
        for q in spec.partitions[i].quadkeys:
            labels_l.append(i)
            qks.append(q)
    if not qks:
        empty = np.zeros(0, dtype=np.int64)
        return RegionCells(empty, empty.copy(), empty.copy())
    labels = np.array(labels_l, dtype=np.int64)
    x, y, z = quadkeys_to_arrays(qks)
    out_l: list[IntArray] = []
    out_x: list[IntArray] = []
    out_y: list[IntArray] = []
    deep = z >= zoom
    if deep.any():
        shift = z[deep] - zoom
        out_l.append(labels[deep])
        out_x.append(x[deep] >> shift)
        out_y.append(y[deep] >> shift)
    for depth in np.unique(zoom - z[~deep]):
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


def owned_squares(spec: Spec) -> dict[str, list[str]]:
    """Return, per partition id, the quadkeys of the squares it owns (holes carved out).

    A listed cell with finer cells listed by others inside it is replaced by its children
    that stay, recursively, so the squares of all partitions never overlap (except the
    shares of a hash-split cell, which each own their whole cell). The catch-all gets [].
    """
    listed = sorted({q for p in spec.partitions for q in p.quadkeys if q})
    listed_set = set(listed)

    def has_listed_descendant(q: str) -> bool:
        i = bisect.bisect_right(listed, q)
        return i < len(listed) and listed[i].startswith(q)

    out: dict[str, list[str]] = {}
    for p in spec.partitions:
        squares: list[str] = []
        if not p.is_catch_all:
            for q in p.quadkeys:
                stack = [q]
                while stack:
                    c = stack.pop()
                    if not has_listed_descendant(c):
                        squares.append(c)
                        continue
                    stack.extend(c + d for d in "3210" if c + d not in listed_set)
        out[p.id] = squares
    return out


class _Squares:
    """The regions' owned squares at or above a zoom, with a lookup of the square containing a cell."""

    def __init__(self, spec: Spec, regions: Sequence[int], zoom: int) -> None:
        squares = owned_squares(spec)
        labels: list[int] = []
        qks: list[str] = []
        for i in regions:
            sq = squares[spec.partitions[i].id]
            labels += [i] * len(sq)
            qks += sq
        x, y, z = quadkeys_to_arrays(qks)
        lab = np.array(labels, dtype=np.int64)
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
        self._levels: list[tuple[int, IntArray, IntArray]] = []
        for zl in sorted({int(v) for v in z}, reverse=True):
            idx = np.nonzero(z == zl)[0]
            codes = (x[idx] << zl) | y[idx]
            order = np.argsort(codes, kind="stable")
            self._levels.append((zl, codes[order], idx[order]))

    def find(self, gx: IntArray, gy: IntArray) -> IntArray:
        """Index of the square containing each cell (at ``zoom``), -1 where none does."""
        out = np.full(gx.shape, -1, dtype=np.int64)
        for zl, codes, idx in self._levels:
            shift = self.zoom - zl
            c = ((gx >> shift) << zl) | (gy >> shift)
            pos = np.minimum(np.searchsorted(codes, c), len(codes) - 1)
            hit = (out < 0) & (codes[pos] == c)
            out[hit] = idx[pos[hit]]
        return out


def ring_cells(side: IntArray) -> int:
    """Number of cells in the one-cell rings around squares of the given sides."""
    return int(np.sum(4 * side + 4))


def _ring_offsets(side: int) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
    r = np.arange(side, dtype=np.int64)
    dx = np.concatenate([r, r, np.full(side, -1), np.full(side, side), [-1, side, -1, side]]).astype(np.int64)
    dy = np.concatenate([np.full(side, -1), np.full(side, side), r, r, [-1, -1, side, side]]).astype(np.int64)
    is_side = np.arange(4 * side + 4) < 4 * side
    return dx, dy, is_side


def square_shapes(spec: Spec, regions: Sequence[int], zoom: int) -> Shapes:
    """Return per partition index: cells ``A`` at ``zoom``, 8-connected components, ``P^2 / (4 pi A)``.

    Works on the owned squares (quadtree cells, holes carved) without expanding them: ``A``
    is the sum of the squares' areas in cells; the boundary and the adjacency come from the
    one-cell ring around each square, whose cells are looked up among all squares. A ring
    cell on a side that belongs to another region, to nothing or beyond a pole adds one
    edge to ``P``; a ring cell (corners included) in a square of the same region joins the
    two squares. Partitions that are not in ``regions`` get 0 cells, 0 components, NaN.
    """
    n_labels = len(spec.partitions)
    sq = _Squares(spec, regions, zoom)
    m = len(sq.lab)
    area: FloatArray = np.bincount(sq.lab, weights=(sq.side * sq.side).astype(np.float64),
                                   minlength=n_labels).astype(np.float64)
    comps: IntArray = np.zeros(n_labels, dtype=np.int64)
    compact: FloatArray = np.full(n_labels, np.nan)
    if m == 0:
        return Shapes(area, comps, compact)
    n = 1 << zoom
    perim = np.zeros(m, dtype=np.float64)
    src: list[IntArray] = []
    dst: list[IntArray] = []
    for side in np.unique(sq.side):
        members = np.nonzero(sq.side == side)[0]
        dx, dy, is_side = _ring_offsets(int(side))
        for chunk in np.array_split(members, max(1, len(members) * len(dx) // 4_000_000 + 1)):
            x0 = sq.x[chunk] << (zoom - sq.z[chunk])
            y0 = sq.y[chunk] << (zoom - sq.z[chunk])
            gx = (x0[:, None] + dx[None, :]) % n
            gy = y0[:, None] + dy[None, :]
            ok = (gy >= 0) & (gy < n)
            other = np.full(gx.shape, -1, dtype=np.int64)
            other[ok] = sq.find(gx[ok], gy[ok])
            own = np.broadcast_to(chunk[:, None], gx.shape)
            same = (other >= 0) & (sq.lab[np.maximum(other, 0)] == sq.lab[own])
            perim[chunk] += np.count_nonzero(~same & is_side[None, :], axis=1)
            link = same & (other != own)
            src.append(own[link])
            dst.append(other[link])
    i, j = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(len(i), dtype=np.int8), (i, j)), shape=(m, m))
    _, comp_of = connected_components(graph, directed=False)
    pairs = np.unique((sq.lab << 32) | comp_of.astype(np.int64))
    comps = np.bincount(pairs >> 32, minlength=n_labels).astype(np.int64)
    perimeter = np.bincount(sq.lab, weights=perim, minlength=n_labels)
    has = area > 0
    compact[has] = perimeter[has] ** 2 / (4.0 * math.pi * area[has])
    return Shapes(area, comps, compact)


def geometry_zoom(spec: Spec, grid_zoom: int, regions: Sequence[int]) -> int:
    """The deepest zoom <= grid_zoom whose square rings fit :data:`GEOMETRY_BUDGET` cells."""
    depths = np.array([len(q) for i in regions for q in spec.partitions[i].quadkeys], dtype=np.int64)
    zoom = grid_zoom
    while zoom > 1 and ring_cells(np.left_shift(1, np.maximum(zoom - depths, 0))) > GEOMETRY_BUDGET:
        zoom -= 1
    return zoom
