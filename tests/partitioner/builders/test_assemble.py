"""Tests for partitioner.builders.assemble: a placement becomes a spec."""

from __future__ import annotations

import numpy as np
import pytest
from spec_factory import qk

from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, entity_bucket, shard_hash_key
from geokernel.partition_spec.rules import validate
from partitioner.builders.assemble import SpecHeader, assemble, with_catch_all_load
from partitioner.builders.ids import Ids
from partitioner.builders.region import Placement, Region

HEADER = SpecHeader(version=3, max_load=100.0, previous_version=2, created_at="2026-01-01T00:00:00Z",
                    strategy="compact", stream_name="s", source={"total_load": 150.0})


def _placement() -> Placement:
    # three regions: two on worker 1 (20 and 70), one on worker 0 (60)
    return Placement((Region((qk(1, 1, 5),), 20.0), Region((qk(9, 9, 5),), 60.0), Region((qk(2, 1, 5),), 70.0)),
                     (1, 0, 1))


def test_partitions_are_numbered_by_worker_then_load_and_the_catch_all_rides_on_the_emptiest_worker() -> None:
    # WHEN a fresh placement is assembled
    spec = assemble(_placement(), HEADER)
    # THEN partitions are ordered by worker, then largest first, numbered in that order; the catch-all is last
    assert [(p.id, p.worker, p.load) for p in spec.partitions] == [
        ("p0001", "w0001", 60.0), ("p0002", "w0002", 70.0), ("p0003", "w0002", 20.0), ("p0004", "w0001", 0.0)]
    assert spec.partitions[-1].is_catch_all
    # AND each worker has its load and the hash key of its shard
    assert [(w.id, w.load, w.hash_key) for w in spec.workers] == [("w0001", 60.0, shard_hash_key(0, 2)),
                                                                  ("w0002", 90.0, shard_hash_key(1, 2))]
    assert (spec.version, spec.previous_version, spec.max_load, dict(spec.source)) == (3, 2, 100.0,
                                                                                     {"total_load": 150.0})
    assert validate(spec) == []


def test_given_ids_are_kept_and_the_catch_all_gets_the_next_fresh_one() -> None:
    # WHEN ids kept from a previous spec are given
    spec = assemble(_placement(), HEADER, Ids(("p0007", "p0002", "p0011"), ("w0004", "w0009")))
    # THEN every partition and worker keeps its id, and the catch-all's is above all of them
    assert [(p.id, p.worker) for p in spec.partitions] == [("p0002", "w0004"), ("p0011", "w0009"),
                                                           ("p0007", "w0009"), ("p0012", "w0004")]


def test_no_regions_still_make_a_spec_with_one_worker_for_the_catch_all() -> None:
    spec = assemble(Placement((), ()), HEADER, Ids((), ()))
    assert [(p.id, p.worker, p.quadkeys) for p in spec.partitions] == [("p0001", "w0001", ("",))]
    assert validate(spec) == []


def test_the_catch_all_stays_on_the_emptiest_worker_when_its_expected_load_fits() -> None:
    # GIVEN the spec above (workers at 60 and 90) and 25 expected on the catch-all, cap 90
    spec = with_catch_all_load(assemble(_placement(), HEADER), 25.0, 90.0)
    # THEN the catch-all carries it on w0001 (60 + 25 <= 90), keys unchanged
    assert (spec.catch_all.worker, spec.catch_all.load) == ("w0001", 25.0)
    assert [(w.id, w.load, w.hash_key) for w in spec.workers] == [("w0001", 85.0, shard_hash_key(0, 2)),
                                                                  ("w0002", 90.0, shard_hash_key(1, 2))]
    assert validate(spec) == []


def test_the_catch_all_gets_a_worker_of_its_own_when_no_worker_has_room() -> None:
    # GIVEN 40 expected on the catch-all, cap 90, and a live spec that still names w0003
    spec = with_catch_all_load(assemble(_placement(), HEADER), 40.0, 90.0, taken=["w0003"])
    # THEN a new worker w0004 hosts it alone, and every worker is keyed to one of three shards
    assert (spec.catch_all.worker, spec.catch_all.load) == ("w0004", 40.0)
    assert [(w.id, w.load, w.hash_key) for w in spec.workers] == [
        ("w0001", 60.0, shard_hash_key(0, 3)), ("w0002", 90.0, shard_hash_key(1, 3)),
        ("w0004", 40.0, shard_hash_key(2, 3))]
    assert validate(spec) == []
    # AND no expected load leaves the spec as it was
    plain = assemble(_placement(), HEADER)
    assert with_catch_all_load(plain, 0.0, 90.0) is plain


def test_a_catch_all_load_above_the_cap_is_split_by_entity_hash_over_workers_of_its_own() -> None:
    # GIVEN workers at 60 and 90 and 200 expected in places no region lists, cap 90
    spec = with_catch_all_load(assemble(_placement(), HEADER), 200.0, 90.0)
    # THEN the root is split into ceil(200 / 90) = 3 equal hash ranges, each on a new worker within the cap
    catches = sorted((p for p in spec.partitions if p.is_catch_all), key=lambda p: p.hash_range or (0, 0))
    assert [p.hash_range for p in catches] == [(0, 21845), (21845, 43690), (43690, HASH_BUCKETS)]
    assert [p.worker for p in catches] == ["w0003", "w0004", "w0005"]
    assert sum(p.load for p in catches) == pytest.approx(200.0)
    assert max(w.load for w in spec.workers) <= 90.0
    # AND the first share keeps the catch-all's id, the spec is valid and five workers own five shards
    assert catches[0].id == assemble(_placement(), HEADER).catch_all.id
    assert validate(spec) == []
    assert len({w.hash_key for w in spec.workers}) == 5
    # AND entities in an unlisted place spread over the three shares by their bucket
    index = SpecIndex(spec)
    entities = [f"e{i}" for i in range(3000)]
    owners = index.locate([170.0] * len(entities), [-80.0] * len(entities), entities)
    counts = np.bincount(owners, minlength=len(spec.partitions))[index.catch_all_shares]
    assert counts.sum() == len(entities) and counts.min() > 900
    ranges = [spec.partitions[int(o)].hash_range or (0, 0) for o in owners]
    assert all(lo <= entity_bucket(e) < hi for (lo, hi), e in zip(ranges, entities, strict=True))
    # AND the load attributed to an unlisted place is shared by the shares' ranges
    loads = index.attribute(["3333"], [300.0])
    assert loads[index.catch_all_shares].tolist() == pytest.approx([300.0 * (hi - lo) / HASH_BUCKETS
                                                                   for lo, hi in (p.hash_range or (0, 0) for p in
                                                                                  (spec.partitions[i] for i in
                                                                                   index.catch_all_shares))])
    assert index.unlisted_load(loads) == pytest.approx(300.0)
