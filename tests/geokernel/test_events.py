"""Location event rules and quarantine records (geokernel.events)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.events import REQUIRED_FIELDS
from geokernel.contracts.timestamps import TsUnit
from geokernel.events import Rejection, ValidEvent, parse_event, quarantine_record
from tests.events.ts_units import EXPECTS, NOW_MS, WINDOW_S, Expect, window_start_ms

GOOD = {"event_id": "e1", "entity_id": "truck-1", "ts": 1795255500000, "lat": 52.52, "lon": 13.405, "extra": [1]}


def raw(**changes: object) -> bytes:
    doc = {**GOOD, **changes}
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


def test_valid_event_keeps_its_bytes() -> None:
    # GIVEN a valid event with an extra field / WHEN parsed / THEN routing fields are read and bytes kept
    ev = parse_event(raw())
    assert isinstance(ev, ValidEvent)
    assert (ev.event_id, ev.entity_id, ev.lat, ev.lon) == ("e1", "truck-1", 52.52, 13.405)
    assert ev.raw == raw()


@pytest.mark.parametrize("ts", ["2026-11-21T10:05:01Z", "2026-11-21T10:05:01.5+01:00", 1795255500, 1795255500000.5])
def test_timestamp_forms(ts: object) -> None:
    # GIVEN an epoch-ms, epoch-s or ISO-8601 ts / WHEN parsed / THEN accepted
    assert isinstance(parse_event(raw(ts=ts)), ValidEvent)


@pytest.mark.parametrize(("data", "code", "needle"), [
    (b"{oops", "unparsable_json", ""),
    (b"\xff\xfe", "unparsable_json", ""),
    (b"[1, 2]", "not_an_object", "list"),
    (raw(lat=...), "missing_field", "lat"),
    (raw(entity_id=None), "missing_field", "entity_id"),
    (raw(event_id=[7]), "bad_type", "[7]"),
    (raw(entity_id="x" * 300), "bad_type", "256"),
    (raw(lon="13.4"), "bad_type", "'13.4'"),
    (raw(lat=True), "bad_type", "True"),
    (b'{"event_id": "e", "entity_id": "x", "ts": 1, "lat": NaN, "lon": 1}', "nan", "nan"),
    (raw(lat=85.06), "lat_out_of_range", "85.06"),
    (raw(lon=-180.5), "lon_out_of_range", "-180.5"),
    (raw(ts="yesterday"), "bad_timestamp", "'yesterday'"),
    (raw(ts=-5), "bad_timestamp", "-5"),
    (raw(ts=False), "bad_timestamp", "False"),
])
def test_invalid_events_get_a_reason_naming_the_value(data: bytes, code: str, needle: str) -> None:
    # GIVEN a bad record / WHEN parsed / THEN rejected with the contract's code and the bad value
    rj = parse_event(data)
    assert isinstance(rj, Rejection) and rj.code == code
    assert needle in rj.reason


def test_quarantine_record_has_the_contract_fields() -> None:
    # GIVEN a rejection / WHEN turned into a quarantine record / THEN it has exactly the contract's fields
    rec = quarantine_record(Rejection("nan: lat", b"{...}"), "arn/shard/1", "2026-11-21T10:00:00Z")
    assert rec == {"reason": "nan: lat", "raw": "{...}", "source": "arn/shard/1",
                   "quarantined_at": "2026-11-21T10:00:00Z"}


TABLE = json.loads((Path(__file__).resolve().parents[1] / "events" / "event_rules.json").read_text())["cases"]


@pytest.mark.parametrize("case", TABLE, ids=[c["case"] for c in TABLE])
def test_the_shared_event_table(case: dict[str, str | None]) -> None:
    # GIVEN a case of the one event table the Spark job is also tested against (tests/events/event_rules.json)
    # WHEN the router's and worker's rules parse it
    got = parse_event(str(case["raw"]).encode())
    # THEN it is valid, or rejected with the table's code and a reason naming the bad value
    if case["code"] is None:
        assert isinstance(got, ValidEvent), got
    else:
        assert isinstance(got, Rejection) and got.code == case["code"], got
        assert str(case["names"]).lower() in got.reason.lower(), got.reason


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")
CANONICAL = dict(zip(REQUIRED_FIELDS, RENAMED.names, strict=True))


def renamed_case(case: dict[str, str | None]) -> tuple[bytes, str]:
    """A table case with the event's keys (and a needle naming a field) under RENAMED's names."""
    text, needle = str(case["raw"]), str(case["names"])
    try:
        doc = json.loads(text)
    except ValueError:
        return text.encode(), needle
    if isinstance(doc, dict):
        text = json.dumps(RENAMED.mapped(doc))
    return text.encode(), CANONICAL.get(needle, needle)


@pytest.mark.parametrize("case", TABLE, ids=[c["case"] for c in TABLE])
def test_the_shared_event_table_under_a_producers_own_names(case: dict[str, str | None]) -> None:
    # GIVEN a case of the shared table with every field renamed (id, vehicle, time, latitude, longitude)
    data, needle = renamed_case(case)
    # WHEN parsed with that mapping
    got = parse_event(data, RENAMED)
    # THEN the outcome is the table's, and a reason names the producer's field
    if case["code"] is None:
        assert isinstance(got, ValidEvent), got
    else:
        assert isinstance(got, Rejection) and got.code == case["code"], got
        assert needle.lower() in got.reason.lower(), got.reason


def test_a_mapped_event_comes_out_under_the_canonical_names() -> None:
    # GIVEN an event under a producer's names, with its bytes
    data = json.dumps(RENAMED.mapped(GOOD)).encode()
    # WHEN parsed with the mapping
    ev = parse_event(data, RENAMED)
    # THEN the routing fields are read, the fields carry the canonical names, and the bytes are kept as sent
    assert isinstance(ev, ValidEvent)
    assert (ev.event_id, ev.entity_id, ev.lat, ev.lon) == ("e1", "truck-1", 52.52, 13.405)
    assert ev.fields == {**GOOD, "ts_ms": GOOD["ts"]} and ev.raw == data
    # AND with the default mapping the same bytes miss every field, named in the reason
    rj = parse_event(data)
    assert isinstance(rj, Rejection) and rj.reason.startswith("missing_field: event_id, entity_id, ts, lat, lon")


@pytest.mark.parametrize(("changes", "code", "needle"), [
    ({"latitude": ...}, "missing_field", "latitude"),
    ({"latitude": "north"}, "bad_type", "latitude must be a number"),
    ({"vehicle": {"a": 1}}, "bad_type", "vehicle must be a string"),
    ({"latitude": 91.0}, "lat_out_of_range", "latitude 91.0"),
    ({"longitude": 200}, "lon_out_of_range", "longitude 200"),
    ({"time": "noon"}, "bad_timestamp", "time 'noon'"),
])
def test_a_reason_names_the_producers_field(changes: dict[str, object], code: str, needle: str) -> None:
    # GIVEN a bad event under the producer's names
    doc = {**RENAMED.mapped(GOOD), **changes}
    data = json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()
    # WHEN parsed with the mapping THEN the code is the contract's and the reason names the producer's key
    rj = parse_event(data, RENAMED)
    assert isinstance(rj, Rejection) and rj.code == code and needle in rj.reason, rj


@pytest.mark.parametrize("expect", EXPECTS, ids=[e.id for e in EXPECTS])
def test_the_shared_time_unit_table(expect: Expect) -> None:
    # GIVEN a case of the one table of event times every reader is tested against (tests/events/ts_units.json)
    data = json.dumps(expect.event()).encode()
    # WHEN the router's and worker's rules parse it under the case's ts_unit, their clock at the table's now
    got = parse_event(data, EventFields(ts_unit=expect.unit), now=NOW_MS)
    # THEN it is valid with the table's event time (ts passes through as sent), or quarantined with its reason
    ms = got.ts_ms if isinstance(got, ValidEvent) else None
    assert expect.verdict(ms, got.reason if isinstance(got, Rejection) else None) is None, \
        expect.verdict(ms, got.reason if isinstance(got, Rejection) else None)
    if isinstance(got, ValidEvent):
        assert got.fields["ts_ms"] == ms and got.fields["ts"] == expect.ts


def test_the_time_unit_tables_windows_start_at_the_floor_of_the_time() -> None:
    # GIVEN every valid outcome of the shared time table WHEN its window start is compared with its event time
    # THEN each is floor(ms / window) * window, the window every reader (Spark, counts) puts the event in
    w = WINDOW_S * 1000
    assert [(e.id, e.ms // w * w) for e in EXPECTS if e.ms is not None] == \
        [(e.id, window_start_ms(str(e.window))) for e in EXPECTS if e.ms is not None]


def test_epoch_seconds_are_no_longer_read_as_1970_milliseconds() -> None:
    # GIVEN an event stamped in epoch seconds (issue #56: it used to pass as milliseconds in January 1970)
    data = raw(ts=1733574000)
    # WHEN parsed with ts_unit ms, and with the default (auto)
    fixed, auto = parse_event(data, EventFields(ts_unit=TsUnit.MS)), parse_event(data)
    # THEN under ms it is quarantined naming the value, its 1970 reading and the setting to change
    assert isinstance(fixed, Rejection) and fixed.reason == (
        "bad_timestamp: ts 1733574000 read as ms is 1970-01-21T01:32:54Z, outside the plausible window "
        "[2000-01-01, now + 1 day]; set ts_unit (event field mapping) to 's' or 'auto'")
    # AND auto reads it as seconds
    assert isinstance(auto, ValidEvent) and auto.ts_ms == 1733574000000


def test_a_reason_names_the_producers_time_key_and_the_mapping_setting() -> None:
    # GIVEN a producer whose time is "time", in milliseconds, mapped with ts_unit s by mistake
    fields = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude",
                         ts_unit=TsUnit.S)
    data = json.dumps({**RENAMED.mapped(GOOD), "time": 1733574000123}).encode()
    # WHEN parsed THEN the reason names the producer's key and suggests the unit its magnitude gives
    rj = parse_event(data, fields)
    assert isinstance(rj, Rejection) and rj.reason.startswith("bad_timestamp: time 1733574000123 read as s is after")
    assert rj.reason.endswith("set ts_unit (event field mapping) to 'ms' or 'auto'")


@pytest.mark.parametrize(("ts", "valid"), [
    (946_684_800_000, True), (946_684_799_999, False),  # 2000-01-01T00:00:00.000Z is the first plausible instant
    (NOW_MS + 86_400_000, True), (NOW_MS + 86_400_001, False),  # the last is a day after the reader's now
    (946_684_799_999.5, True),  # the nearest millisecond (halves up) is what must be plausible
])
def test_the_plausible_window_is_inclusive_at_both_ends(ts: float, valid: bool) -> None:
    # GIVEN a time in ms at an edge of the window WHEN parsed with the clock at NOW_MS THEN in or out as stated
    assert isinstance(parse_event(raw(ts=ts), now=NOW_MS), ValidEvent) is valid
