"""The shared names of geokernel.contracts: keys round-trip and stored strings never change."""

from __future__ import annotations

import re

import pytest

from geokernel.contracts.control import ControlKey
from geokernel.contracts.cost import cost_key, parse_cost_key
from geokernel.contracts.enriched import (
    PARTITION_TEMPLATE,
    EnrichedKey,
    decode_lines,
    encode_lines,
    enriched_key,
    event_hour,
    hour_prefix,
    parse_enriched_key,
)
from geokernel.contracts.errors import ContractError
from geokernel.contracts.events import REASON_CODES
from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord, handover_key
from geokernel.contracts.quarantine import batch_quarantine_key, geo_quarantine_key, lambda_quarantine_key
from geokernel.contracts.slot import SlotId
from geokernel.contracts.spec_pointer import parse_spec_key, spec_key
from geokernel.contracts.stream import geo_stream_name, geo_stream_prefix, stream_manifest_key


def test_keys_round_trip() -> None:
    # GIVEN a version, a slot and a time WHEN their keys are built and parsed THEN the same values come back
    assert parse_spec_key(spec_key(12)) == 12
    assert parse_enriched_key(enriched_key(1_795_364_177_080, 3, "w-0002", 1_795_364_180_000, 2)) == EnrichedKey(
        event_hour(1_795_364_177_080), 3, "w-0002", 1_795_364_180_000, 2)
    assert SlotId.match(str(SlotId(7, "w0010"))) == SlotId(7, "w0010")
    assert parse_cost_key(cost_key(2, "w0001", 1_795_000_000.9)) == (2, "w0001", 1_795_000_000)


def test_stored_strings_are_the_ones_already_in_buckets_streams_and_tables() -> None:
    # GIVEN objects and items written by earlier versions WHEN their names are built today THEN they match
    assert spec_key(3) == "specs/v00000003.json"
    assert cost_key(2, "w0001", 1_795_000_000.9) == "costs/v2/w0001/1795000000.json"
    assert geo_quarantine_key(2, "w0001", 5) == "quarantine/geo/v2/w0001/5.jsonl"
    assert batch_quarantine_key(3, 1) == "quarantine/batch=00000003/part-00001.jsonl"
    assert lambda_quarantine_key("router", "2026-01-02", 17, "ab12") == "quarantine/router/2026-01-02/17-ab12.jsonl"
    assert geo_stream_name("georebal", 4) == "georebal-geo-v4" and geo_stream_prefix("georebal") == "georebal-geo-v"
    assert stream_manifest_key(4) == "streams/v00000004.json"
    assert handover_key(4) == "handover#v4" and SlotId.match(handover_key(4)) is None
    assert [k.value for k in ControlKey] == ["desired", "active", "deploy", "plan", "policy", "snapshot", "latency",
                                             "swap", "code"]
    assert REASON_CODES == ("unparsable_json", "not_an_object", "missing_field", "bad_type", "nan",
                            "lat_out_of_range", "lon_out_of_range", "bad_timestamp", "corrupt_kpl_record")


@pytest.mark.parametrize("key", ["specs/v12.json", "specs/v00000012.json.tmp", "other/v00000012.json"])
def test_other_keys_are_not_specs(key: str) -> None:
    # GIVEN a key of another shape WHEN parsed as a spec key THEN it is not one
    assert parse_spec_key(key) is None


@pytest.mark.parametrize("key", ["enriched/v1/w1/17.jsonl", "enriched/dt=2025-11-21/hour=24/v1-w1-17-0.jsonl.gz",
                                 "enriched/dt=2025-02-30/hour=01/v1-w1-17-0.jsonl.gz",
                                 "enriched/dt=2025-11-21/hour=01/v1-w1-17-0.jsonl"])
