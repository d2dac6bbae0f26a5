"""Tests for partitioner.output.geojson: one feature per partition, holes carved, catch-all without geometry.

Every geometry is checked with shapely (a test dependency only): valid under OGC rules and
covering exactly the squares the partition owns.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from shapely.geometry import box, shape
from shapely.ops import unary_union
from spec_factory import block, make_counts, make_spec, qk

from geokernel.geo.rings import square_polygons
from geokernel.geo.tiles import MAX_LAT, bounds, quadkey_to_tile
from geokernel.partition_spec.geometry import owned_squares
from geokernel.partition_spec.model import HASH_BUCKETS, Spec
from partitioner.builders import build_spec
from partitioner.load.read import read_counts_csv
from partitioner.output.geojson import spec_to_geojson, write_geojson

Z = 8


def test_one_feature_per_partition_with_properties():
    spec = make_spec([("p0001", "w0001", [qk(10, 10, Z), qk(11, 10, Z)], 30.0), ("p0002", "w0002", [qk(40, 40, Z)],
                                                                                   45.0)], 50.0)
    fc = spec_to_geojson(spec)
    assert fc["type"] == "FeatureCollection" and fc["version"] == 1 and fc["max_load"] == 50.0
    assert [f["id"] for f in fc["features"]] == ["p0001", "p0002", "p9999"]
    props = fc["features"][0]["properties"]
    assert props == {"id": "p0001", "worker": "w0001", "load": 30.0, "utilisation": 0.6, "split_share": 1.0,
                     "hash_range": None, "catch_all": False, "quadkeys": 2, "squares": 2}
    # two squares sharing an edge dissolve into one rectangle (5 points, closed)
    geom = fc["features"][0]["geometry"]
    assert geom["type"] == "Polygon" and len(geom["coordinates"]) == 1 and len(geom["coordinates"][0]) == 5


def test_catch_all_has_null_geometry():
    spec = make_spec([("p0001", "w0001", [qk(1, 1, Z)], 1.0)], 5.0)
    catch = spec_to_geojson(spec)["features"][-1]
    assert catch["geometry"] is None and catch["properties"]["catch_all"] is True


def test_coarse_cell_with_hole_is_replaced_by_the_children_that_stay():
    # GIVEN p0001 lists a cell and p0002 lists a grandchild inside it
    parent = qk(3, 3, Z)
    grandchild = qk(12, 12, Z + 2)
    spec = make_spec([("p0001", "w0001", [parent], 10.0), ("p0002", "w0002", [grandchild], 1.0)], 20.0)
    sq = owned_squares(spec)
    # THEN p0001 owns 3 children plus 3 grandchildren, never the hole
    assert sorted(sq["p0001"]) == sorted([parent + d for d in "123"] + [parent + "0" + d for d in "123"])
    assert sq["p0002"] == [grandchild] and sq["p9999"] == []
    assert not any(grandchild.startswith(q) for q in sq["p0001"])


def test_rings_are_the_tile_bounds_closed_and_counter_clockwise():
    q = qk(0, 0, 3)  # north-west corner of the world: touches the antimeridian and the pole row
    spec = make_spec([("p0001", "w0001", [q], 1.0)], 5.0)
    ring = spec_to_geojson(spec)["features"][0]["geometry"]["coordinates"][0]
    b = bounds(quadkey_to_tile(q))
    assert ring[0] == ring[-1] and len(ring) == 5
    expected = [[b.west, b.south], [b.east, b.south], [b.east, b.north], [b.west, b.north]]
    assert sorted(ring[:4]) == sorted([[round(v, 7) for v in pt] for pt in expected])
    assert min(p[0] for p in ring) == -180.0 and max(p[1] for p in ring) == pytest.approx(MAX_LAT)
    area2 = sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in itertools.pairwise(ring))
    assert area2 > 0  # counter-clockwise exterior ring (RFC 7946)


def test_hash_split_shares_each_cover_the_cell_with_their_share():
    hot = qk(7, 7, Z)
    spec = make_spec([("p0001", "w0001", [hot], 40.0, (0, HASH_BUCKETS // 4)),
                      ("p0002", "w0002", [hot], 120.0, (HASH_BUCKETS // 4, HASH_BUCKETS))], 150.0)
    feats = spec_to_geojson(spec)["features"]
    assert [f["properties"]["split_share"] for f in feats[:2]] == [0.25, 0.75]
    assert feats[0]["properties"]["hash_range"] == [0, HASH_BUCKETS // 4]
    assert feats[0]["geometry"] == feats[1]["geometry"]


def test_loads_from_counts_replace_the_recorded_ones(tmp_path):
    spec = make_spec([("p0001", "w0001", [qk(1, 1, Z)], 1.0)], 10.0)
    fc = spec_to_geojson(spec, make_counts({qk(1, 1, Z): 8.0, qk(100, 100, Z): 2.0}))
    assert [f["properties"]["load"] for f in fc["features"]] == [8.0, 2.0]
    out = write_geojson(spec, tmp_path / "s.geojson")
    assert json.loads(out.read_text())["features"][0]["properties"]["load"] == 1.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 4))
def test_owned_squares_partition_the_listed_cell_exactly(x: int, y: int, depth: int):
    # GIVEN a coarse cell and one descendant listed by another partition, at any depth
    parent = qk(x, y, Z)
    hole = parent + "3" * depth if depth else None
    rows = [("p0001", "w0001", [parent], 1.0)] + ([("p0002", "w0002", [hole], 1.0)] if hole else [])
    sq = owned_squares(make_spec(rows, 5.0))
    # THEN the owned squares plus the hole tile the parent's area exactly, without overlap
    pieces = sq["p0001"] + ([hole] if hole else [])
    assert sum(4.0 ** -(len(q) - Z) for q in pieces) == 1.0
    assert all(q.startswith(parent) for q in pieces)
    assert not any(a != b and b.startswith(a) for a in pieces for b in pieces)


# --- validity and exactness, checked with shapely -------------------------------------------------

def _squares_union(qks: list[str]) -> shapely.Geometry:
    return unary_union([box(*bounds(quadkey_to_tile(q))) for q in qks])


def _assert_valid_and_exact(spec: Spec) -> list[dict]:
    """Every feature valid under shapely, covering its owned squares (up to the 7-decimal rounding)."""
    squares = owned_squares(spec)
    feats = [f for f in spec_to_geojson(spec)["features"] if f["geometry"] is not None]
    for f in feats:
        geom = shape(f["geometry"])
        assert shapely.is_valid(geom), (f["id"], shapely.is_valid_reason(geom))
        ref = _squares_union(squares[f["id"]])
        assert geom.symmetric_difference(ref).area <= 1e-4 * ref.area, f["id"]
        for poly in [f["geometry"]["coordinates"]] if f["geometry"]["type"] == "Polygon" else \
                f["geometry"]["coordinates"]:
            for k, ring in enumerate(poly):  # RFC 7946: shells counter-clockwise, holes clockwise
                area2 = sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in itertools.pairwise(ring))
                assert (area2 > 0) == (k == 0), (f["id"], k)
                assert all(abs(a[0] - b[0]) <= 180 for a, b in itertools.pairwise(ring))  # no ring across +/-180
    return feats


def test_a_region_around_a_hole_is_one_polygon_with_a_clockwise_hole():
    # GIVEN p0001 owns a 5x5 block and p0002 the cell in its middle
    spec = make_spec([("p0001", "w0001", [q for q in block(10, 15, 10, 15, Z) if q != qk(12, 12, Z)], 24.0),
                      ("p0002", "w0002", [qk(12, 12, Z)], 1.0)], 30.0)
    # WHEN exported THEN p0001 is one Polygon with one hole, the hole is p0002's cell
    feats = _assert_valid_and_exact(spec)
    geom = feats[0]["geometry"]
    assert geom["type"] == "Polygon" and len(geom["coordinates"]) == 2
    assert shape({"type": "Polygon", "coordinates": [geom["coordinates"][1]]}).equals(
        shape(feats[1]["geometry"]))


def test_squares_touching_at_a_corner_are_separate_polygons():
    spec = make_spec([("p0001", "w0001", [qk(4, 4, Z), qk(5, 5, Z)], 2.0)], 5.0)
    geom = _assert_valid_and_exact(spec)[0]["geometry"]
    assert geom["type"] == "MultiPolygon" and len(geom["coordinates"]) == 2


def test_a_pocket_closed_at_a_corner_is_a_hole_touching_the_shell():
    # GIVEN a ring of cells around (6, 6) whose only gap is a diagonal step at the corner (7, 7)/(8, 8)...
    cells = [c for c in block(4, 8, 4, 8, Z) if c not in (qk(5, 5, Z), qk(6, 6, Z), qk(5, 6, Z), qk(6, 5, Z),
                                                          qk(7, 7, Z))] + [qk(8, 8, Z)]
    spec = make_spec([("p0001", "w0001", cells, 1.0)], 5.0)
    # THEN the export is valid (the inner pocket is a hole, the corner cell a polygon of its own)
    geom = _assert_valid_and_exact(spec)[0]["geometry"]
    assert geom["type"] == "MultiPolygon" and sorted(len(p) for p in geom["coordinates"]) == [1, 2]


def test_a_region_across_the_antimeridian_is_split_there():
    # GIVEN a region owning the last and the first columns of the world at one row
    n = 1 << Z
    spec = make_spec([("p0001", "w0001", [qk(n - 2, 50, Z), qk(n - 1, 50, Z), qk(0, 50, Z), qk(1, 50, Z)], 4.0)],
                     5.0)
    # THEN it is two polygons, one ending at +180 and one starting at -180, no edge crossing the meridian
    geom = _assert_valid_and_exact(spec)[0]["geometry"]
    assert geom["type"] == "MultiPolygon" and len(geom["coordinates"]) == 2
    xs = sorted((min(p[0] for p in poly[0]), max(p[0] for p in poly[0])) for poly in geom["coordinates"])
    assert xs[0][0] == -180.0 and xs[1][1] == 180.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=40, unique=True),
       st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15)), max_size=12, unique=True))
def test_any_cells_with_finer_holes_export_valid_and_exact(coarse, holes):
    # GIVEN random zoom-5 cells of one partition and random zoom-6 cells of another carving holes in them
    rows = [("p0001", "w0001", [qk(x + 8, y + 8, 5) for x, y in coarse], 1.0)]
    owned = {(x + 8, y + 8) for x, y in coarse}
    inside = [qk(x + 16, y + 16, 6) for x, y in holes if ((x + 16) // 2, (y + 16) // 2) in owned]
    if inside:
        rows.append(("p0002", "w0002", inside, 1.0))
    # THEN every feature is valid under shapely and covers exactly its owned squares
    _assert_valid_and_exact(make_spec(rows, 5.0))


def test_built_specs_of_real_places_export_valid_features(sparse, metro):
    # GIVEN the bundled London sample and built specs of world clusters and a metro area
    sample = read_counts_csv(Path(__file__).resolve().parents[3] / "partitioner" / "data" / "sample_counts.csv")
    for counts, max_load in ((sample, 2500.0), (sparse, float(sparse.weights.sum()) / 40),
                             (metro, float(metro.weights.sum()) / 25)):
        # THEN every feature of each is valid and exact
        assert _assert_valid_and_exact(build_spec(counts, max_load))


def test_square_polygons_counts_a_duplicate_square_once():
    # GIVEN two squares sharing an edge, one of them listed twice
    polys = square_polygons([qk(4, 4, Z), qk(5, 4, Z), qk(4, 4, Z)])
    # THEN one rectangle without holes
    assert len(polys) == 1 and polys[0].holes == [] and len(polys[0].shell) == 5
    assert shapely.is_valid(shape({"type": "Polygon", "coordinates": [polys[0].shell]}))
