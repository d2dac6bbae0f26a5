"""Load-only evaluation: worker loads and moved load of specs under a load, fast enough to run every window.

:func:`partitioner.output.metrics.evaluate` measures everything (shapes, contiguity, boundary load) and
takes most of a second on a large spec; the control loop needs only loads. This module gives the
same loads (attribution with :meth:`geokernel.partition_spec.index.SpecIndex.attribute` semantics at the
counts' leaves, :func:`partitioner.output.metrics.leaf_loads`) with the index and the cell arrays built
once and reused:

* :class:`Cells`: a load's leaves as arrays (build once per window with :func:`cells_of`);
* :class:`SpecLoads`: a spec's index and partition -> worker map (build once per spec);
* :class:`LoadMetrics`: worker loads and utilisation of one spec under one load;
* :func:`moves`: the load whose owner changes between two specs: by (partition id, worker id)
  (:func:`partitioner.output.compare.stability`'s definition) and by worker alone (what a carry-over
  swap must move).

Notes
-----
A hash-split cell's load is shared among its partitions in proportion to their hash ranges
(entities uniform over buckets), for attribution and for moves alike.
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import IntArray, unique_ints
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Spec
from partitioner.load.bound import lower_bound
from partitioner.load.counts import Counts

FloatArray = npt.NDArray[np.float64]
OVER = 1e-9  # utilisation tolerance above 1.0 before a worker counts as over its cap


@dataclass(frozen=True, eq=False)
class Cells:
    """The leaves of a load (each place once) as arrays: tile ``x``, ``y``, ``z`` and ``weight``."""

    x: IntArray
    y: IntArray
    z: IntArray
    weight: FloatArray
    source: str

    @property
    def total(self) -> float:
        return float(self.weight.sum())


_CELLS: weakref.WeakKeyDictionary[Counts, Cells] = weakref.WeakKeyDictionary()


def cells_of(counts: Counts) -> Cells:
    """Return the leaves of ``counts`` (:func:`partitioner.output.metrics.leaf_loads`) as :class:`Cells`.

    Counts are immutable, so the cells of one Counts object are made once while it lives.
    """
    cached = _CELLS.get(counts)
    if cached is None:
        leaves = counts.leaves()  # tile arrays already: no quadkey strings made or parsed
        cached = _CELLS[counts] = Cells(leaves.x, leaves.y, leaves.z, np.asarray(leaves.weight, dtype=np.float64),
                                        counts.source)
    return cached


class SpecLoads:
    """A spec ready for repeated load attribution (its index and worker map are built once)."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.index = SpecIndex(spec)
        self.worker_ids: tuple[str, ...] = tuple(w.id for w in spec.workers)
        pos = {w: i for i, w in enumerate(self.worker_ids)}
        self.worker_of: IntArray = np.array([pos[p.worker] for p in spec.partitions], dtype=np.int64)
        self.partition_ids = np.array([p.id for p in spec.partitions])
        self.partition_workers = np.array([p.worker for p in spec.partitions])
        self._pieces: dict[int, list[tuple[int, int, int]]] = {}

    def pieces(self, owner: int) -> list[tuple[int, int, int]]:
        """(partition, lo, hi) of every share of an owner (:meth:`owners`): one full range for a plain partition."""
        if owner >= 0:
            return [(owner, 0, HASH_BUCKETS)]
        if owner not in self._pieces:
            self._pieces[owner] = [(int(i), *_range(self.spec, int(i))) for i in self.index.group_members(-owner - 1)]
        return self._pieces[owner]

    def owners(self, cells: Cells) -> IntArray:
        """Owner of each cell: a partition index (>= 0) or ``-(group + 1)`` for a hash-split cell (a catch-all
        split by entity hash is one such group)."""
        out = np.empty(len(cells.x), dtype=np.int64)
        for zoom in unique_ints(cells.z):
            sel = cells.z == zoom
            out[sel] = self.index.locate_groups_xy(cells.x[sel], cells.y[sel], int(zoom))
        return self.index.catch_all_as_group(out)

    def partition_loads(self, cells: Cells, owners: IntArray | None = None) -> FloatArray:
        """Load of each partition (split cells shared by hash range)."""
        own = self.owners(cells) if owners is None else owners
        return self.index.attribute_owners(own, cells.weight)

    def worker_loads(self, cells: Cells, owners: IntArray | None = None) -> FloatArray:
        """Load of each worker (spec order)."""
        return np.bincount(self.worker_of, weights=self.partition_loads(cells, owners),
                           minlength=len(self.worker_ids)).astype(np.float64)


_SPECS: OrderedDict[int, SpecLoads] = OrderedDict()
SPEC_CACHE = 16


