"""Event decoding, quarantine reasons and the enriched record."""

from __future__ import annotations

import json

import pytest
from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.pipeline.cost import Calibration
from geo_service.pipeline.records import BadRecord, Event, decode_event, enriched_record
from geo_service.worker import GeoWorker
from geokernel import timestamps
from geokernel.contracts.enriched import enriched_key
from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.quarantine import geo_quarantine_key as quarantine_key
from geokernel.contracts.timestamps import TsUnit
from tests.events.ts_units import EXPECTS, NOW_MS, Expect

GOOD = {"event_id": "e1", "entity_id": "car-1", "ts": 1763700000000, "lat": 48.85, "lon": 2.35, "extra": [1]}


def test_valid_event_keeps_every_field() -> None:
    # GIVEN a valid event with an extra field
    # WHEN decoded
    ev = decode_event(json.dumps(GOOD).encode(), "s/shard/1")
    # THEN it is an Event with the coordinates, all original fields and the event time in ms (ts_ms)
    assert isinstance(ev, Event) and (ev.event_id, ev.entity_id, ev.lat, ev.lon) == ("e1", "car-1", 48.85, 2.35)
    assert ev.fields == {**GOOD, "ts_ms": GOOD["ts"]} and ev.ts_ms == GOOD["ts"]


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{oops", "unparsable_json"),
    (b"[1, 2]", "not_an_object: expected a JSON object, got list"),
    (json.dumps({**GOOD, "lat": None}).encode(), "missing_field: lat missing"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "entity_id"}).encode(), "missing_field: entity_id missing"),
    (json.dumps({**GOOD, "event_id": [5]}).encode(), "bad_type: event_id must be a string, got [5]"),
    (json.dumps({**GOOD, "lon": True}).encode(), "bad_type: lon must be a number, got True"),
    (b'{"event_id": "e", "entity_id": "c", "ts": 1, "lat": NaN, "lon": 1}', "nan: lat is not finite: nan"),
    (json.dumps({**GOOD, "lat": 88.0}).encode(), "lat_out_of_range: lat 88.0"),
    (json.dumps({**GOOD, "lon": -181}).encode(), "lon_out_of_range: lon -181"),
    (json.dumps({**GOOD, "ts": "yesterday"}).encode(),
     "bad_timestamp: ts 'yesterday' is neither an epoch number nor an ISO-8601 date-time"),
])
def test_bad_records_get_a_reason_naming_the_value(raw: bytes, reason: str) -> None:
    # GIVEN a malformed record
    # WHEN decoded
    got = decode_event(raw, "stream/shardId-1/42")
    # THEN it becomes a BadRecord with the contract reason, the raw text and the source
    assert isinstance(got, BadRecord) and got.reason.startswith(reason)
    body = got.to_dict()
    assert body["raw"] == raw.decode() and body["source"] == "stream/shardId-1/42" and body["quarantined_at"]


def test_enriched_record_routing_ids_win_over_transform_and_event_fields() -> None:
    # GIVEN an event and transform fields that try to overwrite a routing id
    ev = decode_event(json.dumps({**GOOD, "worker_id": "spoof"}).encode(), "s")
    assert isinstance(ev, Event)
    # WHEN the enriched record is built
    row = enriched_record(ev, {"place": "Paris", "partition_id": "spoof"}, spec_version=3, partition_id="p0002",
                          worker_id="w0001", stray=False)
    # THEN the routing ids are the worker's, the rest passes through
    assert row["partition_id"] == "p0002" and row["worker_id"] == "w0001" and row["spec_version"] == 3
    assert row["place"] == "Paris" and row["extra"] == [1] and row["event_id"] == "e1" and row["stray"] is False


def test_output_keys_follow_the_contract() -> None:
    # GIVEN / WHEN keys are built / THEN they follow CONTRACTS
    assert (enriched_key(1763700000000, 4, "w0002", 1763700000123, 1)
            == "enriched/dt=2025-11-21/hour=04/v4-w0002-1763700000123-1.jsonl.gz")
    assert quarantine_key(4, "w0002", 1763700000123) == "quarantine/geo/v4/w0002/1763700000123.jsonl"


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")


