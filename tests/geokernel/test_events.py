"""Location event rules and quarantine records (geokernel.events)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.events import REQUIRED_FIELDS
from geokernel.events import Rejection, ValidEvent, event_time_ms, parse_event, quarantine_record

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


@pytest.mark.parametrize("ts", ["2026-11-21T10:05:01Z", "2026-11-21T10:05:01.5+01:00", 0, 1795255500000.5])
def test_timestamp_forms(ts: object) -> None:
    # GIVEN an epoch-ms or ISO-8601 ts / WHEN parsed / THEN accepted
    assert isinstance(parse_event(raw(ts=ts)), ValidEvent)


@pytest.mark.parametrize(("ts", "ms"), [
    ("2026-11-21T10:05:01Z", 1_795_255_501_000), ("2026-11-21T10:05:01.5+01:00", 1_795_251_901_500),
    ("2026-11-21T10:05:01.0005", 1_795_255_501_001), (0, 0), (1795255500000.5, 1_795_255_500_001),
    (" 1795255500000 ", 1_795_255_500_000),
])
def test_the_time_of_a_valid_event_in_epoch_milliseconds(ts: object, ms: int) -> None:
    # GIVEN a ts parse_event accepts (ISO-8601 without an offset is UTC)
    assert isinstance(parse_event(raw(ts=ts)), ValidEvent)
    # WHEN its time is read THEN it is the epoch milliseconds, rounded to the nearest
    assert event_time_ms(ts) == ms


def test_a_time_the_rule_does_not_read_is_named() -> None:
    # GIVEN a ts no valid event has WHEN its time is read THEN the error names it
    with pytest.raises(ValueError, match="'yesterday'"):
        event_time_ms("yesterday")


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
    assert ev.fields == GOOD and ev.raw == data
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