def test_a_bad_enriched_key_is_named(key: str) -> None:
    # GIVEN a key of another shape (the old routing layout, an hour or a day that does not exist, no gzip)
    # WHEN parsed THEN the error names it
    with pytest.raises(ContractError, match=re.escape(repr(key))):
        parse_enriched_key(key)
    assert SlotId.match("active") is None
    assert parse_cost_key("costs/v1/w1/x.json") is None


def test_enriched_objects_are_partitioned_by_the_events_utc_hour() -> None:
    # GIVEN an event at 2025-11-21T04:40:00.123Z and one a millisecond before 05:00
    # WHEN the keys of their objects are built
    # THEN each is in the folder of its UTC date and hour, the template Athena projects, whatever the write time
    assert enriched_key(1_763_700_000_123, 4, "w0002", 1_763_800_000_000) == (
        "enriched/dt=2025-11-21/hour=04/v4-w0002-1763800000000-0.jsonl.gz")
    assert hour_prefix(1_763_701_199_999) == PARTITION_TEMPLATE.replace("${dt}", "2025-11-21").replace("${hour}", "04")
    assert event_hour(1_763_701_200_000) == 1_763_701_200_000 and hour_prefix(0) == "enriched/dt=1970-01-01/hour=00/"
    # AND a worker id with a '/' would make another folder: refused by name
    with pytest.raises(ContractError, match="'w/1'"):
        enriched_key(0, 1, "w/1", 0)


def test_an_enriched_body_is_gzipd_json_lines_and_anything_else_is_named() -> None:
    # GIVEN two JSON lines WHEN encoded THEN the same bytes every time (no time in the gzip header), decoded back
    body = encode_lines(['{"event_id":"a"}', '{"event_id":"b"}'])
    assert body == encode_lines(['{"event_id":"a"}', '{"event_id":"b"}']) and body[:2] == b"\x1f\x8b"
    assert decode_lines(body, "k") == ['{"event_id":"a"}', '{"event_id":"b"}']
    # AND an uncompressed body is refused naming where it came from
    with pytest.raises(ContractError, match=r"^s3://b/k: not gzip'd"):
        decode_lines(b'{"event_id":"a"}\n', "s3://b/k")


def test_a_lease_item_reads_back_as_the_record_both_sides_use() -> None:
    # GIVEN a lease item as DynamoDB returns it (attribute-value form)
    item = {LEASE_KEY_ATTR: {"S": str(SlotId(3, "w0002"))}, "owner": {"S": "host:1:ab"}, "expires_at": {"N": "105.5"},
            "ready": {"BOOL": True}, "drained": {"BOOL": False}, "checkpoint": {"M": {"shard-0": {"S": "4961"}}},
            "claimed_at": {"N": "90"}}
    # WHEN parsed
    lease = LeaseRecord.from_raw(item)
    # THEN the slot, owner, flags and checkpoint come back, and the liveness checks read them
    assert (lease.version, lease.worker_id, lease.owner, lease.expires_at, lease.ready, lease.released) == (
        3, "w0002", "host:1:ab", 105.5, True, False)
    assert lease.checkpoint == {"shard-0": "4961"} and (lease.claimed_at, lease.ready_at) == (90.0, None)
    assert lease.live_and_ready(100.0) and not lease.live_and_ready(106.0)
    assert lease.held_by_other("host:2:cd", 100.0) and not lease.held_by_other("host:1:ab", 100.0)
    # AND the same item in plain values (a boto3 resource scan) reads back the same
    plain = {LEASE_KEY_ATTR: "v3#w0002", "owner": "host:1:ab", "expires_at": 105.5, "ready": True, "drained": False,
             "checkpoint": {"shard-0": "4961"}, "claimed_at": 90}
    assert LeaseRecord.from_item(plain) == lease


def test_the_handover_summary_is_not_a_slot_lease() -> None:
    # GIVEN the handover summary item in the leases table WHEN read as a lease THEN it has no version
    lease = LeaseRecord.from_item({LEASE_KEY_ATTR: handover_key(5), "at": 1.0})
    assert lease.version is None and lease.worker_id == "handover#v5" and lease.owner is None
