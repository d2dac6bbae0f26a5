"""Tests for geokernel.partition_spec.model: the spec value (immutability, hashing, JSON form)."""

from __future__ import annotations

import json

import pytest
from spec_factory import make_spec, qk

from geokernel.partition_spec.parse import spec_from_json


def test_source_is_read_only_to_every_holder_and_serialises_as_given() -> None:
    # GIVEN a spec whose source came from JSON with nested objects and arrays
    spec = make_spec([("p0001", "w0001", [qk(1, 1, 5)], 2.0)], 10.0)
    text = spec.replace(source={"counts": "s3://b/k", "zooms": [12, 14], "window": {"end": "T", "rows": [1]}}).to_json()
    parsed = spec_from_json(text)
    # WHEN a holder tries to change it, at the top or nested
    # THEN nothing can be changed
    with pytest.raises(TypeError):
        parsed.source["counts"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        parsed.source["window"]["end"] = "U"
    with pytest.raises(AttributeError):
        parsed.source["zooms"].append(16)
    # AND the JSON (and the dict form) are exactly what was read
    assert parsed.to_json() == text
    assert parsed.to_dict()["source"] == json.loads(text)["source"]


def test_a_spec_built_from_a_dict_does_not_follow_later_changes_to_that_dict() -> None:
    # GIVEN a mutable source handed to a spec
    source = {"total_load": 2.0}
    spec = make_spec([("p0001", "w0001", [qk(1, 1, 5)], 2.0)], 10.0).replace(source=source)
    # WHEN the caller changes its dict afterwards
    source["total_load"] = 99.0
    # THEN the spec still says what it was given
    assert spec.source["total_load"] == 2.0


def test_equal_specs_hash_alike_and_can_key_a_dict() -> None:
    # GIVEN two equal specs read from the same JSON
    text = make_spec([("p0001", "w0001", [qk(1, 1, 5)], 2.0)], 10.0).replace(source={"a": [1, {"b": 2}]}).to_json()
    a, b = spec_from_json(text), spec_from_json(text)
    # THEN they are equal, hash alike and find each other in a dict
    assert a == b and hash(a) == hash(b)
    assert {a: "live"}[b] == "live"
    # AND a spec with another source is not equal to them
    assert a != a.replace(source={"a": [1]})
