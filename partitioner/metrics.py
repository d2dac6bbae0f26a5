"""How good is a spec for a given load: utilisation, shape, stability.

:func:`evaluate` attributes load per quadkey to a spec's partitions with
:meth:`partitioner.index.SpecIndex.attribute` (longest prefix wins; a hash-split
cell's load is shared by hash range), so it measures a spec under the load it was
built from *and* an old spec under new load (the seed's mismatch report,
"Partition 2: 2257 -> 6602 points (264% utilized)"). :func:`stability` measures how
much load keeps its partition and worker between two specs. :func:`render_table`
prints the seed-style partition table, a worker table and a summary.

Definitions
-----------
utilisation
    ``load / max_load`` per partition and per worker.
lower bound
    ``ceil(total / max_load)`` (at least 1): no spec can use fewer workers.
contiguity
    every region (a partition that is neither the catch-all nor a hash-split share)
    is 8-connected over its cells at the *geometry zoom* (normally the counts' grid
    zoom): its listed cells minus the finer cells other partitions list inside them
    (:func:`owned_squares`), deeper listed cells coarsened to that zoom. Empty cells a
    region lists to bridge gaps count as part of it.
compactness
    ``P^2 / (4 pi A)`` per region in tile units: ``A`` = cells of the region, ``P`` =
    cell edges on its boundary. A square of k x k cells scores ``4 / pi`` ~ 1.27, a
    line of n cells ``(2n + 2)^2 / (4 pi n)``; lower is more compact.
boundary-load share
    share of the total load on loaded grid cells that have a loaded 8-neighbour owned
    by a different worker (the load that needs a neighbour's data in a buffer ring).

Notes
-----
* **Antimeridian.** Adjacency wraps in x (column ``2^z - 1`` touches column 0), never
  in y: a region spanning the antimeridian is contiguous, one touching the pole
  rows has boundary edges there.
* **Zoom limits.** Shapes are measured on the quadtree squares a region owns, without
  expanding them (cost ~ the squares' perimeters). If their rings would exceed
  :data:`GEOMETRY_BUDGET` cells, geometry is measured at the deepest coarser zoom that
  fits (``SpecMetrics.geometry_zoom`` says which).
* **Rolled-up counts.** With refinement rows (a quadtree), load is attributed at the
  leaves: each row keeps its weight minus its children's, so nothing counts twice.
  Geometry and the boundary share use grid cells; a grid cell whose refined pieces
  belong to several partitions counts for the owner of its grid-zoom prefix.
* Hash-split cells count, for the boundary share, as owned by the worker of the share
  with the lowest hash range.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from partitioner.counts import Counts
from partitioner.graph import neighbour_pairs
from partitioner.index import SpecIndex
from partitioner.spec import HASH_BUCKETS, Spec
from partitioner.tiles import IntArray, arrays_to_quadkeys, quadkeys_to_arrays

FloatArray = npt.NDArray[np.float64]
GEOMETRY_BUDGET = 50_000_000  # max ring cells looked up to measure the regions' shapes


@dataclass(frozen=True)
class PartitionMetrics:
    """One partition under the evaluated load (``planned_load`` is what the spec recorded)."""

    id: str
    worker: str
    planned_load: float
    load: float
    utilisation: float
    share: float
    is_catch_all: bool
    cells: int
    components: int
    compactness: float | None  # None for the catch-all and hash-split shares

    @property
    def is_region(self) -> bool:
        return not self.is_catch_all and self.share == 1.0


@dataclass(frozen=True)
class WorkerMetrics:
    """One worker under the evaluated load."""

    id: str
    planned_load: float
    load: float
    utilisation: float
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class SpecMetrics:
    """Everything :func:`evaluate` measures; see the module docstring for definitions."""

    version: int
    strategy: str
    max_load: float
    source: str
    grid_zoom: int
    geometry_zoom: int
    total: float
    lower_bound: int
    partitions: tuple[PartitionMetrics, ...]
    workers: tuple[WorkerMetrics, ...]
    max_utilisation: float
    mean_utilisation: float
    median_utilisation: float
    max_partition_utilisation: float
    contiguous: bool
    non_contiguous: tuple[str, ...]
    median_compactness: float
    boundary_load_share: float
    unlisted_load: float  # load that only the catch-all owns

    @property
    def worker_count(self) -> int:
        return len(self.workers)

    @property
    def region_count(self) -> int:
        return sum(1 for p in self.partitions if not p.is_catch_all)

    @property
    def waste_ratio(self) -> float:
        """Workers per lower-bound worker (1.0 is perfect packing)."""
        return self.worker_count / self.lower_bound

    @property
    def over_max(self) -> tuple[WorkerMetrics, ...]:
        """Workers above ``max_load`` under this load, worst first."""
        over = [w for w in self.workers if w.utilisation > 1.0 + 1e-9]
        return tuple(sorted(over, key=lambda w: -w.utilisation))

    @property
    def mismatch(self) -> float:
        """Max worker utilisation of this load on this spec (the seed's "264%" figure)."""
        return self.max_utilisation

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partitions"] = [asdict(p) for p in self.partitions]
        d["workers"] = [{**asdict(w), "partitions": list(w.partitions)} for w in self.workers]
        d["non_contiguous"] = list(self.non_contiguous)
        d.update(worker_count=self.worker_count, region_count=self.region_count, waste_ratio=self.waste_ratio,
                 mismatch=self.mismatch)
        return d


@dataclass(frozen=True)
class Stability:
    """Load that keeps its partition id and worker id from ``old`` to ``new`` (by the current counts)."""

    old_version: int
    new_version: int
    total: float
    kept_load: float
    moved_load: float

    @property
    def kept_share(self) -> float:
        return self.kept_load / self.total if self.total > 0 else 1.0

    @property
    def moved_share(self) -> float:
        return self.moved_load / self.total if self.total > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kept_share": self.kept_share, "moved_share": self.moved_share}


@dataclass(frozen=True)
class SpecDiff:
    """Partition and worker ids added, removed, changed (cells, worker or hash range) and unchanged."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    workers_added: tuple[str, ...]
    workers_removed: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in asdict(self).items()}


# ---------------------------------------------------------------------------
# load attribution
# ---------------------------------------------------------------------------


def lower_bound(total: float, max_load: float) -> int:
    """Return ``ceil(total / max_load)``, at least 1 (a float-noise tolerance of 1e-9 workers)."""
    return max(1, math.ceil(total / max_load - 1e-9))


def leaf_loads(counts: Counts) -> tuple[tuple[str, ...], FloatArray]:
    """Return quadkeys and weights that count every place once.

    Single-zoom counts come back as they are. For a rolled-up quadtree (refinement
    rows under grid cells) each row keeps its weight minus the weights of its nearest
    listed descendants (clipped at 0), so attributing the rows at their own zoom puts
    refined load where the finer cells say and the rest where the coarse cell is.

    Notes
    -----
    Deeper rows with no listed ancestor are folded into their grid cell, as
    :meth:`partitioner.counts.Counts.grid` does.
    """
    if len(counts.zooms) == 1:
        return counts.quadkeys, np.asarray(counts.weights, dtype=np.float64)
    grid = counts.grid()
    grid_qks = arrays_to_quadkeys(grid.x, grid.y, grid.zoom)
    weights: dict[str, float] = dict(zip(grid_qks, (float(w) for w in grid.weight), strict=True))
    refinement = counts.refinement()
    weights.update(refinement)
    for q, w in refinement.items():
        for k in range(len(q) - 1, grid.zoom - 1, -1):
            if q[:k] in weights:
                weights[q[:k]] -= w
                break
    qks = tuple(weights)
    return qks, np.maximum(np.fromiter(weights.values(), dtype=np.float64, count=len(qks)), 0.0)


def _split_members(spec: Spec) -> dict[str, list[tuple[int, int, int]]]:
    """Quadkey of each hash-split cell -> [(partition index, lo, hi)] sorted by lo."""
    groups: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for i, p in enumerate(spec.partitions):
        if p.hash_range is not None:
            groups[p.quadkeys[0]].append((i, p.hash_range[0], p.hash_range[1]))
    for members in groups.values():
        members.sort(key=lambda m: m[1])
    return dict(groups)


def _locate(index: SpecIndex, x: IntArray, y: IntArray, z: IntArray) -> IntArray:
    """Partition index of each cell (mixed zooms; split cells resolve to their bucket-0 share)."""
    out = np.empty(len(x), dtype=np.int64)
    for zoom in np.unique(z):
        sel = z == zoom
        out[sel] = index.locate_xy(x[sel], y[sel], int(zoom))
    return out


# ---------------------------------------------------------------------------
# geometry
# ---------------------------------------------------------------------------


def region_cells(spec: Spec, index: SpecIndex, regions: Sequence[int], zoom: int
                 ) -> tuple[IntArray, IntArray, IntArray]:
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
        return empty, empty.copy(), empty.copy()
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
    return lab[first], cx[first], cy[first]


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


def square_shapes(spec: Spec, regions: Sequence[int], zoom: int) -> tuple[FloatArray, IntArray, FloatArray]:
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
        return area, comps, compact
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
    return area, comps, compact


def geometry_zoom(spec: Spec, grid_zoom: int, regions: Sequence[int]) -> int:
    """The deepest zoom <= grid_zoom whose square rings fit :data:`GEOMETRY_BUDGET` cells."""
    depths = np.array([len(q) for i in regions for q in spec.partitions[i].quadkeys], dtype=np.int64)
    zoom = grid_zoom
    while zoom > 1 and ring_cells(np.left_shift(1, np.maximum(zoom - depths, 0))) > GEOMETRY_BUDGET:
        zoom -= 1
    return zoom


def boundary_load_share(spec: Spec, index: SpecIndex, counts: Counts) -> float:
    """Share of load on loaded grid cells with a loaded 8-neighbour of another worker."""
    grid = counts.grid()
    loaded = grid.weight > 0
    x, y, w = grid.x[loaded], grid.y[loaded], grid.weight[loaded]
    total = float(w.sum())
    if total <= 0 or len(x) < 2:
        return 0.0
    worker_ids = {wk.id: k for k, wk in enumerate(spec.workers)}
    part_worker = np.array([worker_ids.get(p.worker, -1) for p in spec.partitions], dtype=np.int64)
    owner = part_worker[index.locate_xy(x, y, grid.zoom)]
    i, j = neighbour_pairs(x, y, grid.zoom)
    differ = owner[i] != owner[j]
    edge = np.zeros(len(x), dtype=bool)
    edge[i[differ]] = True
    edge[j[differ]] = True
    return float(w[edge].sum()) / total


# ---------------------------------------------------------------------------
# evaluate / stability / diff
# ---------------------------------------------------------------------------


def evaluate(spec: Spec, counts: Counts) -> SpecMetrics:
    """Measure ``spec`` under the load ``counts``.

    Parameters
    ----------
    spec : Spec
        Any spec (the one built from ``counts`` or an older one: then the loads show the
        mismatch between what the spec planned and what arrives now).
    counts : Counts
        Load per quadkey (single zoom or a rolled-up quadtree).

    Returns
    -------
    SpecMetrics

    Notes
    -----
    Utilisation statistics are over workers. The catch-all and hash-split shares are not
    regions: they are skipped by contiguity and compactness. ``median_compactness`` is NaN
    when the spec has no region with cells.
    """
    index = SpecIndex(spec)
    qks, weights = leaf_loads(counts)
    loads = index.attribute(qks, weights)
    total = float(weights.sum())
    grid_zoom = counts.grid_zoom
    regions = [i for i, p in enumerate(spec.partitions) if not p.is_catch_all and p.hash_range is None]
    gzoom = geometry_zoom(spec, grid_zoom, regions)
    area, comps, compact = square_shapes(spec, regions, gzoom)
    cap = spec.max_load
    is_region = np.zeros(len(spec.partitions), dtype=bool)
    is_region[regions] = True
    parts = tuple(
        PartitionMetrics(id=p.id, worker=p.worker, planned_load=p.load, load=float(loads[i]),
                         utilisation=float(loads[i]) / cap, share=p.share, is_catch_all=p.is_catch_all,
                         cells=int(area[i]), components=int(comps[i]),
                         compactness=float(compact[i]) if is_region[i] and area[i] > 0 else None)
        for i, p in enumerate(spec.partitions)
    )
    by_worker: dict[str, list[PartitionMetrics]] = defaultdict(list)
    for pm in parts:
        by_worker[pm.worker].append(pm)
    workers = tuple(
        WorkerMetrics(id=w.id, planned_load=w.load, load=float(sum(pm.load for pm in by_worker[w.id])),
                      utilisation=float(sum(pm.load for pm in by_worker[w.id])) / cap,
                      partitions=tuple(pm.id for pm in by_worker[w.id]))
        for w in spec.workers
    )
    utils = np.array([w.utilisation for w in workers]) if workers else np.zeros(1)
    region_compact = [pm.compactness for pm in parts if pm.compactness is not None]
    non_contig = tuple(spec.partitions[i].id for i in regions if comps[i] > 1)
    return SpecMetrics(
        version=spec.version, strategy=spec.strategy, max_load=cap, source=counts.source, grid_zoom=grid_zoom,
        geometry_zoom=gzoom, total=total, lower_bound=lower_bound(total, cap), partitions=parts, workers=workers,
        max_utilisation=float(utils.max()), mean_utilisation=float(utils.mean()),
        median_utilisation=float(np.median(utils)),
        max_partition_utilisation=max((pm.utilisation for pm in parts), default=0.0),
        contiguous=not non_contig, non_contiguous=non_contig,
        median_compactness=float(np.median(region_compact)) if region_compact else float("nan"),
        boundary_load_share=boundary_load_share(spec, index, counts),
        unlisted_load=float(loads[index.catch_all_index]),
    )


def _cell_pieces(spec: Spec, members: dict[str, list[tuple[int, int, int]]], i: int) -> list[tuple[int, int, int]]:
    p = spec.partitions[i]
    if p.hash_range is None:
        return [(i, 0, HASH_BUCKETS)]
    return members[p.quadkeys[0]]


def stability(old: Spec, new: Spec, counts: Counts) -> Stability:
    """Return the load (by ``counts``) whose place keeps the same partition id and worker id.

    A cell counts as kept when its owner in ``new`` has the same partition id and the same
    worker id as its owner in ``old``. For hash-split cells the kept fraction is the overlap
    of hash ranges whose (partition, worker) match (entities are uniform over buckets).
    Cells are the leaves of the counts (see :func:`leaf_loads`).
    """
    qks, w = leaf_loads(counts)
    total = float(w.sum())
    if total <= 0:
        return Stability(old.version, new.version, 0.0, 0.0, 0.0)
    x, y, z = quadkeys_to_arrays(qks)
    o = _locate(SpecIndex(old), x, y, z)
    n = _locate(SpecIndex(new), x, y, z)
    key_ids: dict[tuple[str, str], int] = {}
    okey = np.array([key_ids.setdefault((p.id, p.worker), len(key_ids)) for p in old.partitions], dtype=np.int64)
    nkey = np.array([key_ids.setdefault((p.id, p.worker), len(key_ids)) for p in new.partitions], dtype=np.int64)
    osplit = np.array([p.hash_range is not None for p in old.partitions], dtype=bool)
    nsplit = np.array([p.hash_range is not None for p in new.partitions], dtype=bool)
    plain = ~osplit[o] & ~nsplit[n]
    kept = float(w[plain & (okey[o] == nkey[n])].sum())
    om, nm = _split_members(old), _split_members(new)
    for c in np.nonzero(~plain)[0]:
        frac = 0
        for oi, olo, ohi in _cell_pieces(old, om, int(o[c])):
            for ni, nlo, nhi in _cell_pieces(new, nm, int(n[c])):
                if okey[oi] == nkey[ni]:
                    frac += max(0, min(ohi, nhi) - max(olo, nlo))
        kept += float(w[c]) * frac / HASH_BUCKETS
    return Stability(old.version, new.version, total, kept, total - kept)


def spec_diff(old: Spec, new: Spec) -> SpecDiff:
    """Compare two specs by id (cells compared as sets; loads are ignored)."""
    oparts = {p.id: p for p in old.partitions}
    nparts = {p.id: p for p in new.partitions}
    changed: list[str] = []
    unchanged: list[str] = []
    for pid in nparts:
        if pid in oparts:
            a, b = oparts[pid], nparts[pid]
            same = set(a.quadkeys) == set(b.quadkeys) and a.worker == b.worker and a.hash_range == b.hash_range
            (unchanged if same else changed).append(pid)
    owids = {w.id for w in old.workers}
    nwids = {w.id for w in new.workers}
    return SpecDiff(added=tuple(p for p in nparts if p not in oparts), removed=tuple(p for p in oparts if p not in nparts),
                    changed=tuple(changed), unchanged=tuple(unchanged),
                    workers_added=tuple(w.id for w in new.workers if w.id not in owids),
                    workers_removed=tuple(w.id for w in old.workers if w.id not in nwids))


# ---------------------------------------------------------------------------
# text
# ---------------------------------------------------------------------------


def _pct(v: float) -> str:
    return f"{100.0 * v:.1f}%"


def _mismatched(m: SpecMetrics) -> bool:
    tol = 1e-6 * max(1.0, m.max_load)
    return any(abs(p.load - p.planned_load) > tol for p in m.partitions)


def render_table(m: SpecMetrics, *, limit: int | None = 40) -> str:
    """Return the seed-style partition table, the worker table and a summary as text.

    When the evaluated load differs from what the spec recorded (an old spec under new
    load), partition lines read ``planned -> load points (util% utilized)``. ``limit`` caps
    the partition and worker lines (hottest first beyond it; the rest are summarised).
    """
    mismatch = _mismatched(m)
    lines = [f"Spec v{m.version} ({m.strategy or 'unknown strategy'}) under {m.source} (grid zoom {m.grid_zoom})",
             f"Total partitions: {m.region_count} (+ catch-all)",
             f"Max points per partition: {m.max_load:g}", ""]
    parts = list(m.partitions)
    shown = parts if limit is None or len(parts) <= limit else sorted(parts, key=lambda p: -p.load)[:limit]
    shown_ids = {p.id for p in shown}
    for p in parts:
        if p.id not in shown_ids:
            continue
        tag = " catch-all" if p.is_catch_all else (f" share {p.share:.3f}" if p.share < 1.0 else "")
        if mismatch:
            lines.append(f"Partition {p.id} [{p.worker}]: {p.planned_load:9.0f} -> {p.load:9.0f} points "
                         f"({_pct(p.utilisation)} utilized){tag}")
        else:
            lines.append(f"Partition {p.id} [{p.worker}]: {p.load:9.0f} points ({_pct(p.utilisation)}){tag}")
    rest = [p for p in parts if p.id not in shown_ids]
    if rest:
        lines.append(f"... {len(rest)} more partitions, at most {max(p.load for p in rest):.0f} points each")
    lines += ["", f"{'worker':<8}{'planned':>11}{'load':>11}{'util':>9}  partitions"]
    workers = list(m.workers)
    wshown = workers if limit is None or len(workers) <= limit else sorted(workers, key=lambda w: -w.load)[:limit]
    for w in wshown:
        ids = ",".join(w.partitions[:4]) + (f",+{len(w.partitions) - 4}" if len(w.partitions) > 4 else "")
        lines.append(f"{w.id:<8}{w.planned_load:>11.0f}{w.load:>11.0f}{_pct(w.utilisation):>9}  {ids}")
    if len(wshown) < len(workers):
        lines.append(f"... {len(workers) - len(wshown)} more workers")
    lines += ["", summary_line(m)]
    if mismatch and m.over_max:
        worst = ", ".join(f"{w.id} {_pct(w.utilisation)}" for w in m.over_max[:5])
        lines.append(f"Over max_load under this load: {len(m.over_max)} worker(s): {worst}")
    return "\n".join(lines)


def summary_line(m: SpecMetrics) -> str:
    """A two-line summary: workers vs lower bound, utilisation, contiguity, shape, boundary load."""
    contig = "yes" if m.contiguous else f"NO ({', '.join(m.non_contiguous[:5])})"
    return (f"Workers: {m.worker_count} (lower bound {m.lower_bound}, ratio {m.waste_ratio:.2f}) | "
            f"utilisation max {_pct(m.max_utilisation)}, mean {_pct(m.mean_utilisation)}, "
            f"median {_pct(m.median_utilisation)}\n"
            f"Contiguous: {contig} | median P^2/(4piA): {m.median_compactness:.2f} | "
            f"boundary-load share: {_pct(m.boundary_load_share)} | total load {m.total:.0f}")


def render_stability(s: Stability, d: SpecDiff | None = None) -> str:
    """Text for ``diff``: ids added/removed/changed and the load that keeps its partition and worker."""
    lines: list[str] = []
    if d is not None:
        def ids(v: tuple[str, ...]) -> str:
            return ", ".join(v[:12]) + (f" (+{len(v) - 12} more)" if len(v) > 12 else "") if v else "-"
        lines += [f"partitions added ({len(d.added)}): {ids(d.added)}",
                  f"partitions removed ({len(d.removed)}): {ids(d.removed)}",
                  f"partitions changed ({len(d.changed)}): {ids(d.changed)}",
                  f"partitions unchanged: {len(d.unchanged)}",
                  f"workers added ({len(d.workers_added)}): {ids(d.workers_added)}",
                  f"workers removed ({len(d.workers_removed)}): {ids(d.workers_removed)}"]
    lines.append(f"v{s.old_version} -> v{s.new_version}: {_pct(s.kept_share)} of load keeps its partition and "
                 f"worker; moved {s.moved_load:.0f} of {s.total:.0f} ({_pct(s.moved_share)})")
    return "\n".join(lines)
