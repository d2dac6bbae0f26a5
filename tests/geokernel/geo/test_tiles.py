"""Tests for geokernel.geo.tiles: tile and quadkey math against mercantile, scalar and vectorised."""

from __future__ import annotations

import math

import mercantile
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.errors import InvalidCoordinateError, InvalidQuadkeyError, InvalidTileError
from geokernel.geo.tiles import (
    MAX_LAT,
    MAX_ZOOM,
    Bounds,
    Tile,
    arrays_to_quadkeys,
    bounds,
    bounds_arrays,
    check_tile,
    children,
    neighbors,
    parent,
    parse_quadkey,
    quadkey,
    quadkey_to_tile,
    quadkeys_to_arrays,
    tile,
    tile_codes,
    tiles_xy,
    unique_ints,
    valid_lonlat_mask,
)

zooms = st.integers(0, MAX_ZOOM)
lons = st.floats(-180.0, 180.0, allow_nan=False)
lats = st.floats(-89.999, 89.999, allow_nan=False)  # mercantile raises at exactly +/-90; beyond 85.05 both clamp


@st.composite
def tiles(draw: st.DrawFn, min_zoom: int = 0, max_zoom: int = MAX_ZOOM) -> Tile:
    z = draw(st.integers(min_zoom, max_zoom))
    n = 1 << z
    return Tile(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)), z)


@st.composite
def edge_tiles(draw: st.DrawFn) -> Tile:
    """Tiles in the first or last column (the antimeridian) or row (the poles)."""
    z = draw(st.integers(1, MAX_ZOOM))
    n = 1 << z
    x, y = draw(st.sampled_from([0, n - 1])), draw(st.integers(0, n - 1))
    return Tile(x, y, z) if draw(st.booleans()) else Tile(y, x, z)


@settings(max_examples=300)
@given(lons, lats, zooms)
def test_tile_of_a_point_is_mercantiles(lon: float, lat: float, z: int) -> None:
    assert tuple(tile(lon, lat, z)) == tuple(mercantile.tile(lon, lat, z))


@settings(max_examples=300)
@given(tiles())
def test_quadkey_round_trip_matches_mercantile(t: Tile) -> None:
    # GIVEN any tile
    q = quadkey(t)
    # THEN its quadkey is mercantile's, has one digit per zoom, and reads back as the same tile
    assert q == mercantile.quadkey(*t)
    assert len(q) == t.z
    assert quadkey_to_tile(q) == t
    assert tuple(mercantile.quadkey_to_tile(q)) == tuple(t)


@settings(max_examples=300)
@given(tiles())
def test_bounds_are_mercantiles_and_contain_the_tiles_own_points(t: Tile) -> None:
    b = bounds(t)
    assert b == pytest.approx(tuple(mercantile.bounds(*t)), abs=1e-9)
    # AND a point inside the bounds (a quarter in from the south-west corner) lies in the tile
    inside = tile(b.west + (b.east - b.west) / 4, b.south + (b.north - b.south) / 4, t.z)
    assert inside == t


@settings(max_examples=200)
@given(tiles(min_zoom=1, max_zoom=MAX_ZOOM - 1))
def test_parent_and_children_match_mercantile_and_the_quadkey_digits(t: Tile) -> None:
    # THEN the parent is mercantile's and its quadkey is this one minus the last digit
    assert tuple(parent(t)) == tuple(mercantile.parent(*t))
    assert quadkey(parent(t)) == quadkey(t)[:-1]
    assert parent(t, 0) == Tile(0, 0, 0)
    # AND the children are mercantile's, listed in quadkey digit order 0, 1, 2, 3, each with t as parent
    kids = children(t)
    assert {tuple(c) for c in kids} == {tuple(c) for c in mercantile.children(*t)}
    assert [quadkey(c) for c in kids] == [quadkey(t) + d for d in "0123"]
    assert all(parent(c) == t for c in kids)


