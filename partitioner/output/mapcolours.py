"""Where workers meet on a map, and a colour per worker that differs from its neighbours'.

* :func:`worker_borders`: the edges between cells of different workers (or a worker and
  nobody) at one zoom, and the pairs of workers that share an edge;
* :func:`colour_slots`: a palette slot per worker, different from every neighbour's, and
  sticky: a worker prefers the slot its id hashes to, so the same worker keeps its colour
  across spec versions unless a neighbour already has it.

Pure NumPy (no matplotlib): :mod:`partitioner.output.plot` draws what these return.

Notes
-----
* **Antimeridian.** Adjacency wraps in x (column ``2^z - 1`` touches column 0), so two
  workers meeting across +/-180 are neighbours; the border edge at the meridian itself is
  drawn on both sides.
* **Many cells.** Beyond ``max_cells`` cells the borders are measured at a coarser zoom.
* **Dense graphs.** A worker whose neighbours hold every slot gets the least used slot.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from geokernel.geo.tiles import IntArray
from geokernel.partition_spec.geometry import region_cells
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec

__all__ = ["WorkerBorders", "colour_slots", "worker_borders"]


class WorkerBorders(NamedTuple):
    """Border edges as tile-unit segments ``(x_a, y_a, x_b, y_b)`` at ``zoom``, and neighbouring worker pairs."""

    zoom: int
    segments: IntArray
    pairs: frozenset[tuple[str, str]]


def worker_borders(spec: Spec, index: SpecIndex, zoom: int, *, max_cells: int = 400_000) -> WorkerBorders:
    """Return the edges where the owning worker changes, and which workers share an edge.

    Every partition but the catch-all (a hash-split cell counts for one of its workers). Coordinates are tile units at
    ``zoom`` (y grows southwards); a segment is ``(x, y, x, y + 1)`` or ``(x, y, x + 1, y)``.
    """
    regions = [i for i, p in enumerate(spec.partitions) if not p.is_catch_all]
    lab, x, y = region_cells(spec, index, regions, zoom)
    while len(lab) > max_cells and zoom > 1:
        zoom -= 1
        lab, x, y = region_cells(spec, index, regions, zoom)
    workers = sorted({p.worker for p in spec.partitions})
    wid = {w: k for k, w in enumerate(workers)}
    of_part = np.array([wid[p.worker] for p in spec.partitions], dtype=np.int64)
    if len(lab) == 0:
        return WorkerBorders(zoom, np.zeros((0, 4), dtype=np.int64), frozenset())
    wk = of_part[lab]
    n = 1 << zoom
    key = (x << zoom) | y
    order = np.argsort(key, kind="stable")
    skey = key[order]
    segs: list[IntArray] = []
    pairs: set[tuple[str, str]] = set()
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        nx, ny = (x + dx) % n, y + dy
        ok = (ny >= 0) & (ny < n)
        pos = np.minimum(np.searchsorted(skey, (nx << zoom) | np.where(ok, ny, 0)), len(skey) - 1)
        found = ok & (skey[pos] == ((nx << zoom) | np.where(ok, ny, 0)))
        other = np.where(found, wk[order[pos]], -1)
        border = other != wk
        for a, b in set(zip(wk[border & found].tolist(), other[border & found].tolist(), strict=True)):
            pairs.add((workers[min(a, b)], workers[max(a, b)]))
        bx, by = x[border], y[border]
        if dx:  # a vertical edge at x + 1 (east) or x (west)
            ex = bx + (dx > 0)
            segs.append(np.stack([ex, by, ex, by + 1], 1))
        else:  # a horizontal edge at y + 1 (south) or y (north)
            ey = by + (dy > 0)
            segs.append(np.stack([bx, ey, bx + 1, ey], 1))
    return WorkerBorders(zoom, np.concatenate(segs), frozenset(pairs))


def colour_slots(worker_ids: Sequence[str], pairs: frozenset[tuple[str, str]], slots: int) -> dict[str, int]:
    """A palette slot per worker: never a neighbour's when it can be helped, else the id's own.

    Workers are coloured in id order. Each takes, among the slots no coloured neighbour
    has, the least used so far, starting from ``crc32(id) % slots`` (so a worker keeps its
    colour across versions when its neighbours allow). With no more workers than slots,
    every worker counts as every other's neighbour (all colours differ).
    """
    if len(worker_ids) <= slots:
        pairs = frozenset((a, b) for a in worker_ids for b in worker_ids if a < b)
    nbrs: dict[str, set[str]] = {w: set() for w in worker_ids}
    for a, b in pairs:
        if a in nbrs and b in nbrs:
            nbrs[a].add(b)
            nbrs[b].add(a)
    out: dict[str, int] = {}
    used = [0] * slots
    for w in sorted(worker_ids):
        taken = {out[v] for v in nbrs[w] if v in out}
        start = zlib.crc32(w.encode()) % slots
        order = [(start + k) % slots for k in range(slots)]
        free = [s for s in order if s not in taken] or order
        low = min(used[s] for s in free)
        out[w] = next(s for s in free if used[s] == low)
        used[out[w]] += 1
    return out
