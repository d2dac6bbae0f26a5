"""Geo-stream shards per worker: which shards a worker owns, and which of them carries an entity.

A worker whose cap needs more than one shard's write rate (1,000 records/s, 1 MB/s:
https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html) owns ``k`` consecutive shards of its
version's geo stream (``Worker.hash_keys``, one ExplicitHashKey each); the stream has ``Spec.shard_count`` shards.
The partitioner Lambda applies :func:`with_shards` to every spec it builds (``SHARDS_PER_WORKER``); the router
puts an entity's events on shard :func:`entity_shard` of its worker's, so they keep their order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from geokernel.errors import SpecError
from geokernel.partition_spec.model import Spec, entity_bucket, shard_hash_key


def entity_shard(entity_id: str, shards: int) -> int:
    """Return which of a worker's ``shards`` shards carries ``entity_id``'s events: ``entity_bucket % shards``.

    One entity always maps to the same shard, so its events keep their order (one shard is ordered).
    """
    if shards < 1:
        raise SpecError(f"a worker owns at least one shard, got {shards!r}")
    return entity_bucket(entity_id) % shards


def entity_shards(entity_ids: Sequence[str], shards: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Vectorised :func:`entity_shard`: which of ``shards[i]`` shards carries ``entity_ids[i]``.

    Notes
    -----
    One MD5 per entity (:func:`~geokernel.partition_spec.model.entity_bucket`); the modulo is NumPy's. ``shards`` must be >= 1
    everywhere (a worker owns at least one shard).
    """
    k = np.asarray(shards, dtype=np.int64)
    if k.shape != (len(entity_ids),):
        raise SpecError(f"one shard count per entity expected, got shape {k.shape!r} for {len(entity_ids)} entities")
    if k.size and int(k.min()) < 1:
        raise SpecError(f"a worker owns at least one shard, got {int(k.min())!r}")
    buckets = np.fromiter((entity_bucket(e) for e in entity_ids), dtype=np.int64, count=len(entity_ids))
    return buckets % k


def with_shards(spec: Spec, shards_per_worker: int) -> Spec:
    """Return ``spec`` with every worker owning ``shards_per_worker`` consecutive shards of its geo stream.

    Worker ``i`` of ``n`` gets the keys of shards ``i*k .. i*k+k-1`` of ``n*k`` (:func:`shard_hash_key`),
    so its shards' hash-key ranges together are the ``i``-th ``n``-th of the key space.

    Notes
    -----
    With ``shards_per_worker`` 1 each worker's key is ``shard_hash_key(i, n)`` and ``hash_keys`` is
    empty: a built spec (which assigns exactly that) comes back equal.
    """
    k = shards_per_worker
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise SpecError(f"shards_per_worker must be an integer >= 1, got {k!r}")
    n = len(spec.workers)
    workers = []
    for i, w in enumerate(spec.workers):
        keys = tuple(shard_hash_key(i * k + j, n * k) for j in range(k))
        workers.append(dataclasses.replace(w, hash_key=keys[0], hash_keys=keys if k > 1 else ()))
    return spec.replace(workers=tuple(workers))