def spec_loads(spec: Spec) -> SpecLoads:
    """:class:`SpecLoads` of ``spec``, built once per spec object (the last :data:`SPEC_CACHE` specs are kept)."""
    key = id(spec)
    hit = _SPECS.get(key)
    if hit is not None and hit.spec is spec:
        _SPECS.move_to_end(key)
        return hit
    made = _SPECS[key] = SpecLoads(spec)
    while len(_SPECS) > SPEC_CACHE:
        _SPECS.popitem(last=False)
    return made


def _range(spec: Spec, i: int) -> tuple[int, int]:
    hr = spec.partitions[i].hash_range
    return (0, HASH_BUCKETS) if hr is None else (hr[0], hr[1])


@dataclass(frozen=True, eq=False)
class LoadMetrics:
    """Worker loads of one spec under one load (what the policy needs; no geometry)."""

    version: int
    max_load: float
    total: float
    worker_ids: tuple[str, ...]
    loads: FloatArray

    @property
    def worker_count(self) -> int:
        return len(self.worker_ids)

    @property
    def utilisation(self) -> FloatArray:
        return self.loads / self.max_load

    @property
    def max_utilisation(self) -> float:
        return float(self.utilisation.max()) if len(self.loads) else 0.0

    @property
    def mean_utilisation(self) -> float:
        return float(self.utilisation.mean()) if len(self.loads) else 0.0

    @property
    def median_utilisation(self) -> float:
        return float(np.median(self.utilisation)) if len(self.loads) else 0.0

    @property
    def lower_bound(self) -> int:
        return lower_bound(self.total, self.max_load)

    @property
    def waste_ratio(self) -> float:
        return self.worker_count / self.lower_bound

    def hottest(self, n: int = 3, above: float = -math.inf) -> list[tuple[str, float]]:
        """Up to ``n`` (worker id, utilisation) above ``above``, hottest first."""
        u = self.utilisation
        order = np.argsort(-u, kind="stable")[:n]
        return [(self.worker_ids[i], float(u[i])) for i in order if u[i] > above]


def load_metrics(spec: Spec | SpecLoads, load: Counts | Cells) -> LoadMetrics:
    """Measure the worker loads of ``spec`` under ``load`` (pass prepared objects to reuse them)."""
    sl = spec if isinstance(spec, SpecLoads) else spec_loads(spec)
    cells = load if isinstance(load, Cells) else cells_of(load)
    return LoadMetrics(sl.spec.version, sl.spec.max_load, cells.total, sl.worker_ids, sl.worker_loads(cells))


@dataclass(frozen=True)
class Moves:
    """Load that changes owner from one spec to the next, under one load."""

    total: float
    moved: float  # changes partition id or worker id (the stability definition)
    changed_worker: float  # changes worker (what a carry-over swap loads on another worker)

    @property
    def moved_share(self) -> float:
        return self.moved / self.total if self.total > 0 else 0.0


def moves(old: SpecLoads, new: SpecLoads, cells: Cells) -> Moves:
    """Return the load of ``cells`` that changes (partition, worker) and worker from ``old`` to ``new``."""
    o, n = old.owners(cells), new.owners(cells)
    plain = (o >= 0) & (n >= 0)
    same_w = np.zeros(len(o), dtype=bool)
    same_w[plain] = old.partition_workers[o[plain]] == new.partition_workers[n[plain]]
    same_pw = same_w.copy()
    same_pw[plain] &= old.partition_ids[o[plain]] == new.partition_ids[n[plain]]
    w = cells.weight
    kept_w = float(w[same_w].sum())
    kept_pw = float(w[same_pw].sum())
    if not plain.all():  # Python work per pair of owners, not per cell (a split catch-all holds many cells)
        pairs, inv = np.unique(np.stack([o[~plain], n[~plain]]), axis=1, return_inverse=True)
        sums = np.bincount(inv.ravel(), weights=w[~plain])
        for (a, b), total in zip(pairs.T.tolist(), sums.tolist(), strict=True):
            fw, fpw = _split_overlap(old, new, int(a), int(b))
            kept_w += total * fw
            kept_pw += total * fpw
    total = float(w.sum())
    return Moves(total, max(0.0, total - kept_pw), max(0.0, total - kept_w))


def _split_overlap(old: SpecLoads, new: SpecLoads, o: int, n: int) -> tuple[float, float]:
    """Shares of a cell's buckets that keep their worker, and their (partition, worker), across the two specs."""
    keep_w = keep_pw = 0
    for i, lo, hi in old.pieces(o):
        for j, lo2, hi2 in new.pieces(n):
            overlap = max(0, min(hi, hi2) - max(lo, lo2))
            if overlap and old.partition_workers[i] == new.partition_workers[j]:
                keep_w += overlap
                if old.partition_ids[i] == new.partition_ids[j]:
                    keep_pw += overlap
    return keep_w / HASH_BUCKETS, keep_pw / HASH_BUCKETS
