"""The reference stateful transform: ENTER / EXIT / DWELL per zone, speed and heading, and the time rules."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geo_service.entity.store import EntityStates
from geo_service.pipeline.transform import StatefulTransform, TransformError, haversine_km, load_transform, stateful_of
from transforms.geofence_state import GeofenceState, bearing_deg, event_ms

ZONES = "id,name,lat,lon,radius_km\nA,Zone A,10.0,10.0,2.0\nB,Zone B,10.0,10.02,2.0\n"
INSIDE_A = (10.0, 9.99)  # in A only (B's centre is 3.3 km east)
INSIDE_AB = (10.0, 10.008)  # in both, nearer A
OUTSIDE = (10.2, 10.0)


@pytest.fixture
def zones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "zones.csv"
    path.write_text(ZONES)
    monkeypatch.setenv("GEOFENCES_CSV", str(path))
    monkeypatch.setenv("GEOFENCE_DWELL_S", "60")
    return path


def _t() -> GeofenceState:
    t = GeofenceState()
    t.load_region([""], 1)
    return t


def _ev(ts: Any, point: tuple[float, float], entity: str = "car-1") -> dict[str, Any]:
    return {"event_id": f"e{ts}", "entity_id": entity, "ts": ts, "lat": point[0], "lon": point[1]}


def _run(t: GeofenceState, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    store = EntityStates("transforms.geofence_state:GeofenceState")
    apply = store.applier(t)
    return [apply(e) for e in events]


def test_the_worker_loader_builds_it_as_a_stateful_transform(zones: Path) -> None:
    # GIVEN the GEO_TRANSFORM value of the reference stateful transform
    t = load_transform("transforms.geofence_state:GeofenceState")
    # THEN it is stateful and its stateless apply is the answer for an entity's first event
    assert isinstance(t, StatefulTransform) and stateful_of(t) is t
    t.load_region([""], 1)
    assert t.apply(_ev(0, INSIDE_A)) == {"zones": ["A"], "transitions": [{"zone": "A", "kind": "ENTER"}],
                                         "speed_mps": None, "heading_deg": None, "late": False}


def test_enter_dwell_once_exit_across_a_stay(zones: Path) -> None:
    # GIVEN an entity that enters A, stays 90 s (dwell is 60 s), moves into A and B, then leaves both
    t = _t()
    out = _run(t, [_ev(0, INSIDE_A), _ev(30_000, INSIDE_A), _ev(60_000, INSIDE_A), _ev(90_000, INSIDE_AB),
                   _ev(100_000, OUTSIDE)])
    # THEN: ENTER A; nothing; DWELL A at 60 s; ENTER B (no second DWELL of A); EXIT A and B
    kinds = [[(x["zone"], x["kind"]) for x in o["transitions"]] for o in out]
    assert kinds == [[("A", "ENTER")], [], [("A", "DWELL")], [("B", "ENTER")], [("A", "EXIT"), ("B", "EXIT")]]
    assert out[3]["zones"] == ["A", "B"] and out[4]["zones"] == []


def test_duplicate_and_out_of_order_events_leave_the_state_unchanged(zones: Path) -> None:
    # GIVEN an entity inside A at t=10 s
    t = _t()
    first = t.apply_stateful(_ev(10_000, INSIDE_A), None)
    # WHEN the same ts comes again (a duplicate) and then an earlier one, outside
    dup = t.apply_stateful(_ev(10_000, INSIDE_A), first.state)
    late = t.apply_stateful(_ev(5_000, OUTSIDE), first.state)
    # THEN both get no transitions, no speed, the state passed in, unchanged, and the late flag (issue #58)
    for got in (dup, late):
        assert got.state == first.state and got.fields["transitions"] == [] and got.fields["speed_mps"] is None
        assert got.fields["late"] is True
    assert late.fields["zones"] == [] and dup.fields["zones"] == ["A"]
    # AND an event in order is not late
    assert first.fields["late"] is False
    assert t.apply_stateful(_ev(10_001, OUTSIDE), first.state).fields["late"] is False


def test_iso_and_digit_string_times_are_read_and_a_bad_one_named() -> None:
    # GIVEN contract timestamps in each form
    # THEN they are epoch milliseconds; a naive ISO time is UTC
    assert event_ms("2026-01-01T00:00:01Z") == event_ms("2026-01-01T00:00:01") == 1_767_225_601_000.0
    assert event_ms("1500") == 1500.0 and event_ms(2.5) == 2.5
    with pytest.raises(TransformError, match="'yesterday'"):
        event_ms("yesterday")


def test_a_bad_dwell_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a negative dwell time
    monkeypatch.setenv("GEOFENCE_DWELL_S", "-5")
    # THEN building the transform fails naming the value
    with pytest.raises(TransformError, match="GEOFENCE_DWELL_S must be a number of seconds >= 0, got '-5'"):
        GeofenceState()


def test_zones_ship_small_enough_for_the_default_buffer_ring() -> None:
    # GIVEN every shipped zone file
    import csv
    data = Path(__file__).resolve().parents[2] / "transforms" / "data"
    names = sorted(p.name for p in data.glob("*.csv"))
    assert {"geofences.csv", "city_zones.csv", "ais_zones.csv"} <= set(names)
    for name in names:
        rows = list(csv.DictReader((data / name).open(encoding="utf-8")))
        for r in rows:
            # THEN each zone's radius is within one zoom-12 cell at its latitude (BUFFER_RING 1 covers it)
            cell_km = 40075.0 * math.cos(math.radians(float(r["lat"]))) / 2 ** 12
            assert float(r["radius_km"]) <= cell_km, (name, r["id"])


points = st.sampled_from([INSIDE_A, INSIDE_AB, OUTSIDE, (10.0, 10.03)])


@pytest.fixture(scope="module")
def two_zones(tmp_path_factory: pytest.TempPathFactory) -> GeofenceState:
    path = tmp_path_factory.mktemp("zones") / "zones.csv"
    path.write_text(ZONES)
    t = GeofenceState()
    t.fences.path = path
    t.load_region([""], 1)
    return t


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 500_000), points), min_size=1, max_size=25))
def test_enter_and_exit_alternate_per_zone_and_match_membership(two_zones: GeofenceState,
                                                               steps: list[tuple[int, tuple[float, float]]]) -> None:
    # GIVEN any walk of one entity over two zones with increasing (or repeated) times
    events, ts = [], 0
    for dt, p in steps:
        ts += dt
        events.append(_ev(ts, p))
    # WHEN the transform runs over it
    out = _run(two_zones, events)
    # THEN per zone, ENTER and EXIT alternate starting with ENTER, and "inside" after each event equals its zones
    inside: dict[str, bool] = {}
    dwelt: list[str] = []
    for ev, o in zip(events, out, strict=True):
        for x in o["transitions"]:
            if x["kind"] == "ENTER":
                assert not inside.get(x["zone"], False)
                inside[x["zone"]] = True
            elif x["kind"] == "EXIT":
                assert inside.get(x["zone"], False)
                inside[x["zone"]] = False
            else:  # DWELL: only while inside, at most once per stay
                assert inside[x["zone"]] and x["zone"] not in dwelt
                dwelt.append(x["zone"])
        dwelt = [z for z in dwelt if inside.get(z)]
        if o["transitions"] or o["speed_mps"] is not None or ev is events[0]:
            assert sorted(z for z, v in inside.items() if v) == sorted(o["zones"])


@settings(max_examples=80, deadline=None)
@given(st.floats(-80, 80), st.floats(-179, 179), st.floats(-0.5, 0.5), st.floats(-0.5, 0.5),
       st.integers(1, 3_600_000))
def test_speed_is_haversine_over_time_and_heading_the_bearing(lat: float, lon: float, dlat: float, dlon: float,
                                                              dt_ms: int) -> None:
    # GIVEN two points of one entity dt_ms apart (no zones loaded: an empty region)
    t = GeofenceState()
    t.load_region(["0"], 0)
    a = (round(lat, 6), round(lon, 6))
    b = (round(min(85.0, max(-85.0, lat + dlat)), 6), round(lon + dlon, 6))
    # WHEN both are applied in order
    out = _run(t, [_ev(1_000, a), _ev(1_000 + dt_ms, b)])
    # THEN the second's speed is the haversine distance over the time, the first's None
    want = 1000.0 * haversine_km(*a, *b) / (dt_ms / 1000.0)
    assert out[0]["speed_mps"] is None and out[1]["speed_mps"] == pytest.approx(want, abs=0.0006, rel=1e-9)
    # AND the heading is the initial bearing in [0, 360) (None when it did not move)
    if a == b:
        assert out[1]["heading_deg"] is None
    else:
        assert 0.0 <= out[1]["heading_deg"] < 360.0
        diff = abs(out[1]["heading_deg"] - bearing_deg(*a, *b)) % 360.0
        assert min(diff, 360.0 - diff) <= 0.05 + 1e-9
