"""local.dataset: the places, the load scenario (day/night shift, hotspot ramp), the events and the bad events."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.events import Rejection, ValidEvent, parse_event
from local.dataset import HOTSPOT, SHIFT, EventFactory, Places, Scenario, bad_events, diurnal, load_places, place_rates

REASONS = {"unparsable_json", "not_an_object", "missing_field", "bad_type", "nan", "lat_out_of_range",
           "lon_out_of_range", "bad_timestamp"}


def _two_places() -> Places:
    return Places(names=("East", "West"), lat=np.array([10.0, 10.0]), lon=np.array([120.0, -60.0]),
                  population=np.array([1e6, 1e6]), source="test")


def test_day_night_moves_load_from_east_to_west() -> None:
    # GIVEN two equal places 180 degrees apart, at 04:00 UTC (noon in the east, midnight in the west)
    places = _two_places()
    scenario = Scenario(start_utc_hour=4.0, shift_s=12 * 3600, hotspot_place=0, hotspot_boost=0.0)
    # WHEN the replay passes the day/night shift (12 simulated hours)
    start, end = place_rates(places, scenario, 0.0), place_rates(places, scenario, SHIFT[1])
    # THEN the load moves from the east to the west, and holds still in the steady phases
    assert start[0] > 0.9 and end[1] > 0.9
    assert scenario.phase(0.05) == "steady" and scenario.sim_time(0.0) == scenario.sim_time(SHIFT[0])
    assert scenario.sim_time(SHIFT[1]) == scenario.sim_time(1.0)


def test_hotspot_ramps_instead_of_spiking() -> None:
    # GIVEN a scenario whose hotspot ramps during HOTSPOT (35 % to 85 % of the replay)
    places = _two_places()
    scenario = Scenario(start_utc_hour=4.0, shift_s=0.0, hotspot_place=1)
    mid = (HOTSPOT[0] + HOTSPOT[1]) / 2
    # WHEN the hotspot's share is read before, during and after the ramp
    shares = [place_rates(places, scenario, f)[1] for f in (HOTSPOT[0] - 0.01, mid, HOTSPOT[1] + 0.01)]
    # THEN it is flat before, partway during, and highest after
    assert shares[0] < shares[1] < shares[2]
    assert scenario.hotspot_level(mid) == pytest.approx(0.5)
    assert scenario.phase(mid) == "new hotspot" and scenario.phase(HOTSPOT[0]) == "day/night shift + new hotspot"


def test_diurnal_is_bounded_and_low_at_night() -> None:
    # GIVEN every quarter hour of a day WHEN the diurnal curve is evaluated THEN it stays in [0.08, 1]
    values = diurnal(np.arange(0, 24, 0.25))
    assert values.min() == pytest.approx(0.08) and values.max() == pytest.approx(1.0)
    assert diurnal(np.array([3.0]))[0] < diurnal(np.array([13.0]))[0]


def test_events_are_valid_and_unique() -> None:
    # GIVEN a factory over the built-in world places
    places = load_places("world", limit=50)
    factory = EventFactory(places, Scenario(4.0, 3600.0, hotspot_place=10), seed=3)
    # WHEN 500 events are drawn in two calls
    events = factory.events(250, 0.1, 1_700_000_000_000) + factory.events(250, 0.9, 1_700_000_001_000)
    # THEN every event has the contract fields, valid coordinates and a unique id
    assert len({e["event_id"] for e in events}) == 500
    for e in events:
        assert {"event_id", "entity_id", "ts", "lat", "lon"} <= e.keys()
        assert -85.05112878 <= float(e["lat"]) <= 85.05112878 and -180 <= float(e["lon"]) <= 180


def test_bad_events_cover_every_reason_code() -> None:
    # GIVEN the injected bad records WHEN their reasons are collected THEN every contract code is there
    bads = bad_events(seed=1, now_ms=0)
    assert {b.reason for b in bads} == REASONS
    # AND the NaN one really carries a NaN literal, and the missing-field one lacks lat
    assert "NaN" in next(b.raw for b in bads if b.reason == "nan")
    assert "lat" not in json.loads(next(b.raw for b in bads if b.reason == "missing_field"))


def test_csv_dataset_errors_name_the_line(tmp_path: Path) -> None:
    # GIVEN a places CSV with a latitude out of range on line 3
    path = tmp_path / "places.csv"
    path.write_text("name,lat,lon,population\nA,10,20,1000\nB,95,20,1000\n")
    # WHEN it is loaded THEN the error names the file, the line and the value
    with pytest.raises(ValueError, match=r"places.csv:3: lat 95.0"):
        load_places(str(path))


def test_unknown_dataset_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="'mars'"):
        load_places("mars")


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")


def test_the_producer_sends_under_the_mapped_names_and_the_rules_accept_them() -> None:
    # GIVEN a factory told to use a producer's own names
    places = load_places("world", limit=50)
    factory = EventFactory(places, Scenario(4.0, 3600.0, hotspot_place=10), seed=3, fields=RENAMED)
    # WHEN events are drawn
    events = factory.events(100, 0.5, 1_700_000_000_000)
    # THEN they carry the mapped keys only, and the router's rules with the mapping accept each
    assert all({"id", "vehicle", "time", "latitude", "longitude"} <= e.keys() and "lat" not in e for e in events)
    assert all(isinstance(parse_event(json.dumps(e).encode(), RENAMED), ValidEvent) for e in events)


def test_bad_events_under_mapped_names_get_their_reason_codes() -> None:
    # GIVEN the injected bad records under a producer's names
    bads = bad_events(seed=1, now_ms=1_700_000_000_000, fields=RENAMED)
    # WHEN checked with the mapping THEN each gets exactly the code it stands for
    got = [(b.reason, parse_event(b.raw.encode(), RENAMED)) for b in bads]
    assert all(isinstance(r, Rejection) and r.code == reason for reason, r in got), got
    assert {b.reason for b in bads} == REASONS
