"""Tests for aggregation.events: validation and quarantine, against the reason codes and the shared event table."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from aggregation.events import classify_events, quarantine_records, valid_events
from partitioner.contracts.events import REASON_CODES, ReasonCode

pytestmark = pytest.mark.spark

GOOD = {"event_id": "e1", "entity_id": "u1", "ts": 1700000000000, "lat": 52.5, "lon": 13.4, "extra": {"k": 1}}


def _with(**changes: object) -> str:
    doc = dict(GOOD)
    for k, v in changes.items():
        if v is _DROP:
            doc.pop(k)
        else:
            doc[k] = v
    return json.dumps(doc)


_DROP = object()

CASES = [
    ("not json {", "unparsable_json", "not json {"),
    ("", "unparsable_json", "empty"),
    ("[1, 2]", "not_an_object", "array"),
    ("42", "not_an_object", "42"),
    (_with(entity_id=_DROP), "missing_field", "entity_id"),
    (_with(ts=None), "missing_field", "ts"),
    (_with(event_id=""), "missing_field", "event_id"),
    (_with(lat="52.5"), "bad_type", "'52.5'"),
    (_with(lon=True), "bad_type", "lon"),
    (_with(event_id={"a": 1}), "bad_type", "event_id"),
    ('{"event_id": "e", "entity_id": "u", "ts": 1, "lat": NaN, "lon": 1}', "nan", "lat"),
    (_with(lat=85.06), "lat_out_of_range", "85.06"),
    (_with(lat=-90), "lat_out_of_range", "-90"),
    (_with(lon=180.5), "lon_out_of_range", "180.5"),
    (_with(ts="yesterday"), "bad_timestamp", "'yesterday'"),
    (_with(ts=-1), "bad_timestamp", "'-1'"),
    (_with(ts="2024-13-45T00:00:00Z"), "bad_timestamp", "2024-13-45"),
]


def test_every_bad_record_is_quarantined_with_its_reason_and_raw_text(spark) -> None:
    # GIVEN one bad record per reason code plus a null record, each with its source
    raws = [c[0] for c in CASES] + [None]
    df = spark.createDataFrame([(r, f"f.jsonl:{i + 1}") for i, r in enumerate(raws)], "value string, source string")
    # WHEN they are classified
    classified = classify_events(df)
    bad = {r["source"]: r for r in quarantine_records(classified).collect()}
    # THEN none is valid, each has the expected code, a detail naming the bad value, the raw text and source
    assert valid_events(classified).count() == 0
    assert len(bad) == len(raws)
    for i, (raw, code, detail) in enumerate(CASES):
        rec = bad[f"f.jsonl:{i + 1}"]
        assert rec["code"] == code, (raw, rec["reason"])
        assert rec["reason"].startswith(code + ": ")
        assert detail in rec["reason"], (raw, rec["reason"])
        assert rec["raw"] == raw
        assert rec["quarantined_at"].endswith("Z")
    assert bad[f"f.jsonl:{len(raws)}"]["code"] == "unparsable_json"
    # (corrupt_kpl_record is given to a whole Kinesis record before any event is read: test_events_deaggregate)
    assert {c[1] for c in CASES} == set(REASON_CODES) - {ReasonCode.CORRUPT_KPL_RECORD}


def test_valid_events_are_typed_and_timestamps_parse_in_every_accepted_form(spark) -> None:
    # GIVEN valid events with ts as epoch ms number, digit string, ISO Z, ISO offset, fractional seconds,
    # a numeric id (accepted as its text) and a latitude between MAX_LAT and the contract's limit
    raws = [_with(ts=1700000000123), _with(ts="1700000000123"), _with(ts="2023-11-14T22:13:20.123Z"),
            _with(ts="2023-11-14T23:13:20.123+01:00"), _with(event_id=7), _with(lat=85.05112878, lon=-180)]
    df = spark.createDataFrame([(r, f"s{i}") for i, r in enumerate(raws)], "value string, source string")
    # WHEN classified
    rows = {r["source"]: r for r in valid_events(classify_events(df)).collect()}
    # THEN all are valid and every ts form gives the same instant
    assert len(rows) == len(raws)
    want = datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    for i in range(4):
        assert rows[f"s{i}"]["ts"].replace(tzinfo=UTC) == want or rows[f"s{i}"]["ts"].astimezone(UTC) == want
    assert rows["s4"]["event_id"] == "7"
    assert rows["s5"]["lat"] == 85.05112878 and rows["s5"]["lon"] == -180.0


TABLE = json.loads((Path(__file__).resolve().parents[1] / "events" / "event_rules.json").read_text())["cases"]


def test_the_shared_event_table(spark) -> None:
    # GIVEN every case of the one event table the router and worker rules are also tested against
    df = spark.createDataFrame([(c["raw"], c["case"]) for c in TABLE], "value string, source string")
    # WHEN the Spark job classifies them
    classified = classify_events(df)
    valid = {r["source"] for r in valid_events(classified).collect()}
    bad = {r["source"]: r for r in quarantine_records(classified).collect()}
    # THEN each is valid, or quarantined with the table's code and a reason naming the bad value
    wrong = []
    for c in TABLE:
        if c["code"] is None:
            if c["case"] not in valid:
                wrong.append((c["case"], "should be valid", bad.get(c["case"], {}).get("reason")))
        elif c["case"] not in bad or bad[c["case"]]["code"] != c["code"] or \
                str(c["names"]).lower() not in bad[c["case"]]["reason"].lower():
            wrong.append((c["case"], c["code"], bad[c["case"]]["reason"] if c["case"] in bad else "valid"))
    assert not wrong, wrong
