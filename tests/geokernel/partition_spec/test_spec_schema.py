"""Tests for geokernel/partition_spec/spec.schema.json: specs the code writes validate; malformed ones do not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from spec_factory import make_spec, qk

from geokernel.partition_spec.model import HASH_BUCKETS
from geokernel.partition_spec.parse import spec_from_dict
from geokernel.partition_spec.rules import validate
from geokernel.partition_spec.shards import with_shards
from partitioner.builders import build_spec
from partitioner.builders.assemble import with_catch_all_load
from partitioner.load.counts import Counts
from partitioner.load.read import read_counts_csv

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "geokernel" / "partition_spec" / "spec.schema.json"
SAMPLE = Path(__file__).resolve().parents[3] / "partitioner" / "data" / "sample_counts.csv"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def sample() -> Counts:
    return read_counts_csv(SAMPLE)


def errors(validator: jsonschema.Draft202012Validator, doc: object) -> list[str]:
    return [e.message for e in validator.iter_errors(doc)]


def test_built_specs_validate(validator, sample):
    # GIVEN specs built by both strategies, one with a previous spec (sticky ids, previous_version)
    first = build_spec(sample, 2500.0, created_at="2026-11-21T10:00:00Z", stream_name="georebal-geo-v1")
    second = build_spec(sample, 2500.0, previous=first)
    seed = build_spec(sample, 2500.0, strategy="seed")
    # THEN their JSON validates against the schema and reads back
    for spec in (first, second, seed):
        doc = json.loads(spec.to_json())
        assert errors(validator, doc) == []
        assert spec_from_dict(doc) == spec


def test_hash_split_spec_validates(validator):
    # GIVEN a hot cell 3x max_load and no refinement rows: split by entity hash
    hot = Counts((qk(10, 10, 10), qk(11, 10, 10)), np.array([3000.0, 10.0]), "hot")
    doc = json.loads(build_spec(hot, 1000.0).to_json())
    assert any("hash_range" in p for p in doc["partitions"])
    assert errors(validator, doc) == []


def test_hand_made_spec_validates(validator):
    spec = make_spec([("p0001", "w0001", [qk(1, 1, 4)], 5.0, (0, HASH_BUCKETS // 2)),
                      ("p0002", "w0002", [qk(1, 1, 4)], 5.0, (HASH_BUCKETS // 2, HASH_BUCKETS))], 10.0)
    assert errors(validator, json.loads(spec.to_json())) == []


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: d.update(format="geo-rebalancer.spec/2"), "geo-rebalancer.spec/1"),
    (lambda d: d.update(version=0), "less than the minimum of 1"),
    (lambda d: d.update(max_load=0), "less than or equal to the minimum of 0"),
    (lambda d: d.pop("workers"), "'workers' is a required property"),
    (lambda d: d["partitions"][0]["quadkeys"].append("0124"), "does not match"),
    (lambda d: d["partitions"][0].update(load=-1), "less than the minimum of 0"),
    (lambda d: d["partitions"][0].update(hash_range=[0, 70000]), "is not valid under any of the given schemas"),
    (lambda d: d["workers"][0].update(hash_key="12ab"), "does not match"),
    (lambda d: d.update(extra=1), "Additional properties are not allowed"),
])
def test_malformed_specs_are_rejected(validator, mutate, needle):
    base = json.loads(make_spec([("p0001", "w0001", [qk(1, 1, 4)], 5.0)], 10.0).to_json())
    doc = copy.deepcopy(base)
    mutate(doc)
    found = errors(validator, doc)
    assert any(needle in m for m in found), found


def test_a_spec_whose_workers_own_several_shards_validates_and_reads_back(validator, sample):
    # GIVEN a built spec whose workers own 3 shards each
    spec = with_shards(build_spec(sample, 2500.0, stream_name="georebal-geo-v1"), 3)
    doc = json.loads(spec.to_json())
    # THEN each worker lists its 3 keys (the first is hash_key), the JSON validates and reads back equal
    assert all(len(w["hash_keys"]) == 3 and w["hash_keys"][0] == w["hash_key"] for w in doc["workers"])
    assert errors(validator, doc) == [] and spec_from_dict(doc) == spec and validate(spec) == []
    assert json.loads(spec.to_json(indent=2)) == doc
    # AND one-shard specs keep writing no hash_keys at all (read unchanged by older readers)
    assert all("hash_keys" not in w for w in json.loads(with_shards(spec, 1).to_json())["workers"])


def test_a_spec_whose_catch_all_is_split_by_entity_hash_validates_and_reads_back(validator, sample):
    # GIVEN a built spec whose catch-all expects three workers' worth of load in places no region lists
    built = build_spec(sample, 2500.0, stream_name="georebal-geo-v1")
    spec = with_catch_all_load(built, 6000.0, 2500.0)
    doc = json.loads(spec.to_json())
    # THEN the root is listed by three shares with hash ranges, and the JSON validates and reads back equal
    roots = [p for p in doc["partitions"] if p["quadkeys"] == [""]]
    assert [p["hash_range"] for p in roots] == [[0, 21845], [21845, 43690], [43690, HASH_BUCKETS]]
    assert errors(validator, doc) == [] and spec_from_dict(doc) == spec and validate(spec) == []
