"""geokernel.contracts.event_fields: the event field mapping, its codecs, and the renames both ways."""

from __future__ import annotations

import json

import pytest

from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventField, EventFields
from geokernel.contracts.events import REQUIRED_FIELDS
from geokernel.contracts.timestamps import TsUnit
from partitioner.load.eventcols import EventColumns

RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")


def test_the_defaults_are_the_canonical_names_everywhere() -> None:
    # GIVEN the default mapping, the required fields and the recorded-log columns
    # THEN they all spell the canonical names of EventField (one home per name)
    assert DEFAULT_EVENT_FIELDS.names == tuple(f.value for f in EventField) == REQUIRED_FIELDS
    assert DEFAULT_EVENT_FIELDS.is_default and not RENAMED.is_default
    columns = EventColumns()
    assert (columns.lat, columns.lon, columns.time, columns.entity) == ("lat", "lon", "ts", "entity_id")


def test_json_round_trip_writes_only_the_renamed_fields() -> None:
    # GIVEN a partial mapping WHEN encoded and decoded
    fields = EventFields(lat="latitude", lon="longitude")
    text = fields.to_json()
    # THEN the text holds only the renamed fields, and decodes to the same mapping
    assert json.loads(text) == {"lat": "latitude", "lon": "longitude"}
    assert EventFields.from_json(text, "test") == fields
    assert DEFAULT_EVENT_FIELDS.to_json() == "{}"
    assert EventFields.from_json("  ", "test") is DEFAULT_EVENT_FIELDS
    assert RENAMED.name_of(EventField.TS) == "time" and RENAMED.name_of("lat") == "latitude"


@pytest.mark.parametrize(("text", "needle"), [
    ("latitude", "'latitude'"),
    ("[1]", "[1]"),
    ('{"latitude": "lat"}', "unknown event field 'latitude'"),
    ('{"lat": ""}', "''"),
    ('{"lat": 7}', "7"),
    ('{"lat": "lon"}', "'lon' is given to more than one field"),
    ('{"lat": "_corrupt_record"}', "'_corrupt_record'"),
    ('{"lat": "a\\nb"}', "'a\\nb'"),
])
def test_a_bad_mapping_is_an_error_naming_where_and_the_value(text: str, needle: str) -> None:
    # GIVEN a bad EVENT_FIELDS value WHEN decoded THEN one ContractError names where it came from and the bad value
    with pytest.raises(ContractError) as exc:
        EventFields.from_json(text, "environment variable EVENT_FIELDS")
    assert str(exc.value).startswith("environment variable EVENT_FIELDS: ")
    assert needle in str(exc.value)


def test_pairs_of_the_command_line() -> None:
    # GIVEN the local loop's flag form WHEN parsed THEN it is the same mapping as the JSON form
    assert EventFields.from_pairs(" lat=latitude, lon = longitude ", "--event-fields") == EventFields.from_json(
        '{"lat": "latitude", "lon": "longitude"}', "x")
    for bad in ("lat", "lat=a,lat=b", "=x", "lat=a,,lon=b", "height=h"):
        with pytest.raises(ContractError, match="--event-fields: "):
            EventFields.from_pairs(bad, "--event-fields")


def test_canonical_and_mapped_are_inverse_renames() -> None:
    # GIVEN an event under a producer's keys, with a field that happens to have a canonical name
    doc = {"id": "e1", "vehicle": "v", "time": 5, "latitude": 1.5, "longitude": 2.5, "lat": "shadowed", "x": [1]}
    # WHEN renamed to the canonical names
    canon = RENAMED.canonical(doc)
    # THEN the mapped keys win over the shadowed field, other fields pass, and mapping back restores the keys
    assert canon == {"event_id": "e1", "entity_id": "v", "ts": 5, "lat": 1.5, "lon": 2.5, "x": [1]}
    assert RENAMED.mapped(canon) == {k: v for k, v in doc.items() if k != "lat"}


def test_a_swap_of_two_names_renames_both() -> None:
    # GIVEN a producer that writes lat and lon swapped
    swapped = EventFields(lat="lon", lon="lat")
    # THEN each value lands under the other name, both ways
    assert swapped.canonical({"lat": 1, "lon": 2}) == {"lon": 1, "lat": 2}
    assert swapped.mapped({"lat": 1, "lon": 2}) == {"lon": 1, "lat": 2}


def test_ts_unit_travels_in_the_mapping_through_every_form() -> None:
    # GIVEN a mapping that renames the time and sets its unit
    fields = EventFields(ts="time", ts_unit=TsUnit.S)
    # WHEN written as EVENT_FIELDS JSON, and read back from JSON, a mapping and the local loop's pairs
    text = fields.to_json()
    # THEN the JSON holds the setting beside the renamed field (and only when it is not auto), every form agrees
    assert json.loads(text) == {"ts": "time", "ts_unit": "s"} and not fields.is_default
    assert EventFields.from_json(text, "x") == EventFields.from_mapping({"ts": "time", "ts_unit": "s"}, "x") == \
        EventFields.from_pairs("ts=time,ts_unit=s", "x") == fields
    assert EventFields(ts_unit="us").ts_unit is TsUnit.US and EventFields().ts_unit is TsUnit.AUTO
    assert EventFields(ts_unit=TsUnit.AUTO).to_json() == "{}" and EventFields(ts_unit="auto").is_default


@pytest.mark.parametrize("unit", ["seconds", "S", "", 5, None])
def test_a_bad_ts_unit_is_an_error_naming_where_the_setting_and_the_value(unit: object) -> None:
    # GIVEN an EVENT_FIELDS value whose ts_unit is not a unit WHEN decoded
    with pytest.raises(ContractError) as exc:
        EventFields.from_json(json.dumps({"ts_unit": unit}), "environment variable EVENT_FIELDS")
    # THEN the error names where, the setting, the value and the units
    assert str(exc.value) == (f"environment variable EVENT_FIELDS: event field mapping: ts_unit {unit!r} is not one "
                              "of auto, s, ms, us, iso")