def test_a_producers_own_names_decode_to_the_canonical_fields() -> None:
    # GIVEN an event under a producer's keys, and one missing its mapped latitude
    data = json.dumps(RENAMED.mapped(GOOD)).encode()
    bad = json.dumps({k: v for k, v in RENAMED.mapped(GOOD).items() if k != "latitude"}).encode()
    # WHEN decoded with the mapping
    ev, rj = decode_event(data, "s/shard/1", RENAMED), decode_event(bad, "s/shard/2", RENAMED)
    # THEN the event carries the canonical names and its bytes as sent; the bad one names the producer's key
    assert isinstance(ev, Event) and ev.fields == {**GOOD, "ts_ms": GOOD["ts"]} and ev.raw == data
    assert isinstance(rj, BadRecord) and rj.reason.startswith("missing_field: latitude missing")
    assert enriched_record(ev, {}, spec_version=1, partition_id="p0", worker_id="w0001", stray=False)["lat"] == 48.85


def test_a_worker_with_event_fields_writes_canonical_records(clients: Clients, resources: Resources) -> None:
    # GIVEN a worker configured with EVENT_FIELDS and events put under the producer's keys
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    for i in range(5):
        doc = {**GOOD, "event_id": f"e{i}", "entity_id": f"car-{i}"}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(RENAMED.mapped(doc)).encode(),
                                   PartitionKey="k", ExplicitHashKey=spec.workers[0].hash_key)
    w = GeoWorker(resources.config(1, event_fields=RENAMED), clients, calibration=Calibration(seconds_per_unit=0.004))
    try:
        w.wait_ready(timeout=60)
        # WHEN it processes them
        w.run_until(lambda s: s.events_out == 5, timeout=30)
        rows = enriched_rows(clients, resources)
    finally:
        w.stop()
    # THEN every output record uses the canonical names (none of the producer's renamed keys)
    assert sorted(r["event_id"] for r in rows) == [f"e{i}" for i in range(5)]
    assert all(r["lat"] == 48.85 and r["entity_id"].startswith("car-") and "latitude" not in r for r in rows)


@pytest.mark.parametrize("expect", EXPECTS, ids=[e.id for e in EXPECTS])
def test_the_shared_time_unit_table(expect: Expect, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a case of the one table of event times (tests/events/ts_units.json), the worker's clock at its now
    monkeypatch.setattr(timestamps, "now_ms", lambda: NOW_MS)
    data = json.dumps(expect.event()).encode()
    # WHEN the worker decodes it under the case's ts_unit (EVENT_FIELDS) and writes its enriched record
    got = decode_event(data, "s/shard/1", EventFields(ts_unit=expect.unit))
    # THEN it is valid with the table's time, which the record carries as ts_ms beside ts as sent, or quarantined
    ms = got.ts_ms if isinstance(got, Event) else None
    assert expect.verdict(ms, got.reason if isinstance(got, BadRecord) else None) is None
    if isinstance(got, Event):
        row = enriched_record(got, {}, spec_version=1, partition_id="p0", worker_id="w0001", stray=False)
        assert (row["ts"], row["ts_ms"]) == (expect.ts, expect.ms)


def test_a_worker_deployed_with_ts_unit_s_writes_the_event_time_in_ms(clients: Clients, resources: Resources) -> None:
    # GIVEN a worker whose event field mapping says ts_unit s, and events stamped in epoch seconds
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    for i in range(3):
        doc = {**GOOD, "event_id": f"e{i}", "ts": 1763700000 + i}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(doc).encode(), PartitionKey="k",
                                   ExplicitHashKey=spec.workers[0].hash_key)
    fields = EventFields(ts_unit=TsUnit.S)
    w = GeoWorker(resources.config(1, event_fields=fields), clients, calibration=Calibration(seconds_per_unit=0.004))
    try:
        w.wait_ready(timeout=60)
        # WHEN it processes them
        w.run_until(lambda s: s.events_out == 3, timeout=30)
        rows = enriched_rows(clients, resources)
    finally:
        w.stop()
    # THEN each record keeps ts as sent (seconds) and carries the event time in ms
    assert sorted((r["ts"], r["ts_ms"]) for r in rows) == [(1763700000 + i, (1763700000 + i) * 1000) for i in range(3)]
