"""Router Lambda: validate, locate in the active spec, put to the version's geo stream (moto Kinesis)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from geokernel.contracts.env import EnvVar
from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.spec_pointer import spec_key
from geokernel.geo.tiles import Tile, bounds, quadkey
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec, entity_bucket
from geokernel.partition_spec.shards import entity_shard, with_shards
from lambdas.router import handler as router_handler
from lambdas.router.routing import ActiveSpecCache, InputRecord, RoutingTable, route_batch
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from partitioner.builders import build_spec
from partitioner.builders.assemble import with_catch_all_load
from tests.lambdas.conftest import CTX, Aws, grid_counts, load_event, make_spec


def activate(aws: Aws, spec: Spec) -> None:
    """Publish ``spec``, create its stream (one shard per worker) and point 'active' at it."""
    aws.specs.put_new(spec)
    aws.streams.create(spec.stream_name or "", len(spec.workers))
    aws.control.put("active", {"version": spec.version, "spec_key": spec_key(spec.version),
                               "stream_name": spec.stream_name, "flipped_at": "2026-11-21T10:00:00Z"})


def stream_records(aws: Aws, name: str) -> list[tuple[int, dict[str, Any], str]]:
    """Return (shard index, decoded record, partition key) of every record in the stream."""
    k = aws.clients.kinesis
    out = []
    shards = sorted(k.list_shards(StreamName=name)["Shards"], key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
    for i, shard in enumerate(shards):
        it = k.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            resp = k.get_records(ShardIterator=it, Limit=1000)
            out += [(i, json.loads(r["Data"]), r["PartitionKey"]) for r in resp["Records"]]
            it = resp.get("NextShardIterator") if resp["Records"] else None
    return out


def expected_shard(spec: Spec, lat: float, lon: float, entity: str) -> int:
    from geokernel.partition_spec.index import SpecIndex

    part = SpecIndex(spec).locate_one(lon, lat, entity)
    return [w.id for w in spec.workers].index(part.worker)


def test_recorded_batch_routes_valid_and_quarantines_invalid(aws: Aws) -> None:
    # GIVEN spec v1 active with its geo stream, and the recorded Kinesis batch (4 valid, 2 invalid)
    spec = make_spec(1)
    activate(aws, spec)
    router_handler.runtime.cache_clear()
    event = load_event("kinesis_ingest_batch.json")
    # WHEN the router handles it
    out = router_handler.handler(event, CTX)
    # THEN nothing is reported failed, the 4 valid events are on the shard of their partition's worker, untouched
    assert out == {"batchItemFailures": []}
    got = stream_records(aws, "georebal-geo-v1")
    assert sorted(r["event_id"] for _, r, _ in got) == ["e-0001", "e-0002", "e-0003", "e-0004"]
    for shard, rec, pkey in got:
        assert pkey == rec["entity_id"]
        assert shard == expected_shard(spec, rec["lat"], rec["lon"], rec["entity_id"])
    assert next(r for _, r, _ in got if r["event_id"] == "e-0001")["speed_kmh"] == 41.5
    # AND the two invalid ones are quarantined with their reason, raw text and source
    (qkey,) = aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/")
    lines = [json.loads(x) for x in aws.clients.s3.get_object(Bucket=aws.cfg.quarantine_bucket,
                                                               Key=qkey)["Body"].read().splitlines()]
    assert sorted(x["reason"].split(":")[0] for x in lines) == ["lat_out_of_range", "unparsable_json"]
    assert {x["raw"] for x in lines} >= {"NOT_JSON"}
    assert all("georebal-ingest" in x["source"] and x["quarantined_at"].endswith("Z") for x in lines)
    assert any("91.0" in x["reason"] for x in lines)


def test_failed_puts_are_reported_per_record_never_dropped(aws: Aws) -> None:
    # GIVEN an active pointer whose geo stream does not exist (every put fails)
    spec = make_spec(1)
    activate(aws, spec)
    aws.streams.delete("georebal-geo-v1")
    router_handler.runtime.cache_clear()
    event = load_event("kinesis_ingest_batch.json")
    # WHEN the router handles the batch
    out = router_handler.handler(event, CTX)
    # THEN exactly the 4 valid records are reported for retry (invalid ones were quarantined, not failed)
    ids = [f["itemIdentifier"] for f in out["batchItemFailures"]]
    seqs = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    assert ids == [seqs[0], seqs[1], seqs[2], seqs[3]]


def test_no_active_spec_fails_valid_records_for_retry(aws: Aws) -> None:
    # GIVEN no active spec yet
    router_handler.runtime.cache_clear()
    event = load_event("kinesis_ingest_batch.json")
    # WHEN handled
    out = router_handler.handler(event, CTX)
    # THEN valid records are failures (retried later), invalid ones still quarantined
    assert len(out["batchItemFailures"]) == 4
    assert len(aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/")) == 1


def test_quarantine_failure_reports_the_invalid_records(aws: Aws) -> None:
    # GIVEN a quarantine bucket that does not exist
    spec = make_spec(1)
    activate(aws, spec)
    records = [InputRecord("1", b'{"event_id": "a"}', "src"), InputRecord("2", b"[]", "src")]
    sink = QuarantineSink(aws.clients.s3, "no-such-bucket-here", "router")
    # WHEN routed
    res = route_batch(records, RoutingTable(spec, "georebal-geo-v1"), aws.streams, sink)
    # THEN both invalid records are failures with the reason naming the bucket
    assert res.failed_ids == ("1", "2") and res.quarantined == 0
    assert any("no-such-bucket-here" in r for r in res.reasons)


def test_cache_follows_a_flip_within_the_ttl(aws: Aws) -> None:
    # GIVEN v1 active and a router cache with a 5 s TTL on a controllable clock
    v1 = make_spec(1)
    activate(aws, v1)
    now = [1000.0]
    cache = ActiveSpecCache(ControlTable(aws.clients.dynamodb, aws.cfg.control_table),
                            SpecStore(aws.clients.s3, aws.cfg.specs_bucket), ttl_s=5.0, clock=lambda: now[0])
    assert cache.current().version == 1  # type: ignore[union-attr]
    # WHEN v2 is flipped active
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    activate(aws, v2)
    now[0] += 4.0
    before_ttl = cache.current()
    now[0] += 1.5
    after_ttl = cache.current()
    # THEN the router keeps v1 until the TTL passes, then routes to v2's stream
    assert before_ttl is not None and before_ttl.version == 1
    assert after_ttl is not None and (after_ttl.version, after_ttl.stream_name) == (2, "georebal-geo-v2")


def test_by_default_no_environment_routes_by_a_version_another_one_left(aws: Aws) -> None:
    # GIVEN v1 active and two router environments (default settings) that both routed by it
    v1 = make_spec(1)
    activate(aws, v1)
    control, specs = ControlTable(aws.clients.dynamodb, aws.cfg.control_table), SpecStore(aws.clients.s3, aws.cfg.specs_bucket)
    a, b = ActiveSpecCache(control, specs), ActiveSpecCache(control, specs)
    assert a.current().version == b.current().version == 1  # type: ignore[union-attr]
    # WHEN v2 is flipped active and environment a routes the shard's next batch
    activate(aws, make_spec(2, loads=(900, 900, 900, 900), previous=v1))
    after_a = a.current()
    # THEN the batch after it, in environment b, routes by v2 too: the shard's flip never goes back (with a cache,
    # b would route by v1 for up to its TTL, putting an entity's later records on the old stream)
    after_b = b.current()
    assert after_a is not None and after_b is not None and after_a.version == after_b.version == 2


def test_split_hot_cell_routes_by_entity(aws: Aws) -> None:
    # GIVEN a spec where one cell (2.5x max_load, no refinement rows) is split across workers by entity hash
    counts = grid_counts({(0, 0): 2500.0, (6, 0): 100.0})
    spec = build_spec(counts, 1000.0, version=1, stream_name="georebal-geo-v1")
    split = [p for p in spec.partitions if p.hash_range is not None]
    assert len(split) >= 3
    activate(aws, spec)
    b = bounds(Tile(2000, 1300, 12))
    lat, lon = (b.south + b.north) / 2, (b.west + b.east) / 2
    entities = [f"courier-{i}" for i in range(40)]
    raws = [json.dumps({"event_id": f"e{i}", "entity_id": e, "ts": 1795255500000, "lat": lat, "lon": lon}).encode()
            for i, e in enumerate(entities)]
    # WHEN routed
    res = route_batch([InputRecord(str(i), r, "t") for i, r in enumerate(raws)], RoutingTable(spec, "georebal-geo-v1"),
                      GeoStreams(aws.clients.kinesis), QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    # THEN each entity lands on the shard of the worker whose hash range holds its bucket
    assert res.routed == 40 and not res.failed_ids
    workers = [w.id for w in spec.workers]
    cell = quadkey(Tile(2000, 1300, 12))
    for shard, rec, _ in stream_records(aws, "georebal-geo-v1"):
        bucket = entity_bucket(rec["entity_id"])
        owner = next(p for p in split if p.quadkeys == (cell,) and p.hash_range[0] <= bucket < p.hash_range[1])
        assert shard == workers.index(owner.worker)
    assert len({shard for shard, _, _ in stream_records(aws, "georebal-geo-v1")}) >= 2


def test_a_catch_all_split_by_entity_hash_routes_unlisted_places_by_entity(aws: Aws) -> None:
    # GIVEN a spec whose catch-all expects three workers' worth of load in places it does not list
    spec = with_catch_all_load(make_spec(1), 2500.0, 1000.0)
    shares = [p for p in spec.partitions if p.is_catch_all]
    assert len(shares) == 3 and all(p.hash_range is not None for p in shares)
    activate(aws, spec)
    entities = [f"ship-{i}" for i in range(60)]
    raws = [json.dumps({"event_id": f"e{i}", "entity_id": e, "ts": 1795255500000, "lat": -60.0,
                        "lon": 120.0}).encode()
            for i, e in enumerate(entities)]
    # WHEN events in a place no region lists are routed
    res = route_batch([InputRecord(str(i), r, "t") for i, r in enumerate(raws)], RoutingTable(spec, "georebal-geo-v1"),
                      GeoStreams(aws.clients.kinesis), QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    # THEN each entity lands on the shard of the catch-all share whose hash range holds its bucket, all three used
    assert res.routed == 60 and not res.failed_ids
    workers = [w.id for w in spec.workers]
    got = stream_records(aws, "georebal-geo-v1")
    for shard, rec, _ in got:
        bucket = entity_bucket(rec["entity_id"])
        owner = next(p for p in shares if p.hash_range and p.hash_range[0] <= bucket < p.hash_range[1])
        assert shard == workers.index(owner.worker)
    assert {shard for shard, _, _ in got} == {workers.index(p.worker) for p in shares}


def test_payload_that_is_not_base64_is_quarantined(aws: Aws) -> None:
    # GIVEN a record whose data is not base64
    activate(aws, make_spec(1))
    router_handler.runtime.cache_clear()
    event = copy.deepcopy(load_event("kinesis_ingest_batch.json"))
    event["Records"] = event["Records"][:1]
    event["Records"][0]["kinesis"]["data"] = "%%% not base64 %%%"
    # WHEN handled
    out = router_handler.handler(event, CTX)
    # THEN it is quarantined as unparsable, not failed
    assert out == {"batchItemFailures": []}
    (qkey,) = aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/")
    body = json.loads(aws.clients.s3.get_object(Bucket=aws.cfg.quarantine_bucket, Key=qkey)["Body"].read())
    assert body["reason"].startswith("unparsable_json") and body["raw"] == "%%% not base64 %%%"


@pytest.mark.parametrize("n", [1, 1200])
def test_large_batches_are_chunked_and_all_routed(aws: Aws, n: int) -> None:
    # GIVEN n valid events (more than one PutRecords call when n > 500)
    spec = make_spec(1)
    activate(aws, spec)
    b = bounds(Tile(2004, 1300, 12))
    recs = [InputRecord(str(i), json.dumps({"event_id": f"e{i}", "entity_id": f"x{i % 7}", "ts": 1795255500005,
                                            "lat": (b.south + b.north) / 2, "lon": (b.west + b.east) / 2}).encode(),
                        "t") for i in range(n)]
    # WHEN routed
    res = route_batch(recs, RoutingTable(spec, "georebal-geo-v1"), aws.streams,
                      QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    # THEN every record was put, once
    assert (res.routed, res.failed_ids) == (n, ())
    ids = [r["event_id"] for _, r, _ in stream_records(aws, "georebal-geo-v1")]
    assert sorted(ids) == sorted(f"e{i}" for i in range(n))


def test_a_worker_with_two_shards_gets_each_entity_on_one_of_them(aws: Aws) -> None:
    # GIVEN an active spec whose workers own 2 shards each (a 2 * workers shard stream)
    spec = with_shards(make_spec(1), 2)
    aws.specs.put_new(spec)
    aws.streams.create(spec.stream_name or "", spec.shard_count)
    aws.control.put("active", {"version": spec.version, "spec_key": spec_key(spec.version),
                               "stream_name": spec.stream_name, "flipped_at": "2026-11-21T10:00:00Z"})
    # WHEN 3 events each of 30 entities at one place are routed, interleaved
    entities = [f"courier-{i}" for i in range(30)]
    raws = [json.dumps({"event_id": f"e{i}-{e}", "entity_id": e, "ts": 1795255500000 + i, "lat": 48.8566,
                        "lon": 2.3522}).encode() for i in range(3) for e in entities]
    res = route_batch([InputRecord(str(i), r, "t") for i, r in enumerate(raws)], RoutingTable(spec, spec.stream_name
                                                                                              or ""),
                      GeoStreams(aws.clients.kinesis), QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    assert res.routed == 90 and not res.failed_ids
    # THEN every entity's events are on one shard, in order, among its worker's two shards, and both are used
    records = stream_records(aws, spec.stream_name or "")
    worker = [w.id for w in spec.workers].index(SpecIndex(spec).locate_one(2.3522, 48.8566, "x").worker)
    on: dict[str, set[int]] = {}
    order: dict[str, list[int]] = {}
    for shard, rec, _ in records:
        on.setdefault(rec["entity_id"], set()).add(shard)
        order.setdefault(rec["entity_id"], []).append(rec["ts"] - 1795255500000)
    assert len(records) == 90 and all(len(s) == 1 for s in on.values())
    assert set().union(*on.values()) == {2 * worker, 2 * worker + 1}
    assert all(ts == [0, 1, 2] for ts in order.values())
    # AND the shard is the one entity_shard names
    assert all(on[e] == {2 * worker + entity_shard(e, 2)} for e in entities)


def test_one_shard_workers_route_to_their_hash_key_as_before(aws: Aws) -> None:
    # GIVEN a built spec of one-shard workers: with_shards(spec, 1) gives it back unchanged
    spec = make_spec(1)
    assert with_shards(spec, 1) == spec and spec.shard_count == len(spec.workers)
    table = RoutingTable(spec, "s")
    # WHEN keys are asked for the centre of each hot cell (one per worker) and a far point (the catch-all)
    centres = [bounds(Tile(2000 + 4 * i, 1300, 12)) for i in range(3)]
    lons = [(b.west + b.east) / 2 for b in centres] + [139.6503]
    lats = [(b.south + b.north) / 2 for b in centres] + [35.6762]
    keys = table.hash_keys_for(lons, lats, ["a", "b", "c", "d"])
    # THEN each is the owning worker's hash_key, and the three cells go to three workers
    idx = SpecIndex(spec)
    owners = [idx.locate_one(lon, lat, e).worker for lon, lat, e in zip(lons, lats, "abcd", strict=True)]
    assert keys == [spec.worker(w).hash_key for w in owners] and len(set(owners[:3])) == 3


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")


def test_a_producers_own_field_names_are_routed_with_event_fields(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN spec v1 active, EVENT_FIELDS naming a producer's keys, and the recorded batch sent under those keys
    spec = make_spec(1)
    activate(aws, spec)
    monkeypatch.setenv(EnvVar.EVENT_FIELDS, RENAMED.to_json())
    router_handler.runtime.cache_clear()
    event = copy.deepcopy(load_event("kinesis_ingest_batch.json"))
    for r in event["Records"]:
        try:
            doc = json.loads(base64.b64decode(r["kinesis"]["data"]))
        except ValueError:
            continue
        r["kinesis"]["data"] = base64.b64encode(json.dumps(RENAMED.mapped(doc)).encode()).decode()
    # WHEN the router handles it
    out = router_handler.handler(event, CTX)
    router_handler.runtime.cache_clear()
    # THEN the 4 valid events are on their worker's shard, keyed by the mapped entity, bytes as the producer sent them
    assert out == {"batchItemFailures": []}
    got = stream_records(aws, "georebal-geo-v1")
    assert sorted(r["id"] for _, r, _ in got) == ["e-0001", "e-0002", "e-0003", "e-0004"]
    for shard, rec, pkey in got:
        assert pkey == rec["vehicle"] and "lat" not in rec
        assert shard == expected_shard(spec, rec["latitude"], rec["longitude"], rec["vehicle"])
    # AND the out-of-range one is quarantined with a reason naming the producer's field
    (qkey,) = aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/")
    body = aws.clients.s3.get_object(Bucket=aws.cfg.quarantine_bucket, Key=qkey)["Body"].read().decode()
    reasons = sorted(json.loads(x)["reason"] for x in body.splitlines())
    assert reasons[0].startswith("lat_out_of_range: latitude 91.0") and reasons[1].startswith("unparsable_json")


def test_route_batch_reads_the_mapped_fields(aws: Aws) -> None:
    # GIVEN one event under a producer's keys
    spec = make_spec(1)
    activate(aws, spec)
    b = bounds(Tile(2004, 1300, 12))
    doc = {"id": "e1", "vehicle": "x", "time": 1795255500005, "latitude": (b.south + b.north) / 2,
           "longitude": (b.west + b.east) / 2}
    recs = [InputRecord("1", json.dumps(doc).encode(), "t")]
    sink = QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r")
    # WHEN routed with the mapping, and without it
    mapped = route_batch(recs, RoutingTable(spec, "georebal-geo-v1"), aws.streams, sink, RENAMED)
    default = route_batch(recs, RoutingTable(spec, "georebal-geo-v1"), aws.streams, sink)
    # THEN the mapping routes it, and the canonical names quarantine it as missing its fields
    assert (mapped.routed, mapped.quarantined) == (1, 0)
    assert (default.routed, default.quarantined) == (0, 1)


@pytest.mark.parametrize("arn", [
    "arn:aws:kinesis:eu-west-1:123456789012:stream/georebal-ingest",
    "arn:aws:kinesis:eu-west-1:123456789012:stream/georebal-ingest/consumer/georebal-router:1700000000",
])
def test_the_ingest_shard_names_the_stream_also_through_a_fan_out_consumer(arn: str) -> None:
    # GIVEN a batch whose records name the stream, or the enhanced fan-out consumer the router reads through
    event = {"Records": [{"eventSourceARN": arn, "eventID": "shardId-000000000003:4960"}]}
    # WHEN its ingest shard is read THEN it is the stream's name and the shard id either way
    assert router_handler.ingest_shard_of(event) == ("georebal-ingest", "shardId-000000000003")

