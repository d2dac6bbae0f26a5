"""Tests for the worked example transform: loaded by the worker's own loader, region-scoped, exact joins."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geo_service.pipeline.transform import GeoTransform, load_transform, transform_for_region
from geokernel.geo.tiles import quadkey, tile

LONDON = quadkey(tile(-0.2, 51.5, 8))


def test_the_worker_loader_builds_it_from_the_geo_transform_value():
    # GIVEN the value a deployment sets with -c geo_transform=...
    t = load_transform("transforms.geofence:Geofences")
    # THEN it is a GeoTransform the worker accepts
    assert isinstance(t, GeoTransform)


def test_a_london_worker_keeps_only_the_london_zones_and_joins_events_to_them():
    # GIVEN a worker whose region is one zoom-8 cell over London, loaded as the worker does
    t, loaded = transform_for_region(None, lambda: load_transform("transforms.geofence:Geofences"), [LONDON], 1)
    # THEN it loaded Heathrow and London City only
    assert loaded == 2 and sorted(t.ids) == ["LCY", "LHR"]
    # AND an event on Heathrow's runway is in LHR, one in Hyde Park in no zone
    assert t.apply({"lat": 51.4706, "lon": -0.4619, "entity_id": "a", "event_id": "1"}) == {"zones": ["LHR"]}
    assert t.apply({"lat": 51.5073, "lon": -0.1657, "entity_id": "a", "event_id": "2"}) == {"zones": []}


def test_the_catch_all_loads_every_zone_including_across_the_antimeridian():
    t = load_transform("transforms.geofence:Geofences")
    t.load_region([""], 1)
    assert t.loaded == 7
    assert t.apply({"lat": -17.76, "lon": 177.45, "entity_id": "b", "event_id": "3"}) == {"zones": ["NAN"]}


def test_a_region_without_zones_adds_an_empty_list(tmp_path, monkeypatch):
    # GIVEN a custom zones file (GEOFENCES_CSV) with one zone in Sydney and a worker over London
    csv = tmp_path / "zones.csv"
    csv.write_text("id,name,lat,lon,radius_km\nOPERA,Opera House,-33.8568,151.2153,0.5\n")
    monkeypatch.setenv("GEOFENCES_CSV", str(csv))
    t = load_transform("transforms.geofence:Geofences")
    t.load_region([LONDON], 1)
    assert t.loaded == 0 and t.apply({"lat": 51.5, "lon": -0.1}) == {"zones": []}
