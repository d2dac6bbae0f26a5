"""Router Lambda with KPL aggregated ingest records (built by aws_kinesis_agg): each user record routed, quarantined
or failed on its own; failures report the parent's sequence number (moto Kinesis and S3)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from aws_kinesis_agg.aggregator import RecordAggregator

from geokernel.geo.tiles import Tile, bounds
from lambdas.router import handler as router_handler
from lambdas.router.handler import parse_kinesis_event
from tests.lambdas.conftest import CTX, Aws, load_event, make_spec
from tests.lambdas.test_router import activate, stream_records

STREAM_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/georebal-ingest"


def events(n: int) -> list[bytes]:
    """``n`` valid events spread over the spec's three hot cells (so over its workers), then one invalid."""
    out = []
    for i in range(n):
        b = bounds(Tile(2000 + 4 * (i % 3), 1300, 12))
        out.append(json.dumps({"event_id": f"e{i:03d}", "entity_id": f"truck-{i % 7}", "ts": 1795255500000 + i,
                               "lat": b.south + (b.north - b.south) * (i % 5 + 1) / 7,
                               "lon": b.west + (b.east - b.west) * (i % 4 + 1) / 6, "speed_kmh": i}).encode())
    return [*out, json.dumps({"event_id": "bad", "entity_id": "truck-1", "ts": 1795255500000, "lat": 91.0,
                              "lon": 0.0}).encode()]


def kpl(payloads: list[bytes]) -> bytes:
    """One KPL aggregated record of ``payloads`` (partition key of each: its entity)."""
    agg = RecordAggregator()
    for p in payloads:
        assert agg.add_user_record(json.loads(p)["entity_id"], p) is None
    return bytes(agg.clear_and_get().get_contents()[2])


def kinesis_event(datas: list[bytes]) -> dict[str, Any]:
    """A Kinesis Lambda event of ``datas`` shaped like the recorded batch, sequence numbers ``49...<i>``."""
    template = load_event("kinesis_ingest_batch.json")["Records"][0]
    records = []
    for i, data in enumerate(datas):
        r = copy.deepcopy(template)
        seq = f"49{i:054d}"
        r["kinesis"].update(sequenceNumber=seq, data=base64.b64encode(data).decode())
        r["eventID"] = f"shardId-000000000000:{seq}"
        records.append(r)
    return {"Records": records}


def quarantined(aws: Aws) -> list[dict[str, Any]]:
    s3 = aws.clients.s3
    return [json.loads(line) for key in aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/")
            for line in s3.get_object(Bucket=aws.cfg.quarantine_bucket, Key=key)["Body"].read().splitlines()]


def test_aggregated_records_reach_the_geo_stream_like_the_same_events_one_per_record(aws: Aws) -> None:
    # GIVEN 60 events and one invalid, sent one per record to spec v1, and KPL-aggregated 20 per record to an equal v2
    payloads = events(60)
    activate(aws, make_spec(1))
    router_handler.runtime.cache_clear()
    plain = router_handler.handler(kinesis_event(payloads), CTX)
    activate(aws, make_spec(2))
    router_handler.runtime.cache_clear()
    # WHEN the router handles the aggregated batch
    out = router_handler.handler(kinesis_event([kpl(payloads[i:i + 20]) for i in range(0, 61, 20)]), CTX)
    # THEN nothing failed, and v2's stream holds the same records, on the same shards, with the same keys as v1's
    assert out == plain == {"batchItemFailures": []}
    one_each = sorted((s, json.dumps(r, sort_keys=True), k) for s, r, k in stream_records(aws, "georebal-geo-v1"))
    packed = sorted((s, json.dumps(r, sort_keys=True), k) for s, r, k in stream_records(aws, "georebal-geo-v2"))
    assert packed == one_each and len(packed) == 60 and len({s for s, _, _ in packed}) == 3
    # AND the invalid event was quarantined both times, the aggregated one named by parent and index
    sources = sorted(q["source"] for q in quarantined(aws) if q["reason"].startswith("lat_out_of_range"))
    shard = f"{STREAM_ARN}/shardId-000000000000"
    assert sources == [f"{shard}/49{3:054d}/sub=0", f"{shard}/49{60:054d}"]


def test_a_failed_sub_record_reports_its_parent_once(aws: Aws) -> None:
    # GIVEN an active pointer whose geo stream does not exist (every put fails) and two aggregated records
    # plus one plain record
    activate(aws, make_spec(1))
    aws.streams.delete("georebal-geo-v1")
    router_handler.runtime.cache_clear()
    payloads = events(9)
    event = kinesis_event([kpl(payloads[:4]), payloads[4], kpl(payloads[5:])])
    # WHEN handled
    out = router_handler.handler(event, CTX)
    # THEN each parent is reported once, by its own sequence number (what the event source mapping checkpoints)
    seqs = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    assert [f["itemIdentifier"] for f in out["batchItemFailures"]] == seqs


def test_a_corrupt_aggregated_record_is_quarantined_whole_not_failed(aws: Aws) -> None:
    # GIVEN an aggregated record whose MD5 was damaged, after a good one
    activate(aws, make_spec(1))
    router_handler.runtime.cache_clear()
    good = kpl(events(3)[:3])
    corrupt = good[:-1] + bytes([good[-1] ^ 1])
    # WHEN handled
    out = router_handler.handler(kinesis_event([good, corrupt]), CTX)
    # THEN nothing is failed (the same bytes would fail again), the good record's events are routed
    assert out == {"batchItemFailures": []}
    assert len(stream_records(aws, "georebal-geo-v1")) == 3
    # AND the corrupt one is one quarantine record with the code, a reason naming the MD5, its base64 and source
    (rec,) = quarantined(aws)
    source = f"{STREAM_ARN}/shardId-000000000000/49{1:054d}"
    assert rec["reason"].startswith(f"corrupt_kpl_record: {source}: KPL aggregated record's MD5 ")
    assert corrupt[-16:].hex() in rec["reason"]
    assert base64.b64decode(rec["raw"]) == corrupt and rec["source"] == source


def test_plain_records_parse_exactly_as_before() -> None:
    # GIVEN the recorded batch (no aggregated record)
    event = load_event("kinesis_ingest_batch.json")
    # WHEN parsed
    records = parse_kinesis_event(event)
    # THEN one record per Kinesis record: its sequence number, its bytes, its source, nothing pre-rejected
    assert [r.item_id for r in records] == [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    assert all(r.rejected is None and r.source.endswith("/" + r.item_id) for r in records)
    assert records[0].data == base64.b64decode(event["Records"][0]["kinesis"]["data"])


def test_sub_records_carry_the_parent_sequence_number_and_their_index() -> None:
    # GIVEN one aggregated record of three events
    payloads = events(2)
    # WHEN parsed
    records = parse_kinesis_event(kinesis_event([kpl(payloads)]))
    # THEN three records, in order, all with the parent's sequence number, sources ending /sub=<index>
    assert [r.data for r in records] == payloads
    assert {r.item_id for r in records} == {f"49{0:054d}"}
    assert [r.source.rsplit("/", 1)[1] for r in records] == ["sub=0", "sub=1", "sub=2"]
