"""Turning a placement into a spec: partitions ordered by worker, the catch-all, workers and their shards."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from geokernel.partition_spec.model import CATCH_ALL_QUADKEY, HASH_BUCKETS, Partition, Spec, Worker, shard_hash_key
from partitioner.builders.ids import PARTITION_PREFIX, WORKER_PREFIX, IdAllocator, Ids, fresh_ids
from partitioner.builders.region import Placement


@dataclass(frozen=True)
class SpecHeader:
    """Everything a built spec carries besides its partitions and workers."""

    version: int
    max_load: float  # the hard cap the spec states (packing may aim lower, see ``fill``)
    previous_version: int | None
    created_at: str
    strategy: str
    stream_name: str | None
    source: Mapping[str, Any]


def assemble(placement: Placement, header: SpecHeader, ids: Ids | None = None) -> Spec:
    """Return the spec of ``placement``: its regions as partitions, plus a catch-all.

    Partitions are ordered by worker, then by load (largest first); without ``ids`` they
    are numbered in that order and workers by index. The catch-all gets the next fresh
    partition id and rides on the least-loaded worker. With no regions, one worker hosts
    the catch-all.
    """
    regions, workers_of = placement.regions, placement.workers_of
    n_workers = max(1, placement.worker_count)
    wload = [0.0] * n_workers
    for r, w in zip(regions, workers_of, strict=True):
        wload[w] += r.load
    host = min(range(n_workers), key=lambda k: wload[k])
    order = sorted(range(len(regions)), key=lambda i: (workers_of[i], -regions[i].load))
    if ids is None:
        ids = fresh_ids(placement, order, n_workers)
    elif not ids.workers:  # no regions: the catch-all's worker is new
        ids = Ids(ids.partitions, fresh_ids(placement, order, n_workers).workers)
    pids, wids = ids.partitions, ids.workers
    parts = [Partition(id=pids[i], worker=wids[workers_of[i]], quadkeys=regions[i].quadkeys, load=regions[i].load,
                       hash_range=regions[i].hash_range) for i in order]
    parts.append(Partition(id=IdAllocator(PARTITION_PREFIX, pids)(), worker=wids[host],
                           quadkeys=(CATCH_ALL_QUADKEY,), load=0.0))
    workers = tuple(Worker(id=wids[k], load=wload[k], hash_key=shard_hash_key(k, n_workers))
                    for k in range(n_workers))
    return Spec(version=header.version, max_load=header.max_load, partitions=tuple(parts), workers=workers,
                previous_version=header.previous_version, created_at=header.created_at, strategy=header.strategy,
                stream_name=header.stream_name, source=header.source)


def with_catch_all_load(spec: Spec, load: float, cap: float, *, taken: Iterable[str] = ()) -> Spec:
    """Return ``spec`` with ``load`` expected on its catch-all, on workers that have room for it.

    A ``load`` within ``cap`` stays one partition; more is split by entity hash into ``ceil(load / cap)``
    equal shares of the root (as hot cells are split), since one worker could not hold it. Each piece in
    turn goes to the least-loaded worker when that one stays within ``cap`` with it (the catch-all's
    own worker may be that one), else to a worker of its own, numbered after the ids of ``spec`` and ``taken``
    (the live spec's, so that no id that leaves is handed to something new); the workers' shard keys then
    follow the new count.

    Notes
    -----
    * ``load`` <= 0 returns ``spec`` unchanged.
    * The shares assume entities spread evenly over the buckets, as the split hot cells do; the first share
      keeps the catch-all's id, the others get fresh partition ids.
    * A new worker re-keys every worker to the evenly split shards of the new count, dropping ``hash_keys``
      (the builders make none: a worker owns one shard).
    """
    if load <= 0:
        return spec
    catches = [p for p in spec.partitions if p.is_catch_all]
    loads = {w.id: w.load for w in spec.workers}
    for c in catches:
        loads[c.worker] -= c.load
    n = max(1, math.ceil(load / cap)) if cap > 0 else 1
    edges = [k * HASH_BUCKETS // n for k in range(n + 1)]
    new_part = IdAllocator(PARTITION_PREFIX, [p.id for p in spec.partitions])
    new_worker = IdAllocator(WORKER_PREFIX, [*loads, *taken])
    shares: list[Partition] = []
    for k in range(n):
        piece = load * (edges[k + 1] - edges[k]) / HASH_BUCKETS
        host = min(loads, key=lambda w: (loads[w], w))
        if loads[host] + piece > cap:
            host = new_worker()
            loads[host] = 0.0
        loads[host] += piece
        shares.append(Partition(id=catches[0].id if k == 0 else new_part(), worker=host,
                                quadkeys=(CATCH_ALL_QUADKEY,), load=float(piece),
                                hash_range=(edges[k], edges[k + 1]) if n > 1 else None))
    parts = (*(p for p in spec.partitions if not p.is_catch_all), *shares)
    workers = list(loads)
    keyed = len(workers) != len(spec.workers)
    new = tuple(Worker(id=w, load=loads[w], hash_key=shard_hash_key(k, len(workers)) if keyed else
                       spec.workers[k].hash_key, hash_keys=() if keyed else spec.workers[k].hash_keys)
                for k, w in enumerate(workers))
    return replace(spec, partitions=parts, workers=new)
