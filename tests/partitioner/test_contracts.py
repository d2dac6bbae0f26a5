"""The one home of shared names (partitioner.contracts): keys round-trip and stored strings never change."""

from __future__ import annotations

import pytest

from partitioner import contracts as C


def test_keys_round_trip() -> None:
    # GIVEN a version, a slot and a time WHEN their keys are built and parsed THEN the same values come back
    assert C.parse_spec_key(C.spec_key(12)) == 12
    assert C.parse_enriched_key(C.enriched_key(3, "w0002", 1_795_364_177_080)) == (3, "w0002", 1_795_364_177_080)
    assert C.parse_lease_key(C.lease_key(7, "w0010")) == (7, "w0010")


def test_stored_strings_are_the_ones_already_in_buckets_streams_and_tables() -> None:
    # GIVEN objects and items written by earlier versions WHEN their names are built today THEN they match
    assert C.spec_key(3) == "specs/v00000003.json"
    assert C.cost_key(2, "w0001", 1_795_000_000.9) == "costs/v2/w0001/1795000000.json"
    assert C.geo_quarantine_key(2, "w0001", 5) == "quarantine/geo/v2/w0001/5.jsonl"
    assert C.geo_stream_name("georebal", 4) == "georebal-geo-v4"
    assert [k.value for k in C.ControlKey] == ["desired", "active", "deploy", "plan", "policy", "snapshot", "latency", "swap"]
    assert C.REASON_CODES == ("unparsable_json", "not_an_object", "missing_field", "bad_type", "nan",
                              "lat_out_of_range", "lon_out_of_range", "bad_timestamp")


@pytest.mark.parametrize("key", ["specs/v12.json", "specs/v00000012.json.tmp", "other/v00000012.json"])
def test_other_keys_are_not_specs(key: str) -> None:
    # GIVEN a key of another shape WHEN parsed as a spec key THEN it is not one
    assert C.parse_spec_key(key) is None


def test_a_bad_enriched_key_is_named() -> None:
    # GIVEN a key of another shape WHEN parsed THEN the error names it
    with pytest.raises(ValueError, match=r"'enriched/v1/w1\.jsonl'"):
        C.parse_enriched_key("enriched/v1/w1.jsonl")
    assert C.parse_lease_key("active") is None


def test_a_lease_item_reads_back_as_the_record_both_sides_use() -> None:
    # GIVEN a lease item as DynamoDB returns it (attribute-value form)
    item = {C.LEASE_KEY_ATTR: {"S": C.lease_key(3, "w0002")}, "owner": {"S": "host:1:ab"}, "expires_at": {"N": "105.5"},
            "ready": {"BOOL": True}, "drained": {"BOOL": False}, "checkpoint": {"M": {"shard-0": {"S": "4961"}}}}
    # WHEN parsed
    lease = C.parse_lease_item(item)
    # THEN the slot, owner, flags and checkpoint come back, and the liveness checks read them
    assert (lease.worker_id, lease.owner, lease.expires_at, lease.ready, lease.released) == (
        "w0002", "host:1:ab", 105.5, True, False)
    assert lease.checkpoint == {"shard-0": "4961"}
    assert lease.live_and_ready(100.0) and not lease.live_and_ready(106.0)
    assert lease.held_by_other("host:2:cd", 100.0) and not lease.held_by_other("host:1:ab", 100.0)
