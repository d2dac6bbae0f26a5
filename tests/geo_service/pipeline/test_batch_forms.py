"""The transforms' batch forms answer what their per-event calls answer (issue #60): the reverse geocoder's
``apply_batch`` and its coverage's ``covers_many``, the geofences' ``apply_batch``, the stateful geofence's
``prepare_batch`` + ``apply_prepared``."""

from __future__ import annotations

from typing import Any

import numpy as np

from geo_service.pipeline.transform import ReverseGeocoder, chord_to_km, unit_vectors
from geokernel.geo.tiles import bounds, quadkey, quadkey_to_tile, tile
from transforms.geofence import Geofences
from transforms.geofence_state import GeofenceState

#: Heathrow (a zone of the default zones file) and a London region that holds it.
LHR = (51.4706, -0.4619)
LONDON = quadkey(tile(-0.1276, 51.5072, 8))


def _points(qk: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` events at random points in the cell ``qk`` and its ring (a third of them outside the cell)."""
    b = bounds(quadkey_to_tile(qk))
    w, h = b.east - b.west, b.north - b.south
    rng = np.random.default_rng(seed)
    xs, ys = rng.uniform(b.west - w, b.east + w, n), rng.uniform(b.south - h, b.north + h, n)
    return [{"event_id": f"e{i}", "entity_id": f"c{i % 7}", "ts_ms": 1_796_601_600_000 + 1000 * i,
             "lat": float(y), "lon": float(x)} for i, (x, y) in enumerate(zip(xs, ys, strict=True))]


def test_the_geocoders_batch_form_answers_as_its_per_event_call() -> None:
    # GIVEN geocoders loaded for small regions around big cities (and at the antimeridian), and points in and
    # around them: some covered by the loaded places, some asked of all places
    for lon, lat, zoom in ((-0.13, 51.51, 9), (2.35, 48.86, 12), (139.7, 35.7, 10), (178.4, -18.1, 9)):
        qk = quadkey(tile(lon, lat, zoom))
        g = ReverseGeocoder()
        g.load_region([qk], 1)
        events = _points(qk, 300, zoom)
        # WHEN the batch is answered at once and one event at a time
        # THEN the answers are the same, in order
        assert g.apply_batch(events) == [g.apply(e) for e in events], qk


def test_the_coverage_of_many_points_is_the_coverage_of_each() -> None:
    # GIVEN a geocoder of a London cell and the distances to the nearest loaded place of points in and around it
    g = ReverseGeocoder()
    g.load_region([LONDON], 1)
    events = _points(LONDON, 500, 3)
    lat, lon = np.array([e["lat"] for e in events]), np.array([e["lon"] for e in events])
    assert g._tree is not None
    chords, _ = g._tree.query(unit_vectors(lat, lon))
    km = np.array([chord_to_km(c) for c in chords.tolist()])
    # WHEN the coverage is asked for all points at once
    many = g.coverage.covers_many(lon, lat, km)
    # THEN it says what it says of each point, and not every point is covered
    assert many == [g.coverage.covers(x, y, d) for x, y, d in zip(lon.tolist(), lat.tolist(), km.tolist(), strict=True)]
    assert 0 < sum(many) < len(many)


def test_the_geofences_batch_form_answers_as_its_per_event_call() -> None:
    # GIVEN the default zones loaded for London, and points scattered around Heathrow (inside it and outside)
    fences = Geofences()
    fences.load_region([LONDON], 1)
    rng = np.random.default_rng(5)
    events = [{"lat": LHR[0] + rng.normal(0, 0.05), "lon": LHR[1] + rng.normal(0, 0.08)} for _ in range(400)]
    # WHEN the batch is answered at once and one event at a time
    got, want = fences.apply_batch(events), [fences.apply(e) for e in events]
    # THEN the zones are the same, in the same order, and some events are in a zone
    assert got == want and any(f["zones"] for f in got)


def test_a_prepared_stateful_geofence_answers_and_remembers_as_its_per_event_call() -> None:
    # GIVEN the stateful geofence over London and entities moving in and out of Heathrow, events in time order
    t = GeofenceState()
    t.load_region([LONDON], 1)
    rng = np.random.default_rng(9)
    events = [{"event_id": f"e{i}", "entity_id": f"car-{i % 5}", "ts": 1_796_601_600_000 + 30_000 * i,
               "lat": LHR[0] + rng.normal(0, 0.02), "lon": LHR[1] + rng.normal(0, 0.03)} for i in range(300)]
    # WHEN the batch's zones are prepared at once and each event then applied with its entity's state, and the
    # same events are applied one by one
    prepared = t.prepare_batch(events)
    states: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    got, want = [], []
    for e, p in zip(events, prepared, strict=True):
        a = t.apply_prepared(e, states.get(e["entity_id"]), p)
        b = t.apply_stateful(e, plain.get(e["entity_id"]))
        states[e["entity_id"]], plain[e["entity_id"]] = a.state, b.state
        got.append(a.fields)
        want.append(b.fields)
    # THEN every event's fields and every entity's state are the same, and some events crossed a zone's edge
    assert got == want and states == plain
    assert any(f["transitions"] for f in got)
