"""Turning a placement into a spec: partitions ordered by worker, the catch-all, workers and their shards."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partitioner.builders.ids import PARTITION_PREFIX, IdAllocator, Ids, fresh_ids
from partitioner.builders.region import Placement
from partitioner.spec.model import CATCH_ALL_QUADKEY, Partition, Spec, Worker, shard_hash_key


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
