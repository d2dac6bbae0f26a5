"""A spec as the surge meter sees it: which worker holds each grid cell, what each worker was planned to carry.

Notes
-----
* The meter counts events per cell of the spec's grid zoom (``source.grid_zoom``, the snapshot's) and judges loads in
  the spec's units per snapshot window (``source.window_s``, which the partitioner writes). A spec without either
  (an older spec, a hand-written one) has no view: :func:`surge_view` returns None and the meter stays silent.
* A cell split by entity hash (a hot cell, or the catch-all split) belongs to several workers: its owner is
  :data:`SPLIT` and the meter leaves it to the window path, which already sized its shares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import IntArray
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec

FloatArray = npt.NDArray[np.float64]
SPLIT = -1  # the owner of a cell split by entity hash among several workers


@dataclass(frozen=True, eq=False)
class SurgeView:
    """The live spec for the meter: its index, each partition's worker, the workers' planned loads.

    ``zoom`` and ``window_s`` come from the spec's ``source``; ``cap`` is its ``max_load``.
    """

    spec: Spec
    index: SpecIndex
    zoom: int
    window_s: float
    worker_ids: tuple[str, ...]
    planned: FloatArray  # per worker, as the spec planned it (per window)
    worker_of: IntArray  # per partition, its worker's position

    @property
    def version(self) -> int:
        return self.spec.version

    @property
    def cap(self) -> float:
        return float(self.spec.max_load)

    @property
    def total(self) -> float:
        """The load the spec was planned for, per window (every worker's)."""
        return float(self.planned.sum())

    def owners(self, codes: IntArray) -> IntArray:
        """The worker position holding each cell (``x << zoom | y``), :data:`SPLIT` for a cell split by hash."""
        x, y = codes >> self.zoom, codes & ((1 << self.zoom) - 1)
        part = self.index.catch_all_as_group(self.index.locate_groups_xy(x, y, self.zoom))
        out = np.full(len(codes), SPLIT, dtype=np.int64)
        whole = part >= 0
        out[whole] = self.worker_of[part[whole]]
        return out

    def worker_counts(self, codes: IntArray, counts: FloatArray) -> FloatArray:
        """Counts per worker (a hash-split cell's shared by hash range, as entities spread evenly)."""
        if len(codes) == 0:
            return np.zeros(len(self.worker_ids))
        x, y = codes >> self.zoom, codes & ((1 << self.zoom) - 1)
        per_part = self.index.attribute_owners(self.index.locate_groups_xy(x, y, self.zoom), counts)
        return np.bincount(self.worker_of, weights=per_part, minlength=len(self.worker_ids)).astype(np.float64)


def surge_view(spec: Spec, index: SpecIndex | None = None) -> SurgeView | None:
    """The meter's view of ``spec`` (``index``: its index when the caller has one), None when its ``source`` lacks a
    ``grid_zoom`` or a ``window_s`` > 0."""
    src = spec.source if isinstance(spec.source, Mapping) else {}
    zoom, window_s = src.get("grid_zoom"), src.get("window_s")
    if isinstance(zoom, bool) or not isinstance(zoom, int) or not 0 < zoom <= 30:
        return None
    if isinstance(window_s, bool) or not isinstance(window_s, int | float) or not math.isfinite(window_s) \
            or window_s <= 0:
        return None
    ids = tuple(w.id for w in spec.workers)
    pos = {w: i for i, w in enumerate(ids)}
    return SurgeView(spec, index if index is not None else SpecIndex(spec), zoom, float(window_s), ids,
                     np.array([w.load for w in spec.workers], dtype=np.float64),
                     np.array([pos[p.worker] for p in spec.partitions], dtype=np.int64))
