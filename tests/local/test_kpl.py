"""local.kpl and local.replay: the producer's records on the ingest stream, one event each or KPL-aggregated (``--kpl``)."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from geokernel.contracts.errors import ContractError
from geokernel.contracts.kpl import KplError, deaggregate, is_aggregated, unpack
from geokernel.contracts.stream import ShardRange, partition_hash_key, shard_for_key
from geokernel.events import ValidEvent, parse_event
from local.dataset import EventFactory, Scenario, bad_events, load_places
from local.kpl import corrupt_kpl_record, kpl_aggregate
from local.replay import KPL_EVENTS_PER_RECORD, Replayer

#: Two shards that split the hash-key space in half, as ``ListShards`` lists them.
HALF = 2 ** 127
SHARDS = [{"ShardId": f"shardId-00000000000{i}",
           "HashKeyRange": {"StartingHashKey": str(i * HALF), "EndingHashKey": str((i + 1) * HALF - 1)},
           "SequenceNumberRange": {"StartingSequenceNumber": "1"}} for i in range(2)]


class RecordingKinesis:
    """PutRecords that accepts everything and keeps each record; ListShards lists :data:`SHARDS`."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def list_shards(self, StreamName: str) -> dict[str, Any]:
        return {"Shards": SHARDS}

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.records += Records
        return {"FailedRecordCount": 0, "Records": [{"SequenceNumber": "1"} for _ in Records]}


def replay(kpl: int) -> tuple[Replayer, RecordingKinesis]:
    """A replayer at 400 events/s run for two ticks 0.3 s apart, bad records due at once."""
    kinesis = RecordingKinesis()
    factory = EventFactory(load_places("world", limit=50), Scenario(4.0, 3600.0, hotspot_place=10), seed=3)
    r = Replayer(kinesis, "ingest", factory, rate=400, duration_s=60, bad_at=0.0, kpl=kpl)
    r.step()
    time.sleep(0.3)
    r.step()
    return r, kinesis


def test_kpl_aggregate_packs_records_in_order_keyed_by_the_first() -> None:
    # GIVEN 60 (data, partition key) records
    records = [(json.dumps({"event_id": f"e{i}"}).encode(), f"ent-{i}") for i in range(60)]
    # WHEN packed 25 per record
    packed = kpl_aggregate(records, 25)
    # THEN three aggregated records of 25, 25, 10 that decode to the same payloads and keys, each keyed by its first
    assert [len(unpack(blob)) for blob, _ in packed] == [25, 25, 10]
    assert [p for blob, _ in packed for p in deaggregate(blob)] == [d for d, _ in records]
    assert [k for _, k in packed] == ["ent-0", "ent-25", "ent-50"]
    assert [u.partition_key for blob, _ in packed for u in unpack(blob)] == [k for _, k in records]


def test_kpl_aggregate_with_shards_packs_only_records_of_one_shard_keeping_their_order() -> None:
    # GIVEN 200 events of 40 entities, interleaved, and a stream of two shards
    shards = [ShardRange.from_list_shards(s) for s in SHARDS]
    records = [(json.dumps({"event_id": f"e{i}"}).encode(), f"ent-{i % 40}") for i in range(200)]
    # WHEN packed 25 per record, per shard
    packed = kpl_aggregate(records, 25, shards)
    # THEN every user record of an aggregated record hashes to the shard its partition key sends it to
    for blob, key in packed:
        home = shard_for_key(shards, key)
        assert {shard_for_key(shards, u.partition_key) for u in unpack(blob)} == {home}
    # AND both shards got records, nothing is lost, and each entity's events keep their order
    assert len({shard_for_key(shards, key).shard_id for _, key in packed}) == 2
    out = [(u.data, u.partition_key) for blob, _ in packed for u in unpack(blob)]
    assert sorted(out) == sorted(records)
    for ent in {k for _, k in records}:
        assert [d for d, k in out if k == ent] == [d for d, k in records if k == ent]


def test_shard_for_key_uses_the_md5_of_the_partition_key_and_names_a_key_no_shard_holds() -> None:
    # GIVEN the two shards WHEN a key is placed THEN by its MD5 as a 128-bit number
    shards = [ShardRange.from_list_shards(s) for s in SHARDS]
    key = "vessel-1"
    digest = int(hashlib.md5(key.encode()).hexdigest(), 16)
    assert partition_hash_key(key) == digest and shard_for_key(shards, key).holds(digest)
    # AND a key outside every listed shard is a ContractError naming the key
    with pytest.raises(ContractError, match="'vessel-1'"):
        shard_for_key([s for s in shards if not s.holds(digest)], key)


def test_without_kpl_every_record_is_one_event_as_before() -> None:
    # GIVEN / WHEN a replay without --kpl
    r, kinesis = replay(0)
    # THEN no record is aggregated, the valid ones are exactly the events counted in, the bad ones each alone
    assert not any(is_aggregated(rec["Data"]) for rec in kinesis.records)
    valid = [p for rec in kinesis.records if isinstance(p := parse_event(rec["Data"]), ValidEvent)]
    assert sorted(v.event_id for v in valid) == sorted(r.sent_ids) and len(r.sent_ids) > 50
    assert len(kinesis.records) == len(r.sent_ids) + len(bad_events(3, 0))
    assert "corrupt_kpl_record" not in r.bad_sent


def test_with_kpl_events_go_aggregated_and_one_corrupt_record_is_injected() -> None:
    # GIVEN / WHEN a replay with --kpl (25 events per record)
    r, kinesis = replay(KPL_EVENTS_PER_RECORD)
    # THEN every record is aggregated, at most 25 per record, keyed by its first event's entity, one shard's only
    assert all(is_aggregated(rec["Data"]) for rec in kinesis.records)
    shards = [ShardRange.from_list_shards(s) for s in SHARDS]
    payloads: list[bytes] = []
    corrupt = 0
    for rec in kinesis.records:
        try:
            users = unpack(rec["Data"])
        except KplError:
            corrupt += 1
            continue
        assert 1 <= len(users) <= KPL_EVENTS_PER_RECORD and rec["PartitionKey"] == users[0].partition_key
        assert len({shard_for_key(shards, u.partition_key).shard_id for u in users}) == 1
        payloads += [u.data for u in users]
    # AND they carry exactly the events counted in plus the bad ones, and one record does not decode
    valid = [p for d in payloads if isinstance(p := parse_event(d), ValidEvent)]
    assert sorted(v.event_id for v in valid) == sorted(r.sent_ids) and len(r.sent_ids) > 50
    assert len(payloads) - len(valid) == len(bad_events(3, 0))
    assert corrupt == 1 and r.bad_sent["corrupt_kpl_record"] == 1


def test_the_corrupt_record_has_the_magic_and_a_wrong_md5() -> None:
    # GIVEN / WHEN the injected corrupt record THEN it looks aggregated but its MD5 is named as wrong
    blob = corrupt_kpl_record(7)
    assert is_aggregated(blob)
    with pytest.raises(KplError, match="MD5"):
        unpack(blob)
