"""local.kpl and local.replay: the producer's records on the ingest stream, one event each or KPL-aggregated (``--kpl``)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from local.dataset import EventFactory, Scenario, bad_events, load_places
from local.kpl import corrupt_kpl_record, kpl_aggregate
from local.replay import KPL_EVENTS_PER_RECORD, Replayer
from partitioner.contracts.kpl import KplError, deaggregate, is_aggregated, unpack
from partitioner.load.events import ValidEvent, parse_event


class RecordingKinesis:
    """PutRecords that accepts everything and keeps each record."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

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
    # THEN every record is aggregated, at most 25 per record, keyed by its first event's entity
    assert all(is_aggregated(rec["Data"]) for rec in kinesis.records)
    payloads: list[bytes] = []
    corrupt = 0
    for rec in kinesis.records:
        try:
            users = unpack(rec["Data"])
        except KplError:
            corrupt += 1
            continue
        assert 1 <= len(users) <= KPL_EVENTS_PER_RECORD and rec["PartitionKey"] == users[0].partition_key
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
