"""Worker-sized groups of regions: the units the predictive policy measures its forecast error over.

Each region of the load history joins the current worker that holds most of its smoothed load
(:class:`partitioner.control.levels.CellLevels`); see :meth:`partitioner.control.predictive.PredictivePolicy.headroom`
for why the smoothed load and not the last window's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from partitioner.control.forecast import LoadHistory, region_codes
from partitioner.control.levels import CellLevels
from partitioner.load.loads import Cells, SpecLoads


def region_groups(history: LoadHistory, levels: CellLevels, current: SpecLoads) -> npt.NDArray[np.int64]:
    """For each history region, the current worker holding most of its smoothed load (``levels``); a region with no
    level left, the worker of its centre cell (a spare id for cells no single worker owns: hash-split shares)."""
    n_r, n_w = len(history.regions), len(current.worker_ids) + 1
    zoom = levels.zoom
    mask = (1 << zoom) - 1
    cells = Cells(levels.codes >> zoom, levels.codes & mask, np.full(len(levels), zoom, dtype=np.int64),
                  np.asarray(levels.levels, dtype=np.float64), "levels")
    pos = history.index_of(region_codes(cells, history.region_zoom))
    ok = pos >= 0
    worker = _workers(current, cells)
    flat = np.bincount(pos[ok] * n_w + worker[ok], weights=cells.weight[ok], minlength=n_r * n_w).reshape(n_r, n_w)
    best = flat.argmax(axis=1)
    empty = np.flatnonzero(flat.sum(axis=1) <= 0)
    if len(empty):
        rz, shift = history.region_zoom, zoom - history.region_zoom
        codes = history.regions[empty]
        half = (1 << shift) >> 1
        centre = Cells(((codes >> rz) << shift) + half, ((codes & ((1 << rz) - 1)) << shift) + half,
                       np.full(len(empty), zoom, dtype=np.int64), np.ones(len(empty)), "region centres")
        best[empty] = _workers(current, centre)
    return np.asarray(best, dtype=np.int64)


def _workers(current: SpecLoads, cells: Cells) -> npt.NDArray[np.int64]:
    """The current worker (index) of each cell; ``len(worker_ids)`` for a hash-split cell (or catch-all)."""
    owners = current.owners(cells)
    plain = owners >= 0
    worker = np.full(len(owners), len(current.worker_ids), dtype=np.int64)
    worker[plain] = current.worker_of[owners[plain]]
    return worker