@settings(max_examples=300)
@given(tiles(min_zoom=2))
def test_neighbours_are_mercantiles_plus_the_columns_across_the_antimeridian(t: Tile) -> None:
    # GIVEN any tile at zoom 2 or deeper
    n = 1 << t.z
    ours = {tuple(u) for u in neighbors(t)}
    # THEN mercantile's neighbours (which stop at the antimeridian) are all among ours
    theirs = {tuple(u) for u in mercantile.neighbors(*t)}
    assert theirs <= ours
    # AND the extra ones are exactly the wrapped column on the other side of the antimeridian
    wrapped = {((t.x + dx) % n, t.y + dy, t.z) for dx in (-1, 1) for dy in (-1, 0, 1)
               if not 0 <= t.x + dx < n and 0 <= t.y + dy < n}
    assert ours - theirs == wrapped
    # AND rows never wrap: 8 neighbours, 5 on the first and last rows
    assert len(ours) == (5 if t.y in (0, n - 1) else 8)


def _touches(a: Bounds, b: Bounds) -> bool:
    """The two tiles share an edge or a corner, longitudes taken modulo 360 (across the antimeridian)."""
    same_column = (a.west, a.east) == (b.west, b.east)
    side_by_side = (a.east - b.west) % 360.0 == 0.0 or (b.east - a.west) % 360.0 == 0.0
    same_row = (a.south, a.north) == (b.south, b.north)
    above_or_below = a.north == b.south or a.south == b.north
    return (same_column or side_by_side) and (same_row or above_or_below) and a != b


@settings(max_examples=200)
@given(edge_tiles())
def test_neighbours_at_the_edges_touch_the_tile_across_the_antimeridian_but_not_across_a_pole(t: Tile) -> None:
    # GIVEN a tile on the first or last column or row
    b = bounds(t)
    # THEN every neighbour shares an edge or a corner with it (across the antimeridian too)
    assert all(_touches(b, bounds(u)) for u in neighbors(t))
    # AND none is across a pole: rows never wrap from the first to the last
    assert all(abs(u.y - t.y) <= 1 for u in neighbors(t))


def test_the_antimeridian_and_the_poles_go_to_the_edge_tiles() -> None:
    # GIVEN points on the antimeridian and at the poles, at zoom 4
    # THEN lon 180 is the last column, -180 the first; the poles (even exactly 90) clamp to the edge rows
    assert tile(180.0, 0.0, 4).x == 15 and tile(-180.0, 0.0, 4).x == 0
    assert tile(0.0, 90.0, 4).y == 0 and tile(0.0, -90.0, 4).y == 15
    assert tile(0.0, MAX_LAT + 1.0, 4) == tile(0.0, 89.0, 4)
    # AND the zoom-0 tile is the whole world with the empty quadkey
    assert quadkey(Tile(0, 0, 0)) == "" and quadkey_to_tile("") == Tile(0, 0, 0)
    assert neighbors(Tile(0, 0, 0)) == []
    assert sorted(neighbors(Tile(0, 0, 1))) == [Tile(0, 1, 1), Tile(1, 0, 1), Tile(1, 1, 1)]


@settings(max_examples=100)
@given(st.lists(st.tuples(lons, lats), min_size=1, max_size=50), zooms)
def test_vectorised_tiles_match_the_scalar_function(points: list[tuple[float, float]], z: int) -> None:
    lon = np.array([p[0] for p in points])
    lat = np.array([p[1] for p in points])
    x, y = tiles_xy(lon, lat, z)
    assert list(zip(x.tolist(), y.tolist(), strict=True)) == [tile(lo, la, z)[:2] for lo, la in points]
    assert valid_lonlat_mask(lon, lat).all()


