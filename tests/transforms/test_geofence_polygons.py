"""Polygon geofences (transforms.geofence_polygons, transforms.geojson_zones): GeoJSON with holes, MultiPolygons,
ids and the antimeridian; the STRtree join against the brute force; ENTER / EXIT / DWELL and the late flag."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import shapely
from hypothesis import example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geo_service.entity.store import EntityStates
from geo_service.pipeline.transform import StatefulTransform, TransformError, load_transform, stateful_of
from transforms.geofence_polygons import DEFAULT_GEOJSON, GeofencePolygons, PolygonZones, zones_of
from transforms.geojson_zones import read_zones

SQUARE = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]
HOLE = [[0.4, 0.4], [0.4, 0.6], [0.6, 0.6], [0.6, 0.4], [0.4, 0.4]]


def poly(*rings: list[list[float]]) -> dict[str, Any]:
    return {"type": "Polygon", "coordinates": list(rings)}


def feat(zone_id: Any, geometry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    props = {} if zone_id is None else {"id": zone_id}
    return {"type": "Feature", "properties": props, "geometry": geometry, **extra}


def write(tmp_path: Path, *features: dict[str, Any], name: str = "zones.geojson") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"type": "FeatureCollection", "features": list(features)}))
    return path


def joined(monkeypatch: pytest.MonkeyPatch, path: Path, region: list[str] | None = None) -> PolygonZones:
    monkeypatch.setenv("GEOFENCES_GEOJSON", str(path))
    zones = PolygonZones()
    zones.load_region([""] if region is None else region, 1)
    return zones


def at(zones: PolygonZones, lat: float, lon: float) -> list[str]:
    return list(zones.apply({"event_id": "e", "entity_id": "car", "ts": 0, "lat": lat, "lon": lon})["zones"])


def test_the_worker_loader_builds_it_as_a_stateful_transform_naming_its_settings() -> None:
    # GIVEN the GEO_TRANSFORM value of the polygon transform (the shipped zones by default)
    t = load_transform("transforms.geofence_polygons:GeofencePolygons")
    # THEN it is stateful, lists the settings the local loop passes on, and joins a point of Tokyo to its zones
    assert isinstance(t, StatefulTransform) and stateful_of(t) is t
    assert set(GeofencePolygons.settings) == {"GEOFENCES_GEOJSON", "GEOFENCE_ID_PROPERTY", "GEOFENCE_DWELL_S",
                                              "GEOFENCE_TIME_FIELD", "GEOFENCE_EVENT_BUS"}
    t.load_region([""], 1)
    got = t.apply({"event_id": "e", "entity_id": "a", "ts": 1_767_225_600_000, "lat": 35.6895, "lon": 139.69171})
    assert got["zones"] == ["TOKYO-JP-CORE", "JP-CORES"] and got["late"] is False
    assert [x["kind"] for x in got["transitions"]] == ["ENTER", "ENTER"]


def test_a_hole_is_outside_the_zone_a_boundary_inside_and_a_multipolygon_is_one_zone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a square with a hole, and a MultiPolygon of two squares far apart
    far = [[x + 10.0, y] for x, y in SQUARE]
    zones = joined(monkeypatch, write(tmp_path, feat("RING", poly(SQUARE, HOLE)),
                                      feat("PAIR", {"type": "MultiPolygon", "coordinates": [[SQUARE], [far]]})))
    # THEN a point in the square is in both, one in the hole only in PAIR, one on the hole's edge in both, one in the
    # far square only in PAIR; zones come smallest first (PAIR is twice the square's area, RING a bit less)
    assert at(zones, 0.2, 0.2) == ["RING", "PAIR"]
    assert at(zones, 0.5, 0.5) == ["PAIR"]
    assert at(zones, 0.4, 0.5) == ["RING", "PAIR"]
    assert at(zones, 0.5, 10.5) == ["PAIR"] and at(zones, 0.5, 5.0) == []


def test_the_id_comes_from_the_named_property_else_the_feature_id(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN features with an id property, with only a Feature id, with an integer id, and with a "code" property
    # beside a Feature id
    path = write(tmp_path, feat("A", poly(SQUARE)), {**feat(None, poly(SQUARE)), "id": "B"}, feat(7, poly(SQUARE)),
                 {"type": "Feature", "id": 8, "properties": {"code": "c8"}, "geometry": poly(SQUARE)})
    # THEN the default reads the "id" property, else the Feature's id member (a number as its text)
    assert [z.id for z in read_zones(path)] == ["A", "B", "7", "8"]
    # AND GEOFENCE_ID_PROPERTY=code reads "code", else the member
    coded = write(tmp_path, {"type": "Feature", "properties": {"code": "c1", "id": "ignored"}, "geometry": poly(SQUARE)},
                  {**feat(None, poly(SQUARE)), "id": "B"}, name="coded.geojson")
    monkeypatch.setenv("GEOFENCE_ID_PROPERTY", "code")
    assert sorted(at(joined(monkeypatch, coded), 0.5, 0.5)) == ["B", "c1"]


@pytest.mark.parametrize(("features", "message"), [
    ([feat(None, poly(SQUARE))], r"feature #0: no zone id: no property 'id' and no Feature 'id' member"),
    ([feat("A", poly(SQUARE)), feat("A", poly(SQUARE))], r"feature #1: zone id 'A' is also feature #0's"),
    ([feat(True, poly(SQUARE))], r"feature #0: zone id \(property 'id'\) must be a non-empty string or an integer, "
                                 r"got True"),
    ([feat("P", {"type": "Point", "coordinates": [0, 0]})], r"feature #0 \(zone 'P'\): geometry must be one of "
                                                             r"\('Polygon', 'MultiPolygon'\), got 'Point'"),
    ([feat("N", None)], r"geometry must be one of .*, got None"),
    ([feat("U", poly([*SQUARE[:-1], [0.0, 0.5]]))], r"exterior ring: a linear ring must end where it starts"),
    ([feat("S", poly(SQUARE[:3]))], r"exterior ring: a linear ring has at least 4 positions"),
    ([feat("L", poly([[0, 0], [1, 0], [1, 91], [0, 0]]))], r"position #2: latitude must be in \[-90, 90\], got 91"),
    ([feat("X", poly([[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]))], r"\(zone 'X'\) polygon #0: not a valid polygon: "
                                                                  r"Self-intersection"),
    ([feat("W", poly([[-170, 80], [-50, 80], [70, 80], [-170, 80]]))], r"longitudes wind a whole turn \(it encircles a pole\): split it"),
    ([feat("Q", poly([[0, 0], [1, "a"], [1, 1], [0, 0]]))], r"position #1: must be \[lon, lat\]"),
])
def test_a_bad_feature_is_named_with_its_index_and_value(tmp_path: Path, features: list[dict[str, Any]],
                                                         message: str) -> None:
    with pytest.raises(TransformError, match=message):
        read_zones(write(tmp_path, *features))


def test_a_bad_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "feature.json").write_text(json.dumps(feat("A", poly(SQUARE))))
    with pytest.raises(TransformError, match=r"cannot read GeoJSON zones .*bad\.json"):
        read_zones(tmp_path / "bad.json")
    with pytest.raises(TransformError, match="must be a GeoJSON FeatureCollection, got type 'Feature'"):
        read_zones(tmp_path / "feature.json")
    with pytest.raises(TransformError, match="a FeatureCollection with no features"):
        read_zones(write(tmp_path))
    with pytest.raises(TransformError, match=r"cannot read GeoJSON zones .*missing\.json"):
        zones_of(tmp_path / "missing.json", "id")


#: One zone across the antimeridian, written four ways: jumping from 180 to -180, continuous past 180, continuous
#: below -180, and split at the antimeridian as RFC 7946 3.1.9 asks (a MultiPolygon). Its hole crosses it too.
ACROSS = [[179.0, -1.0], [-179.0, -1.0], [-179.0, 1.0], [179.0, 1.0], [179.0, -1.0]]
ACROSS_HOLE = [[179.8, -0.2], [179.8, 0.2], [-179.8, 0.2], [-179.8, -0.2], [179.8, -0.2]]
WRITTEN = {
    "jumping": poly(ACROSS, ACROSS_HOLE),
    "past 180": poly([[x % 360.0, y] for x, y in ACROSS], [[x % 360.0, y] for x, y in ACROSS_HOLE]),
    "below -180": poly([[x % 360.0 - 360.0, y] for x, y in ACROSS], [[x % 360.0 - 360.0, y] for x, y in ACROSS_HOLE]),
    "split": {"type": "MultiPolygon", "coordinates": [
        [[[179.0, -1.0], [180.0, -1.0], [180.0, 1.0], [179.0, 1.0], [179.0, -1.0]]],
        [[[-180.0, -1.0], [-179.0, -1.0], [-179.0, 1.0], [-180.0, 1.0], [-180.0, -1.0]]],
    ]},
}


@pytest.fixture(scope="module")
def across(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PolygonZones]:
    base = tmp_path_factory.mktemp("across")
    out = {}
    for how, geometry in WRITTEN.items():
        zones = PolygonZones()
        zones.path = write(base, feat("DATELINE", geometry), name=f"{how}.geojson")
        zones.load_region([""], 1)
        out[how] = zones
    return out


@settings(max_examples=150, deadline=None)
@given(lat=st.floats(-1.5, 1.5), lon=st.one_of(st.floats(178.5, 180.0), st.floats(-180.0, -178.5)))
@example(lat=0.0, lon=180.0)
@example(lat=0.0, lon=-180.0)
@example(lat=0.0, lon=179.9)  # in the hole
@example(lat=1.0, lon=-179.5)  # on the edge
def test_a_zone_across_the_antimeridian_is_the_same_however_it_is_written(across: dict[str, PolygonZones],
                                                                          lat: float, lon: float) -> None:
    # GIVEN the zone written jumping, past 180, below -180 (each with a hole across it) and split without the hole
    # WHEN a point near the antimeridian is joined
    got = {how: at(zones, lat, lon) for how, zones in across.items()}
    # THEN it is in the zone exactly when it is in the 2 x 2 degree square around (0, 180) and out of the hole
    inside = -1.0 <= lat <= 1.0 and abs((lon + 360.0) % 360.0 - 180.0) <= 1.0
    in_hole = -0.2 < lat < 0.2 and abs((lon + 360.0) % 360.0 - 180.0) < 0.2
    assert got["split"] == (["DATELINE"] if inside else [])
    for how in ("jumping", "past 180", "below -180"):
        assert got[how] == (["DATELINE"] if inside and not in_hole else []), how
    # AND the zone is two parts with small boxes, not one box the width of the world
    for zones in across.values():
        (zone,) = zones.zones
        assert len(zone.parts) == 2 and all(e - w <= 1.0 + 1e-9 for w, _, e, _ in zone.boxes)


def test_the_worker_of_the_region_each_side_of_the_antimeridian_loads_the_zone(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    # GIVEN the zone written jumping across the antimeridian, and the zoom-12 cells on each side of it at the equator
    path = write(tmp_path, feat("DATELINE", WRITTEN["jumping"]), feat("FAR", poly(SQUARE)))
    from geokernel.geo.tiles import quadkey, tile
    west, east = quadkey(tile(-179.5, 0.5, 12)), quadkey(tile(179.5, 0.5, 12))
    # THEN each side's worker loads it (and not the square at (0, 0)), and answers the point there
    for cell, lon in ((west, -179.5), (east, 179.5)):
        zones = joined(monkeypatch, path, [cell])
        assert [z.id for z in zones.zones] == ["DATELINE"] and at(zones, 0.5, lon) == ["DATELINE"]


def _triangle(lat: float, lon: float, corners: list[tuple[float, float]]) -> list[list[float]]:
    """A closed ring of three corners around (lat, lon), longitudes continuous (past 180 near the antimeridian)."""
    ring = [[lon + dx, max(-89.9, min(89.9, lat + dy))] for dx, dy in corners]
    return [*ring, ring[0]]


offset = st.floats(-0.3, 0.3).map(lambda v: round(v, 6))  # GeoJSON as written: a few decimals, no denormals
corners = st.lists(st.tuples(offset, offset), min_size=3, max_size=3).filter(
    lambda c: abs((c[1][0] - c[0][0]) * (c[2][1] - c[0][1]) - (c[2][0] - c[0][0]) * (c[1][1] - c[0][1])) > 1e-4)


@settings(max_examples=60, deadline=None)
@given(lat=st.floats(-84.0, 84.0), lon=st.one_of(st.floats(-180.0, 180.0), st.floats(179.7, 180.3)),
       shapes=st.lists(corners, min_size=1, max_size=6), points=st.lists(st.tuples(st.floats(-0.35, 0.35),
                                                                                   st.floats(-0.35, 0.35)), max_size=30))
@example(lat=0.0, lon=180.0, shapes=[[(-0.2, -0.2), (0.2, -0.2), (0.0, 0.2)]], points=[(0.0, 0.0), (0.19, -0.19)])
@example(lat=0.0, lon=0.0, shapes=[[(0.234873, 0.0), (0.0, 0.0), (0.0, 0.25)]], points=[(0.0, 0.0)])  # a vertex
def test_the_strtree_join_is_the_brute_force_over_every_zone(tmp_path_factory: pytest.TempPathFactory, lat: float,
                                                            lon: float, shapes: list[list[tuple[float, float]]],
                                                            points: list[tuple[float, float]]) -> None:
    # GIVEN up to 6 overlapping triangles around a point (some across the antimeridian) and points around it
    triangles = {f"T{i}": _triangle(lat, lon, c) for i, c in enumerate(shapes)}
    path = write(tmp_path_factory.mktemp("strtree"), *[feat(k, poly(t)) for k, t in triangles.items()])
    zones = PolygonZones()
    zones.path = path
    zones.load_region([""], 1)
    for dx, dy in points:
        plat, plon = max(-90.0, min(90.0, lat + dy)), (lon + dx + 180.0) % 360.0 - 180.0
        # WHEN the worker's join answers a point
        got = at(zones, plat, plon)
        # THEN it is every zone whose triangle, as written (longitudes past 180 too), covers the point a whole
        # number of turns east or west (boundary included), smallest zone first; a point within float rounding of
        # the boundary of a triangle moved a turn (written past 180) may be either
        shifted = [shapely.Point(plon + k * 360.0, plat) for k in (-1, 0, 1)]
        if any(shapely.Polygon(t).exterior.distance(q) < 1e-9 for t in triangles.values()
               if any(abs(x) > 180.0 for x, _ in t) for q in shifted):
            continue
        want = [z.id for z in sorted(zones.zones, key=lambda z: (z.area, z.id))
                if any(shapely.Polygon(triangles[z.id]).covers(q) for q in shifted)]
        assert got == want


def _mixed_region(cell: Any) -> list[str]:
    """A region holding ``cell`` with cells of three zooms (as tests/transforms/test_geofence_zooms.py builds it)."""
    from geokernel.geo.tiles import Tile, children, parent, quadkey
    n = 1 << cell.z
    region = [quadkey(cell)] + [quadkey(c) for c in children(Tile((cell.x + 2) % n, cell.y, cell.z))]
    if cell.y + 2 < n:
        region.append(quadkey(parent(Tile(cell.x, cell.y + 2, cell.z))))
    return region


@settings(max_examples=40, deadline=None)
@given(lat=st.floats(-84.9, 84.9), lon=st.floats(-180.0, 180.0), size=st.sampled_from([0.005, 0.05, 0.3]),
       shape=corners, zoom=st.integers(12, 16), buffer_ring=st.integers(0, 2),
       weights=st.lists(st.tuples(st.floats(0.02, 1.0), st.floats(0.02, 1.0), st.floats(0.02, 1.0)), min_size=1,
                        max_size=4))
@example(lat=0.3, lon=179.99, size=0.3, shape=[(-0.2, -0.2), (0.2, -0.2), (0.0, 0.2)], zoom=16, buffer_ring=0,
         weights=[(1.0, 0.02, 0.02), (0.02, 1.0, 0.02)])  # across the antimeridian
@example(lat=84.8, lon=33.0, size=0.3, shape=[(-0.3, -0.3), (0.3, -0.3), (0.0, 0.3)], zoom=15, buffer_ring=1,
         weights=[(0.02, 0.02, 1.0)])  # up to the mercator edge
def test_every_point_inside_a_polygon_is_reported_by_the_worker_of_its_cell(
        tmp_path_factory: pytest.TempPathFactory, lat: float, lon: float, size: float,
        shape: list[tuple[float, float]], zoom: int, buffer_ring: int, weights: list[tuple[float, float, float]]
) -> None:
    from geokernel.contracts.events import EVENT_LAT_LIMIT
    from geokernel.geo.tiles import tile
    # GIVEN a triangle of 0.005 to 0.3 degrees anywhere (written past 180 near the antimeridian) among decoys, and
    # points strictly inside it
    ring = _triangle(lat, lon, [(dx * size / 0.3, dy * size / 0.3) for dx, dy in shape])
    path = write(tmp_path_factory.mktemp("zooms"), feat("Z", poly(ring)), feat("FAR", poly(SQUARE)),
                 feat("DATELINE", WRITTEN["jumping"]))
    for a, b, c in weights:
        x = sum(w * p[0] for w, p in zip((a, b, c), ring, strict=False)) / (a + b + c)
        y = sum(w * p[1] for w, p in zip((a, b, c), ring, strict=False)) / (a + b + c)
        plat, plon = y, (x + 180.0) % 360.0 - 180.0
        if abs(plat) > EVENT_LAT_LIMIT:
            continue
        # WHEN the worker of the point's zoom-`zoom` cell (a mixed-zoom region) joins it
        zones = PolygonZones()
        zones.path = path
        zones.load_region(_mixed_region(tile(plon, plat, zoom)), buffer_ring)
        # THEN it reports the triangle
        assert "Z" in at(zones, plat, plon), (plat, plon)


#: 2026-01-01T00:00:00Z in epoch ms: the event times below are offsets from it (the time unit rule refuses 1970)
T0_MS = 1_767_225_600_000


def _ev(dt_ms: int, lat: float, lon: float) -> dict[str, Any]:
    return {"event_id": f"e{dt_ms}", "entity_id": "car-1", "ts": T0_MS + dt_ms, "lat": lat, "lon": lon}


def test_enter_dwell_exit_and_a_late_event_across_a_polygon_with_a_hole(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the square with a hole, a dwell time of 60 s, and an entity that enters, stays 60 s, crosses into the
    # hole, comes back, then sends an event older than its last
    monkeypatch.setenv("GEOFENCES_GEOJSON", str(write(tmp_path, feat("RING", poly(SQUARE, HOLE)))))
    monkeypatch.setenv("GEOFENCE_DWELL_S", "60")
    t = GeofencePolygons()
    t.load_region([""], 1)
    apply = EntityStates("transforms.geofence_polygons:GeofencePolygons").applier(t)
    out = [apply(e) for e in (_ev(0, 0.2, 0.2), _ev(30_000, 0.8, 0.8), _ev(60_000, 0.2, 0.8),
                              _ev(70_000, 0.5, 0.5), _ev(80_000, 0.2, 0.2), _ev(75_000, 0.5, 0.5))]
    # THEN: ENTER; nothing; DWELL at 60 s; EXIT into the hole; ENTER again; the late event: nothing, flagged
    kinds = [[(x["zone"], x["kind"]) for x in o["transitions"]] for o in out]
    assert kinds == [[("RING", "ENTER")], [], [("RING", "DWELL")], [("RING", "EXIT")], [("RING", "ENTER")], []]
    assert [o["late"] for o in out] == [False] * 5 + [True]
    assert out[5]["zones"] == [] and out[5]["speed_mps"] is None and out[4]["speed_mps"] is not None


def test_the_shipped_zones_are_real_polygons_where_the_replay_goes() -> None:
    # GIVEN the shipped zones (scripts/make_city_polygons.py) and the replay's places (local/dataset.py)
    from local.dataset import load_places
    zones = read_zones(DEFAULT_GEOJSON)
    by_id = {z.id: z for z in zones}
    places = load_places("world")
    # THEN they hold polygons with holes, MultiPolygons and a zone across the antimeridian (id in its Feature member)
    doc = json.loads(DEFAULT_GEOJSON.read_text())
    kinds = {f["geometry"]["type"] for f in doc["features"]}
    assert kinds == {"Polygon", "MultiPolygon"}
    assert sum(len(p.interiors) for z in zones for p in z.parts) >= 10
    assert len(by_id["RU-CHUKOTKA"].parts) == 2 and "id" not in doc["features"][-1]["properties"]
    # AND most of the replay's 120 cities lie in their own core (a point of the city: its Voronoi cell), and each
    # country's cores zone holds them too
    t = PolygonZones()
    t.load_region([""], 1)
    inside = 0
    for name, lat, lon in zip(places.names, places.lat, places.lon, strict=True):
        got = at(t, float(lat), float(lon))
        cc = name.rsplit(", ", 1)[1]
        inside += any(z.endswith(f"-{cc}-CORE") for z in got)
    assert inside >= 110, inside


def test_a_file_is_parsed_once_while_it_is_unchanged(tmp_path: Path) -> None:
    # GIVEN a zone file read twice, then rewritten
    path = write(tmp_path, feat("A", poly(SQUARE)))
    first, again = zones_of(path, "id"), zones_of(path, "id")
    write(tmp_path, feat("B", poly(SQUARE)), feat("C", poly(HOLE)))
    # THEN the second read is the first's (immutable) zones, and the rewrite is read anew
    assert again is first and [z.id for z in zones_of(path, "id")] == ["B", "C"]


def test_the_batch_join_and_the_prepared_steps_equal_the_per_event_ones() -> None:
    # GIVEN the shipped zones and 2,000 points around the replay's places (inside cores, metros, holes and between)
    from local.dataset import load_places
    places = load_places("world")
    rng = np.random.default_rng(7)
    pick = rng.integers(0, len(places.lat), 2000)
    events = [{"event_id": f"e{i}", "entity_id": f"c{i % 50}", "ts": T0_MS + 1000 * i,
               "lat": float(places.lat[j]) + float(rng.normal(0, 0.05)),
               "lon": float(places.lon[j]) + float(rng.normal(0, 0.05))} for i, j in enumerate(pick)]
    t = GeofencePolygons()
    t.load_region([""], 1)
    # WHEN the zones come from one tree query for the batch, and the stateful steps from the prepared zones
    batch = t.fences.zones_batch(events)
    prepared = t.prepare_batch(events)
    # THEN they equal the per-event join, and each prepared step the per-event step, state for state
    assert batch == [t.fences.apply(e)["zones"] for e in events]
    assert sum(1 for z in batch if z) > 500
    states: dict[str, Any] = {}
    for e, p in zip(events, prepared, strict=True):
        one = t.apply_stateful(e, states.get(e["entity_id"]))
        assert t.apply_prepared(e, states.get(e["entity_id"]), p) == one
        states[e["entity_id"]] = one.state
