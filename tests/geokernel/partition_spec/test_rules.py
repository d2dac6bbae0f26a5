"""Tests for geokernel.partition_spec.rules: the catch-all, whole or split by entity hash."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest
from spec_factory import make_spec, qk

from geokernel.errors import SpecError
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec, Worker, shard_hash_key
from geokernel.partition_spec.rules import check, validate


def _split_root(edges: list[int], *, plain_too: bool = False) -> Spec:
    """One region on w1 and the root split at ``edges`` over w2.. (plus a whole catch-all if ``plain_too``)."""
    shares = [Partition(id=f"c{k}", worker=f"w{k + 2}", quadkeys=("",), load=10.0, hash_range=(lo, hi))
              for k, (lo, hi) in enumerate(pairwise(edges))]
    parts = [Partition(id="p1", worker="w1", quadkeys=(qk(1, 1, 4),), load=50.0), *shares]
    if plain_too:
        parts.append(Partition(id="c9", worker="w1", quadkeys=("",), load=0.0))
    loads = {p.worker: 0.0 for p in parts}
    for p in parts:
        loads[p.worker] += p.load
    workers = tuple(Worker(id=w, load=v, hash_key=shard_hash_key(i, len(loads))) for i, (w, v) in
                    enumerate(loads.items()))
    return Spec(version=1, max_load=100.0, partitions=tuple(parts), workers=workers)


def test_a_root_split_by_hash_ranges_that_cover_every_bucket_is_a_valid_catch_all() -> None:
    # GIVEN the root split in three ranges covering [0, HASH_BUCKETS)
    spec = _split_root([0, 20000, 40000, HASH_BUCKETS])
    # WHEN validated THEN nothing is wrong, and spec.catch_all is the share holding bucket 0
    assert validate(spec) == []
    assert spec.catch_all.id == "c0"


@pytest.mark.parametrize(("spec", "problem"), [
    (_split_root([0, 20000, 50000]), "end at 50000"),
    (_split_root([0, 20000, HASH_BUCKETS], plain_too=True), "split cell '' "),
    (replace(make_spec([("p1", "w1", [qk(1, 1, 4)], 5.0)], 10.0), partitions=(
        Partition(id="p1", worker="w1", quadkeys=(qk(1, 1, 4),), load=5.0),)), "exactly one partition must list"),
])
def test_a_catch_all_that_leaves_entities_without_an_owner_is_rejected_by_name(spec: Spec, problem: str) -> None:
    # GIVEN a split root whose ranges stop short, a split root beside a whole catch-all, or no catch-all
    # WHEN checked THEN the spec is refused with the rule it breaks
    with pytest.raises(SpecError, match=problem):
        check(spec)