@settings(max_examples=100)
@given(st.lists(tiles(), max_size=50))
def test_vectorised_quadkeys_match_the_scalar_functions_over_mixed_zooms(ts: list[Tile]) -> None:
    # GIVEN tiles of mixed zooms (the empty quadkey included when zoom 0 is drawn)
    qks = [quadkey(t) for t in ts]
    # THEN quadkeys -> arrays and arrays -> quadkeys agree with the scalar functions, both ways
    x, y, z = quadkeys_to_arrays(qks)
    assert list(zip(x.tolist(), y.tolist(), z.tolist(), strict=True)) == [tuple(quadkey_to_tile(q)) for q in qks]
    assert arrays_to_quadkeys(x, y, z) == qks


@settings(max_examples=100)
@given(st.lists(tiles(), min_size=1, max_size=50))
def test_vectorised_bounds_are_mercantiles_over_mixed_zooms(ts: list[Tile]) -> None:
    # GIVEN tiles of mixed zooms WHEN their bounds are computed as arrays
    west, south, east, north = bounds_arrays([t.x for t in ts], [t.y for t in ts], [t.z for t in ts])
    # THEN each tile's are mercantile's (and the scalar function's)
    got = list(zip(west.tolist(), south.tolist(), east.tolist(), north.tolist(), strict=True))
    for t, b in zip(ts, got, strict=True):
        assert b == pytest.approx(tuple(mercantile.bounds(*t)), abs=1e-9)
        assert b == pytest.approx(tuple(bounds(t)), abs=1e-12)


def test_vectorised_bounds_reject_a_tile_outside_its_grid_naming_it() -> None:
    with pytest.raises(InvalidTileError, match=r"\(4, 0, 2\)"):
        bounds_arrays([0, 4], [0, 0], 2)


@settings(max_examples=100)
@given(st.lists(tiles(min_zoom=12, max_zoom=12), min_size=1, max_size=50, unique=True))
def test_tile_codes_are_unique_within_a_zoom_and_decode_back(ts: list[Tile]) -> None:
    codes = tile_codes([t.x for t in ts], [t.y for t in ts], 12)
    assert len(set(codes.tolist())) == len(ts)
    assert arrays_to_quadkeys(codes >> 12, codes & ((1 << 12) - 1), 12) == [quadkey(t) for t in ts]


@pytest.mark.parametrize(("lon", "lat"), [(180.5, 0.0), (0.0, -90.5), (math.nan, 0.0), (0.0, math.inf)])
def test_points_off_the_map_are_rejected_naming_the_value(lon: float, lat: float) -> None:
    with pytest.raises(InvalidCoordinateError, match="must be a finite number"):
        tile(lon, lat, 3)
    assert not valid_lonlat_mask(np.array([lon]), np.array([lat]))[0]


@pytest.mark.parametrize("bad", ["0124", "01 2", "0" * (MAX_ZOOM + 1), 12, "é12", "01\x002"])
def test_malformed_quadkeys_are_rejected_naming_them(bad: object) -> None:
    with pytest.raises(InvalidQuadkeyError, match="quadkey"):
        parse_quadkey(bad, "row 3")
    if isinstance(bad, str):
        with pytest.raises(InvalidQuadkeyError, match=r"quadkey #1 "):
            quadkeys_to_arrays(["01", bad])


def test_tiles_outside_their_zoom_grid_are_rejected() -> None:
    with pytest.raises(InvalidTileError, match=r"outside the zoom-2 grid"):
        check_tile(Tile(4, 0, 2))
    with pytest.raises(InvalidTileError, match="no ancestor"):
        parent(Tile(0, 0, 0))
    with pytest.raises(InvalidTileError, match="MAX_ZOOM"):
        children(Tile(0, 0, MAX_ZOOM))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(1 << 62), (1 << 62)), max_size=300))
def test_unique_ints_gives_the_sorted_distinct_values_as_numpys_unique_does(values: list[int]) -> None:
    # GIVEN any integers, repeated or not, in any order
    a = np.asarray(values, dtype=np.int64)
    # WHEN their distinct values are taken
    got = unique_ints(a)
    # THEN they are numpy's np.unique, ascending, as int64
    assert got.dtype == np.int64 and got.tolist() == np.unique(a).tolist()
