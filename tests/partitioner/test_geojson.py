"""Tests for partitioner.geojson: one feature per partition, holes carved, catch-all without geometry."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_factory import make_counts, make_spec, qk

from partitioner.geojson import owned_squares, spec_to_geojson, write_geojson
from partitioner.spec import HASH_BUCKETS
from partitioner.tiles import MAX_LAT, bounds, quadkey_to_tile

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
    assert fc["features"][0]["geometry"]["type"] == "MultiPolygon"
    assert len(fc["features"][0]["geometry"]["coordinates"]) == 2


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
    ring = spec_to_geojson(spec)["features"][0]["geometry"]["coordinates"][0][0]
    b = bounds(quadkey_to_tile(q))
    assert ring[0] == ring[-1] and len(ring) == 5
    expected = [[b.west, b.south], [b.east, b.south], [b.east, b.north], [b.west, b.north]]
    assert ring[:4] == [[round(v, 7) for v in pt] for pt in expected]
    assert ring[0][0] == -180.0 and ring[2][1] == pytest.approx(MAX_LAT)
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
