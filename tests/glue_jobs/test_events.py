"""Tests for glue_jobs.events: validation and quarantine, against the reason codes and the shared event table."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.events import REASON_CODES, REQUIRED_FIELDS, ReasonCode
from geokernel.contracts.timestamps import TsUnit
from glue_jobs.events import classify_events, quarantine_records, valid_events
from glue_jobs.transform import WindowSpec, aggregate_windows
from tests.events.ts_units import EXPECTS, NOW_MS, WINDOW_S, window_start_ms

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


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")
CANONICAL = dict(zip(REQUIRED_FIELDS, RENAMED.names, strict=True))


def _renamed(case: dict) -> tuple[str, str]:
    """A table case's record and needle with every field under RENAMED's names (unparsable text as is)."""
    try:
        doc = json.loads(case["raw"])
    except ValueError:
        return case["raw"], str(case["names"])
    text = json.dumps(RENAMED.mapped(doc)) if isinstance(doc, dict) else case["raw"]
    return text, CANONICAL.get(str(case["names"]), str(case["names"]))


def test_the_shared_event_table_under_a_producers_own_names(spark) -> None:
    # GIVEN every case of the shared table with the fields renamed (id, vehicle, time, latitude, longitude)
    cases = {c["case"]: (c, *_renamed(c)) for c in TABLE}
    df = spark.createDataFrame([(text, name) for name, (_c, text, _n) in cases.items()], "value string, source string")
    # WHEN the Spark job classifies them with that mapping
    classified = classify_events(df, fields=RENAMED)
    valid = {r["source"]: r for r in valid_events(classified).collect()}
    bad = {r["source"]: r for r in quarantine_records(classified).collect()}
    # THEN each has the table's outcome, a reason names the producer's field, and valid rows have canonical columns
    wrong = [(name, c["code"], bad.get(name, {}).get("reason")) for name, (c, _t, needle) in cases.items()
             if (c["code"] is None) != (name in valid)
             or (c["code"] is not None and (bad[name]["code"] != c["code"] or needle.lower() not in
                                            bad[name]["reason"].lower()))]
    assert not wrong, wrong
    plain = valid["a plain valid event with an extra field"]
    assert (plain["event_id"], plain["entity_id"], plain["lat"], plain["lon"]) == ("e1", "u1", 52.5, 13.4)
    assert list(valid_events(classified).columns) == ["event_id", "entity_id", "ts", "lat", "lon", "source"]


def test_odd_field_names_are_read_as_names(spark) -> None:
    # GIVEN a producer whose keys hold a dot, a space, a backtick and a percent sign
    odd = EventFields(event_id="meta.id", entity_id="who am i", ts="`t`", lat="lat%", lon="lon")
    good = {"meta.id": "e1", "who am i": "u1", "`t`": 1700000000000, "lat%": 52.5, "lon": 13.4}
    df = spark.createDataFrame([(json.dumps(good), "g"), (json.dumps({**good, "lat%": 95}), "b")],
                               "value string, source string")
    # WHEN classified THEN the good one is valid and the bad one's reason names the key as it is
    rows = {r["source"]: r for r in classify_events(df, fields=odd).collect()}
    assert rows["g"]["reason"] is None and rows["g"]["lat"] == 52.5
    assert rows["b"]["reason"].startswith("lat_out_of_range: lat%=95 is outside")


def test_the_shared_time_unit_table(spark) -> None:
    # GIVEN every case of the one table of event times (tests/events/ts_units.json), under each ts_unit
    classified = None
    for unit in TsUnit:
        mine = [(json.dumps(e.event(i)), e.id) for i, e in enumerate(EXPECTS) if e.unit is unit]
        df = spark.createDataFrame(mine, "value string, source string")
        # WHEN the Spark job classifies them with that unit, its clock at the table's now
        part = classify_events(df, fields=EventFields(ts_unit=unit), now_ms=NOW_MS)
        classified = part if classified is None else classified.unionByName(part)
    assert classified is not None
    classified = classified.cache()
    rows = classified.select("source", F.unix_millis("ts").alias("ms"), "reason").collect()
    ms = {r["source"]: r["ms"] for r in rows if r["reason"] is None}
    bad = {r["source"]: r["reason"] for r in rows if r["reason"] is not None}
    # AND puts the valid ones in the job's windows (each case on its own "quadkey": its id)
    counts = aggregate_windows(valid_events(classified), WindowSpec(f"{WINDOW_S} seconds"), "ts", "source")
    windows = {r["quadkey"]: r["start"] for r in counts.select("quadkey", F.unix_millis("window_start")
                                                                 .alias("start")).collect()}
    classified.unpersist()
    # THEN each case has the table's outcome: its event time in ms and its window, or its reason
    wrong = [(e.id, e.verdict(ms.get(e.id), bad.get(e.id))) for e in EXPECTS if e.verdict(ms.get(e.id), bad.get(e.id))]
    wrong += [(e.id, f"window {windows.get(e.id)} != {e.window}") for e in EXPECTS
              if e.window is not None and windows.get(e.id) != window_start_ms(e.window)]
    assert not wrong, wrong


def test_epoch_seconds_are_no_longer_counted_in_january_1970(spark) -> None:
    # GIVEN an event stamped in epoch seconds (issue #56: it used to be counted as milliseconds, in 1970)
    df = spark.createDataFrame([(_with(ts=1733574000), "s")], "value string, source string")
    # WHEN classified with the default (auto) and with ts_unit ms
    auto = classify_events(df).select(F.unix_millis("ts").alias("ms"), "reason").first()
    fixed = classify_events(df, fields=EventFields(ts_unit=TsUnit.MS)).first()
    # THEN auto reads seconds, and ms quarantines it naming the setting to change
    assert auto is not None and fixed is not None and (auto["ms"], auto["reason"]) == (1733574000000, None)
    assert fixed["reason"] == ("bad_timestamp: ts '1733574000' read as ms is 1970-01-21T01:32:54Z, outside the "
                               "plausible window [2000-01-01, now + 1 day]; set ts_unit (event field mapping) to 's' "
                               "or 'auto'")
