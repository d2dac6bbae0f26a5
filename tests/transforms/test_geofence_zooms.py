"""Issue #56, zones at every zoom: a worker reports every zone containing a point of its region, whatever the zoom
of the region's cells (12 to 16, mixed in one region), the zone's size, the latitude or the antimeridian."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geo_service.pipeline.transform import EARTH_RADIUS_KM, haversine_km
from geokernel.contracts.events import EVENT_LAT_LIMIT
from geokernel.geo.tiles import Tile, children, parent, quadkey, tile
from transforms.geofence_state import GeofenceState

ZOOMS = (12, 13, 14, 15, 16)
RADII_KM = (0.5, 4.0, 20.0)
#: Zones of the file besides the one under test (a worker loads from a file of many zones).
DECOYS = "LHR,Heathrow,51.47,-0.4543,3.0\nNAN,Nadi,-17.7554,177.4434,3.0\nPOLE,North,84.9,10.0,20.0\n"


@pytest.fixture(scope="module")
def zones_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zones")


def points_in_disc(lat: float, lon: float, radius_km: float, count: int, rng: np.random.Generator
                   ) -> Iterator[tuple[float, float]]:
    """Random points strictly inside the disc that are valid events (``|lat|`` within the event limit)."""
    made = 0
    while made < count:
        bearing, d = rng.uniform(0, 2 * math.pi), radius_km * 0.999 * math.sqrt(rng.uniform(0, 1))
        p1, l1, delta = math.radians(lat), math.radians(lon), d / EARTH_RADIUS_KM
        p2 = math.asin(math.sin(p1) * math.cos(delta) + math.cos(p1) * math.sin(delta) * math.cos(bearing))
        l2 = l1 + math.atan2(math.sin(bearing) * math.sin(delta) * math.cos(p1),
                             math.cos(delta) - math.sin(p1) * math.sin(p2))
        plat, plon = math.degrees(p2), (math.degrees(l2) + 180.0) % 360.0 - 180.0
        if abs(plat) <= EVENT_LAT_LIMIT and haversine_km(lat, lon, plat, plon) < radius_km:
            made += 1
            yield plat, plon


def mixed_region(cell: Tile) -> list[str]:
    """A region holding ``cell`` with cells of three zooms: ``cell``, the zoom+1 children of the cell two columns
    east, and the zoom-1 parent of the cell two rows south (when the grid has that row)."""
    n = 1 << cell.z
    region = [quadkey(cell)] + [quadkey(c) for c in children(Tile((cell.x + 2) % n, cell.y, cell.z))]
    if cell.y + 2 < n:
        region.append(quadkey(parent(Tile(cell.x, cell.y + 2, cell.z))))
    return region


def misses(zones_dir: Path, monkeypatch: pytest.MonkeyPatch, zone: tuple[float, float, float],
           points: list[tuple[float, float]], zoom: int, buffer_ring: int) -> list[tuple[float, float]]:
    """The points inside ``zone`` that the worker serving the mixed-zoom region of their zoom-``zoom`` cell does
    not report inside it."""
    lat, lon, radius = zone
    path = zones_dir / f"zone_{lat}_{lon}_{radius}.csv"
    path.write_text(f"id,name,lat,lon,radius_km\nZ,Zone under test,{lat!r},{lon!r},{radius!r}\n{DECOYS}")
    monkeypatch.setenv("GEOFENCES_CSV", str(path))
    missed = []
    for plat, plon in points:
        worker = GeofenceState()
        worker.load_region(mixed_region(tile(plon, plat, zoom)), buffer_ring)
        fields = worker.apply({"event_id": "e", "entity_id": "car", "ts": 1795255500005, "lat": plat, "lon": plon})
        if "Z" not in fields["zones"]:
            missed.append((plat, plon))
    return missed


def census_zones(rng: np.random.Generator) -> list[tuple[float, float, float]]:
    """Per radius 8 zones: 4 anywhere below 70 degrees, 2 on the antimeridian, 2 above 75 degrees."""
    out = []
    for r in RADII_KM:
        out += [(rng.uniform(-70, 70), rng.uniform(-180, 180), r) for _ in range(4)]
        out += [(rng.uniform(-60, 60), float(rng.choice([-1, 1])) * rng.uniform(179.9, 180.0), r) for _ in range(2)]
        out += [(float(rng.choice([-1, 1])) * rng.uniform(75, 84.5), rng.uniform(-180, 180), r) for _ in range(2)]
    return out


def test_a_census_of_72_points_per_zoom_misses_none(zones_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 24 zones of 500 m, 4 km and 20 km (some on the antimeridian, some above 75 degrees) and 3 random points
    # inside each: 72 points per zoom
    rng = np.random.default_rng(56)
    zones = census_zones(rng)
    points = {z: list(points_in_disc(*z, 3, rng)) for z in zones}
    # WHEN the worker of each point's cell (zoom 12 to 16, in a mixed-zoom region, buffer ring 1) joins it
    counts = {zoom: sum(len(misses(zones_dir, monkeypatch, z, points[z], zoom, 1)) for z in zones) for zoom in ZOOMS}
    # THEN it reports the point inside its zone at every zoom: no miss
    assert counts == dict.fromkeys(ZOOMS, 0), f"misses of 72 points per zoom: {counts}"


@seed(56)
@settings(max_examples=40, deadline=None)
@given(lat=st.floats(-84.9, 84.9), lon=st.floats(-180.0, 180.0), radius=st.sampled_from(RADII_KM),
       zoom=st.sampled_from(ZOOMS), buffer_ring=st.integers(0, 2), draw_seed=st.integers(0, 2**32 - 1))
@example(lat=0.3, lon=179.995, radius=20.0, zoom=16, buffer_ring=0, draw_seed=1)  # across the antimeridian
@example(lat=-41.0, lon=-179.999, radius=4.0, zoom=14, buffer_ring=1, draw_seed=2)
@example(lat=84.8, lon=33.0, radius=20.0, zoom=15, buffer_ring=1, draw_seed=3)  # up to the mercator edge
@example(lat=-78.5, lon=-120.0, radius=0.5, zoom=16, buffer_ring=0, draw_seed=4)
@example(lat=84.9, lon=180.0, radius=20.0, zoom=12, buffer_ring=0, draw_seed=5)  # both
def test_every_point_inside_a_zone_is_reported_by_the_worker_of_its_cell(
        zones_dir: Path, lat: float, lon: float, radius: float, zoom: int, buffer_ring: int, draw_seed: int) -> None:
    # GIVEN a zone anywhere (of 500 m, 4 km or 20 km) and 6 random points inside it
    points = list(points_in_disc(lat, lon, radius, 6, np.random.default_rng(draw_seed)))
    # WHEN the worker of each point's zoom-`zoom` cell (a mixed-zoom region) joins the point
    with pytest.MonkeyPatch.context() as monkeypatch:
        missed = misses(zones_dir, monkeypatch, (lat, lon, radius), points, zoom, buffer_ring)
    # THEN every point is reported inside the zone
    assert missed == []
