"""glue_jobs.events.deaggregate_records: KPL aggregated Kinesis payloads (built by aws_kinesis_agg) count like the
same events sent one per record; a corrupt aggregated record is quarantined whole with a clear reason."""

from __future__ import annotations

import base64
import json

import pytest
from aws_kinesis_agg import aggregator

from geokernel.contracts.kpl import sub_record_source
from glue_jobs.events import (
    DECODE_REASON,
    classify_events,
    deaggregate_records,
    quarantine_records,
    valid_events,
)
from glue_jobs.transform import WindowSpec, aggregate_cells

pytestmark = pytest.mark.spark

BASE_MS = 1_700_000_040_000
SCHEMA = "data binary, source string"


def events(n: int) -> list[bytes]:
    """``n`` valid events over a few entities, cells and two windows, and one invalid (lat out of range)."""
    out = [json.dumps({"event_id": f"e{i}", "entity_id": f"u{i % 5}", "ts": BASE_MS + i * 1500,
                       "lat": 48.85 + (i % 7) * 1e-3, "lon": 2.35 + (i % 3) * 1e-3}).encode() for i in range(n)]
    return [*out, json.dumps({"event_id": "bad", "entity_id": "u1", "ts": BASE_MS, "lat": 91.0,
                              "lon": 2.35}).encode()]


def aggregated(payloads: list[bytes], per_record: int) -> list[bytes]:
    """``payloads`` packed ``per_record`` to a KPL aggregated record (partition key: the first entity)."""
    out = []
    for start in range(0, len(payloads), per_record):
        agg = aggregator.RecordAggregator()
        for p in payloads[start:start + per_record]:
            assert agg.add_user_record(json.loads(p)["entity_id"], p) is None
        out.append(bytes(agg.clear_and_get().get_contents()[2]))
    return out


def counts(spark, records: list[bytes]) -> tuple[list[tuple], int, int]:
    """Window counts, valid and quarantined numbers of ``records`` read as binary Kinesis payloads."""
    raw = spark.createDataFrame([(r, f"ingest/shardId-0/{i}") for i, r in enumerate(records)], SCHEMA)
    classified = classify_events(deaggregate_records(raw)).persist()
    cells = aggregate_cells(valid_events(classified), WindowSpec(), 18).collect()
    return (sorted(tuple(r) for r in cells), valid_events(classified).count(),
            quarantine_records(classified).count())


def test_aggregated_records_count_like_the_same_events_one_per_record(spark) -> None:
    # GIVEN 120 events (and one invalid) sent one per record, and the same events KPL-aggregated 25 per record
    payloads = events(120)
    one_each = counts(spark, payloads)
    # WHEN both are de-aggregated, classified and counted
    packed = aggregated(payloads, 25)
    got = counts(spark, packed)
    # THEN the window counts, valid and quarantined numbers are equal
    assert len(packed) == 5
    assert got == one_each
    assert one_each[1:] == (120, 1) and sum(r[-1] for r in one_each[0]) == 120


def test_sub_records_are_named_by_parent_and_index_and_plain_records_are_unchanged(spark) -> None:
    # GIVEN one plain record and one aggregated record of three events (the last invalid)
    payloads = events(2)
    raw = spark.createDataFrame([(payloads[0], "s/p"), (aggregated(payloads, 3)[0], "s/agg")], SCHEMA)
    # WHEN de-aggregated
    rows = deaggregate_records(raw).collect()
    # THEN the plain record is one row with its source, each sub-record one row named by parent and index
    assert [(r["value"], r["source"], r[DECODE_REASON]) for r in rows] == [
        (payloads[0].decode(), "s/p", None),
        *[(p.decode(), sub_record_source("s/agg", i), None) for i, p in enumerate(payloads)]]
    # AND the invalid sub-record is quarantined under its own source
    bad = quarantine_records(classify_events(deaggregate_records(raw))).collect()
    assert [(r["code"], r["source"]) for r in bad] == [("lat_out_of_range", "s/agg/sub=2")]


def test_a_corrupt_aggregated_record_is_quarantined_whole_with_the_reason(spark) -> None:
    # GIVEN an aggregated record whose MD5 was damaged, next to a good one
    good = aggregated(events(3), 4)[0]
    corrupt = good[:-1] + bytes([good[-1] ^ 1])
    raw = spark.createDataFrame([(corrupt, "ingest/shardId-1/7"), (good, "ingest/shardId-1/8")], SCHEMA)
    # WHEN de-aggregated and classified
    classified = classify_events(deaggregate_records(raw))
    bad = quarantine_records(classified).collect()
    # THEN the good record's 3 events are valid (its 4th, invalid, quarantined) and the corrupt one is one
    # quarantine record: the corrupt_kpl_record code, a reason naming the MD5, its base64 as raw, its source
    assert valid_events(classified).count() == 3
    (rec,) = [r for r in bad if r["code"] == "corrupt_kpl_record"]
    assert rec["reason"].startswith("corrupt_kpl_record: ingest/shardId-1/7: KPL aggregated record's MD5")
    assert corrupt[-16:].hex() in rec["reason"]
    assert base64.b64decode(rec["raw"]) == corrupt and rec["source"] == "ingest/shardId-1/7"


def test_plain_records_keep_their_old_reasons(spark) -> None:
    # GIVEN plain payloads: not UTF-8, not JSON, and just the KPL magic (too short to be aggregated)
    raw = spark.createDataFrame([(b"\xff\xfe{", "a"), (b"NOT_JSON", "b"), (b"\xf3\x89\x9a\xc2", "c")], SCHEMA)
    # WHEN de-aggregated and classified
    bad = {r["source"]: r["code"] for r in quarantine_records(classify_events(deaggregate_records(raw))).collect()}
    # THEN each is quarantined as unparsable JSON under its own source, as before
    assert bad == {"a": "unparsable_json", "b": "unparsable_json", "c": "unparsable_json"}
