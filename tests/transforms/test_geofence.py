"""Tests for the worked example transform: loaded by the worker's own loader, region-scoped, exact joins."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geo_service.pipeline.transform import GeoTransform, TransformError, load_transform, transform_for_region
from geokernel.geo.tiles import bounds, quadkey, tile

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


def test_a_zone_centred_beyond_the_ring_is_loaded_when_its_circle_reaches_the_region(tmp_path, monkeypatch):
    # GIVEN a 4 km zone centred 2 km east of the ring around a zoom-14 cell over London (cells 1.5 km wide): 3.5 km
    # from the cell
    t = tile(-0.1, 51.5, 14)
    b = bounds(t)
    width_km = (b.east - b.west) * 111.195 * math.cos(math.radians(51.5))
    centre_lon = b.east + (width_km + 2.0) / (111.195 * math.cos(math.radians(51.5)))
    csv = tmp_path / "zones.csv"
    csv.write_text(f"id,name,lat,lon,radius_km\nNEAR,Near,{(b.south + b.north) / 2!r},{centre_lon!r},4.0\n")
    monkeypatch.setenv("GEOFENCES_CSV", str(csv))
    # WHEN the worker of that cell loads its zones (ring 1)
    g = load_transform("transforms.geofence:Geofences")
    g.load_region([quadkey(t)], 1)
    # THEN the zone is loaded, and a point on the cell's east edge is in it
    assert g.loaded == 1
    assert g.apply({"lat": (b.south + b.north) / 2, "lon": b.east - 1e-9}) == {"zones": ["NEAR"]}


@pytest.mark.parametrize(("row", "message"), [
    ("Z,Zone,10.0,10.0,-1", "line 3: radius_km must be a number in [0.0, inf], got '-1'"),
    ("Z,Zone,91,10.0,1", "line 3: lat must be a number in [-90.0, 90.0], got '91'"),
    ("Z,Zone,10.0,east,1", "line 3: lon must be a number in [-180.0, 180.0], got 'east'"),
    ("Z,Zone,10.0,10.0", "line 3: radius_km must be a number in [0.0, inf], got None"),
])
def test_a_bad_zone_row_is_named_with_its_line_and_value(tmp_path, monkeypatch, row, message):
    # GIVEN a zones file whose second zone is malformed
    csv = tmp_path / "zones.csv"
    csv.write_text(f"id,name,lat,lon,radius_km\nOK,Fine,1.0,1.0,1.0\n{row}\n")
    monkeypatch.setenv("GEOFENCES_CSV", str(csv))
    # WHEN a worker loads it THEN the error names the file, the line and the value
    with pytest.raises(TransformError, match=re.escape(message)):
        load_transform("transforms.geofence:Geofences").load_region([LONDON], 1)
