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
    monkeypatch.delenv("GEOFENCE_TIME_FIELD", raising=False)
    return path


def _t() -> GeofenceState:
    t = GeofenceState()
    t.load_region([""], 1)
    return t


T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the times below are ms after it


def _ev(ts: Any, point: tuple[float, float], entity: str = "car-1") -> dict[str, Any]:
    return {"event_id": f"e{ts}", "entity_id": entity, "ts": T0 + ts, "lat": point[0], "lon": point[1]}


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


def test_the_event_time_is_the_workers_ts_ms_else_ts_by_the_time_unit_rule() -> None:
    # GIVEN events with the worker's ts_ms, and hand-made ones with only ts in each contract form
    # THEN ts_ms wins (ts may be seconds, as sent); ts alone is read as the worker reads it with ts_unit auto
    assert event_ms({"ts": 1767225601, "ts_ms": 1767225601000}) == 1_767_225_601_000.0
    assert event_ms({"ts": "2026-01-01T00:00:01Z"}) == event_ms({"ts": "2026-01-01T00:00:01"}) == 1_767_225_601_000.0
    assert event_ms({"ts": "1767225601"}) == event_ms({"ts": 1767225601000}) == 1_767_225_601_000.0
    with pytest.raises(TransformError, match="'yesterday'"):
        event_ms({"ts": "yesterday"})
    with pytest.raises(TransformError, match=r"ts 1500 read as s \(ts_unit 'auto'\) is 1970-01-01T00:25:00Z"):
        event_ms({"ts": 1500})


def test_speed_uses_the_event_time_in_ms_when_events_are_stamped_in_seconds(zones: Path) -> None:
    # GIVEN two events of one entity 10 s apart, stamped in epoch seconds, with the worker's ts_ms
    t = _t()
    a = {"entity_id": "c", "ts": 1767225600, "ts_ms": 1767225600000, "lat": 10.2, "lon": 10.0}
    b = {**a, "ts": 1767225610, "ts_ms": 1767225610000, "lat": 10.201}
    # WHEN applied in order
    out = _run(t, [a, b])
    # THEN the speed is metres over 10 s (not over 10 ms, as reading seconds as milliseconds gave)
    assert out[1]["speed_mps"] == pytest.approx(1000.0 * haversine_km(10.2, 10.0, 10.201, 10.0) / 10.0, abs=1e-3)


def test_time_comes_from_the_field_geofence_time_field_names(zones: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN events replayed at 100x: ts is the replay clock, recorded_utc the recorded time (1 km in 100 s: 10 m/s),
    # and an entity that stays in A for 100 recorded s (dwell 60 s) but 1 replayed s
    east = (INSIDE_A[0], INSIDE_A[1] + math.degrees(1.0 / (6371.0088 * math.cos(math.radians(INSIDE_A[0])))))
    events = [{**_ev(0, INSIDE_A), "recorded_utc": "2020-06-30T00:00:00.000Z"},
              {**_ev(1_000, east), "recorded_utc": "2020-06-30T00:01:40.000Z"}]
    # WHEN they run with ts, then with GEOFENCE_TIME_FIELD=recorded_utc
    by_ts = _run(_t(), events)
    monkeypatch.setenv("GEOFENCE_TIME_FIELD", "recorded_utc")
    t = _t()
    recorded = _run(t, events)
    # THEN ts gives 100x the speed and no dwell; the recorded time gives the recorded speed and the dwell
    assert by_ts[1]["speed_mps"] == pytest.approx(1000.0, rel=1e-6)
    assert recorded[1]["speed_mps"] == pytest.approx(10.0, rel=1e-6)
    assert [x["kind"] for x in by_ts[1]["transitions"]] == [] and [x["kind"] for x in recorded[1]["transitions"]] == ["DWELL"]
    # AND an event without the field is refused naming it (the worker quarantines it): no speed between two clocks
    with pytest.raises(TransformError, match="event 'e2000' has no field 'recorded_utc', which GEOFENCE_TIME_FIELD names"):
        t.apply_stateful(_ev(2_000, INSIDE_A), None)
    with pytest.raises(TransformError, match="event 'e3000': bad_timestamp: recorded_utc 'soon' is neither"):
        t.apply_stateful({**_ev(3_000, INSIDE_A), "recorded_utc": "soon"}, None)


def test_a_bad_time_field_setting_is_named_and_an_empty_one_is_ts(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a field name with a space around it THEN building the transform fails naming the value
    monkeypatch.setenv("GEOFENCE_TIME_FIELD", " recorded_utc")
    with pytest.raises(TransformError, match="GEOFENCE_TIME_FIELD must name an event field, got ' recorded_utc'"):
        GeofenceState()
    # AND an empty one is the default, ts
    monkeypatch.setenv("GEOFENCE_TIME_FIELD", "")
    assert GeofenceState().time_field == "ts"


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
