"""Tests for geokernel.partition_spec.shards: each worker's shards of the geo stream, and each entity's shard."""

from __future__ import annotations

import dataclasses

import pytest
from spec_factory import make_spec, qk

from geokernel.errors import SpecError
from geokernel.partition_spec.model import entity_bucket, shard_hash_key
from geokernel.partition_spec.rules import validate
from geokernel.partition_spec.shards import entity_shard, entity_shards, with_shards


def test_with_shards_gives_each_worker_consecutive_shards_of_the_stream() -> None:
    # GIVEN a spec of two workers
    spec = make_spec([("p0001", "w0001", [qk(1, 1, 4)], 5.0), ("p0002", "w0002", [qk(2, 1, 4)], 5.0)], 10.0)
    # WHEN each is given 3 shards
    three = with_shards(spec, 3)
    # THEN the stream has 6 shards and worker i owns shards 3i..3i+2 of 6, in order
    assert three.shard_count == 6
    assert [w.shard_keys for w in three.workers] == [tuple(shard_hash_key(j, 6) for j in range(3)),
                                                     tuple(shard_hash_key(j, 6) for j in range(3, 6))]
    # AND with 1 shard each a worker's key is the one a build assigns (shard_hash_key(i, n)), and nothing else
    one = with_shards(three, 1)
    assert [(w.hash_key, w.hash_keys) for w in one.workers] == [(shard_hash_key(0, 2), ()), (shard_hash_key(1, 2), ())]
    with pytest.raises(SpecError, match="shards_per_worker must be an integer >= 1, got 0"):
        with_shards(spec, 0)


def test_shared_or_inconsistent_shard_keys_are_invalid() -> None:
    spec = with_shards(make_spec([("p0001", "w0001", [qk(1, 1, 4)], 5.0), ("p0002", "w0002", [qk(2, 1, 4)], 5.0)],
                                 10.0), 2)
    w1, w2 = spec.workers
    # GIVEN a worker listing another's key, and one whose keys do not start with its hash_key
    shared = spec.replace(workers=(w1, dataclasses.replace(w2, hash_keys=(w2.hash_key, w1.hash_keys[1]))))
    skewed = spec.replace(workers=(dataclasses.replace(w1, hash_key=w1.hash_keys[1]), w2))
    # THEN validate names the problem
    assert any(p.startswith("duplicate hash key") for p in validate(shared))
    assert any("must start with hash_key" in p for p in validate(skewed))
    # AND an entity always maps to the same one of k shards
    assert entity_shard("car-1", 4) == entity_shard("car-1", 4) == entity_bucket("car-1") % 4


def test_entity_shards_is_entity_shard_per_entity_and_rejects_a_bad_count() -> None:
    # GIVEN entities on workers of 1, 2, 3 and 50 shards THEN the vectorised pick agrees with entity_shard
    ids = [f"car-{i}" for i in range(40)]
    counts = [1, 2, 3, 50] * 10
    assert entity_shards(ids, counts).tolist() == [entity_shard(e, k) for e, k in zip(ids, counts, strict=True)]
    assert entity_shards([], []).tolist() == []
    # AND a count below 1 or a length mismatch is named
    with pytest.raises(SpecError, match="at least one shard, got 0"):
        entity_shards(["a", "b"], [1, 0])
    with pytest.raises(SpecError, match="one shard count per entity"):
        entity_shards(["a"], [1, 2])
