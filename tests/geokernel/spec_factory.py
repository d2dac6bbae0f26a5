"""Hand-made specs and counts for the partitioner tests (no build strategy involved)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from geokernel.geo.tiles import Tile, quadkey
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key
from geokernel.partition_spec.rules import check
from partitioner.load.counts import Counts


def qk(x: int, y: int, z: int) -> str:
    """Quadkey of tile (x, y, z)."""
    return quadkey(Tile(x, y, z))


def block(x0: int, x1: int, y0: int, y1: int, z: int = 10) -> list[str]:
    """Quadkeys of the cells ``x0 <= x < x1``, ``y0 <= y < y1`` at zoom ``z``."""
    return [qk(x, y, z) for x in range(x0, x1) for y in range(y0, y1)]


def make_spec(parts: Sequence[tuple[str, str, Sequence[str], float] | tuple[str, str, Sequence[str], float,
                                                                              tuple[int, int]]],
              max_load: float, *, version: int = 1, catch_all_worker: str | None = None,
              strategy: str = "test", validate: bool = True) -> Spec:
    """Spec from (id, worker, quadkeys, load[, hash_range]) rows plus a catch-all ``p9999``.

    Workers are created in first-seen order with loads summed from their partitions.
    """
    partitions = [Partition(id=r[0], worker=r[1], quadkeys=tuple(r[2]), load=float(r[3]),
                            hash_range=r[4] if len(r) > 4 else None)  # type: ignore[misc]
                  for r in parts]
    wids = list(dict.fromkeys(p.worker for p in partitions))
    host = catch_all_worker or wids[0]
    if host not in wids:
        wids.append(host)
    partitions.append(Partition(id="p9999", worker=host, quadkeys=("",), load=0.0))
    loads = {w: sum(p.load for p in partitions if p.worker == w) for w in wids}
    workers = tuple(Worker(id=w, load=loads[w], hash_key=shard_hash_key(i, len(wids))) for i, w in enumerate(wids))
    spec = Spec(version=version, max_load=float(max_load), partitions=tuple(partitions), workers=workers,
                strategy=strategy)
    return check(spec) if validate else spec


def make_counts(rows: Mapping[str, float], source: str = "test-counts") -> Counts:
    """Counts from a quadkey -> weight mapping (insertion order kept)."""
    return Counts(tuple(rows), np.array(list(rows.values()), dtype=np.float64), source)
