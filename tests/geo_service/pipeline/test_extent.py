"""Which discs reach a region's cells (geo_service.pipeline.extent): boxes against mercantile, distances against a
dense sampling of the box, and the KD-tree selection against every (disc, box) pair."""

from __future__ import annotations

import math

import mercantile
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from geo_service.pipeline import transform
from geo_service.pipeline.extent import (
    SLACK_DEG,
    SLACK_KM,
    box_distance_km,
    boxes_reaching,
    discs_reaching,
    region_boxes,
)
from geo_service.pipeline.transform import TransformError, haversine_km
from geokernel.errors import InvalidQuadkeyError
from geokernel.geo.tiles import Tile, quadkey, tile

lats = st.floats(-85.0, 85.0)
lons = st.floats(-180.0, 180.0)


def test_the_earth_radius_is_the_geocoders() -> None:
    from geo_service.pipeline import extent
    assert extent.EARTH_RADIUS_KM == transform.EARTH_RADIUS_KM


@settings(max_examples=200)
@given(lons, lats, st.integers(1, 18), st.integers(0, 3))
@example(-180.0, 10.0, 14, 1)  # the first column: the ring crosses the antimeridian
@example(180.0, 85.0, 14, 2)  # the last column, the first row
@example(0.0, -85.0, 16, 0)  # the last row
def test_a_cell_grown_by_its_ring_is_the_box_of_mercantiles_ring_tiles(lon: float, lat: float, z: int, ring: int
                                                                         ) -> None:
    # GIVEN a cell and a buffer ring
    t = tile(lon, lat, z)
    n = 1 << z
    # WHEN it is turned into a box
    box = region_boxes([quadkey(t)], ring)
    # THEN its longitudes run from the ring's west column to its east column, continuously across the antimeridian
    width = 360.0 / n
    assert box.west[0] == pytest.approx(mercantile.bounds(t.x, t.y, z).west - ring * width, abs=1e-9)
    assert box.east[0] == pytest.approx(mercantile.bounds(t.x, t.y, z).east + ring * width, abs=1e-9)
    # AND its latitudes are those of the ring's first and last rows, or the poles when the ring reaches an edge row
    top, bottom = t.y - ring, t.y + ring
    assert box.north[0] == (90.0 if top <= 0 else pytest.approx(mercantile.bounds(t.x, top, z).north, abs=1e-9))
    assert box.south[0] == (-90.0 if bottom >= n - 1 else pytest.approx(mercantile.bounds(t.x, bottom, z).south,
                                                                          abs=1e-9))
    assert box.zoom.tolist() == [z] and not box.world


def _in_box(lat: float, lon: float, w: float, s: float, e: float, n: float) -> bool:
    return s <= lat <= n and ((e - w) >= 360.0 or (lon - w) % 360.0 <= e - w)


def _sampled_distance(lat: float, lon: float, w: float, s: float, e: float, n: float, k: int = 4000) -> float:
    """0 for a point in the box, else the least distance to k points on each of its four edges (the nearest point of
    a region to a point outside it is on its boundary)."""
    if _in_box(lat, lon, w, s, e, n):
        return 0.0
    along_lat, along_lon = np.linspace(s, n, k), np.linspace(w, e, k)
    glat = np.concatenate([along_lat, along_lat, np.full(k, s), np.full(k, n)])
    glon = np.concatenate([np.full(k, w), np.full(k, e), along_lon, along_lon])
    p1, p2 = math.radians(lat), np.radians(glat)
    h = np.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * np.cos(p2) * np.sin(np.radians(glon - lon) / 2) ** 2
    return float((2 * 6371.0088 * np.arcsin(np.sqrt(np.minimum(h, 1.0)))).min())


@settings(max_examples=300, deadline=None)
@given(lons, lats, st.integers(2, 16), st.integers(0, 2), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0))
@example(179.99, 60.0, 12, 1, 1.5, 0.0)  # across the antimeridian, east
@example(-179.99, -30.0, 14, 0, -2.0, 2.0)  # across the antimeridian, west
@example(10.0, 85.0, 8, 1, 0.2, 0.7)  # a box up to the pole, the point beyond it at the same longitude
@example(0.0, 0.0, 2, 2, 2.9, 0.0)  # a box around the world
def test_box_distance_is_the_least_distance_to_dense_points_of_its_edges(lon: float, lat: float, z: int,
                                                                         ring: int, fx: float, fy: float) -> None:
    # GIVEN a cell's box (any zoom, any ring) and a point placed relative to it (fx, fy: box widths from its centre)
    b = region_boxes([quadkey(tile(lon, lat, z))], ring)
    w, s, e, n = float(b.west[0]), float(b.south[0]), float(b.east[0]), float(b.north[0])
    plon = ((w + e) / 2 + fx * (e - w) / 2 + 180.0) % 360.0 - 180.0
    plat = max(-90.0, min(90.0, (s + n) / 2 + fy * (n - s) / 2))
    # WHEN its distance to the box is measured, and the least distance to dense points of the box's edges
    got = float(box_distance_km(plat, plon, w, s, e, n))
    sampled = _sampled_distance(plat, plon, w, s, e, n)
    # THEN ours is never more than the sampled one (those points are in the box), and less by at most a step
    widest = min(max(0.0, s), n)  # the longitude step is longest on the parallel nearest the equator
    step = haversine_km(widest, w, widest, w + (e - w) / 3999) + haversine_km(s, w, s + (n - s) / 3999, w)
    assert sampled - step <= got <= sampled + 1e-6
    # AND it is 0 for a point in the box
    assert (got == 0.0) == _in_box(plat, plon, w, s, e, n) or got < 1e-9


@st.composite
def regions(draw: st.DrawFn) -> tuple[list[str], float, float]:
    """A region of 1 to 40 cells of mixed zooms (12 to 16) scattered around a point, and the point."""
    lon, lat = draw(st.sampled_from([None, 179.98, -179.98])), draw(st.floats(-84.0, 84.0))
    lon = draw(lons) if lon is None else lon
    cells: set[str] = set()
    for _ in range(draw(st.integers(1, 40))):
        z = draw(st.integers(12, 16))
        t = tile(lon, lat, z)
        n = 1 << z
        cells.add(quadkey(Tile((t.x + draw(st.integers(-6, 6))) % n, min(n - 1, max(0, t.y + draw(st.integers(-6, 6)))),
                               z)))
    return sorted(cells), lon, lat


@settings(max_examples=150, deadline=None)
@given(regions(), st.integers(0, 2), st.lists(st.tuples(st.floats(-0.3, 0.3), st.floats(-0.3, 0.3),
                                                         st.sampled_from([0.0, 0.5, 4.0, 20.0])), max_size=60))
def test_the_selection_is_the_brute_force_over_every_disc_and_box(region: tuple[list[str], float, float], ring: int,
                                                                  offsets: list[tuple[float, float, float]]) -> None:
    # GIVEN a mixed-zoom region and discs of 0 to 20 km scattered around it (some reaching it, some not)
    qks, lon0, lat0 = region
    boxes = region_boxes(qks, ring)
    lat = np.array([max(-90.0, min(90.0, lat0 + dy)) for dy, _, _ in offsets])
    lon = np.array([(lon0 + dx + 180.0) % 360.0 - 180.0 for _, dx, _ in offsets])
    radius = np.array([r for _, _, r in offsets])
    # WHEN the KD-tree selection runs
    got = discs_reaching(lat, lon, radius, boxes)
    # THEN it is the brute force: some box within the radius (plus the slack) of the disc's centre
    dist = box_distance_km(lat[:, None], lon[:, None], boxes.west, boxes.south, boxes.east, boxes.north)
    assert got.tolist() == (dist <= radius[:, None] + SLACK_KM).any(axis=1).tolist()


def test_the_catch_all_reaches_every_disc_and_an_empty_region_none() -> None:
    # GIVEN discs anywhere
    lat, lon, r = np.array([0.0, 60.0]), np.array([179.0, -3.0]), np.array([1.0, 0.0])
    # THEN the catch-all keeps them all, a region of no cells none, and no disc is no work
    assert discs_reaching(lat, lon, r, region_boxes([""], 1)).tolist() == [True, True]
    assert discs_reaching(lat, lon, r, region_boxes([], 1)).tolist() == [False, False]
    assert discs_reaching(lat[:0], lon[:0], r[:0], region_boxes(["0"], 1)).tolist() == []


def test_a_disc_is_kept_by_its_rim_not_its_centre() -> None:
    # GIVEN a zoom-14 cell over London and discs centred 3 km east of its east edge (the cell is 1.5 km wide)
    t = tile(-0.1, 51.5, 14)
    b = region_boxes([quadkey(t)], 0)
    east, mid = float(b.east[0]), float((b.south[0] + b.north[0]) / 2)
    centre_lon = east + 3.0 / (111.195 * math.cos(math.radians(mid)))
    # THEN one of 3.01 km reaches it, one of 2.99 km does not
    got = discs_reaching(np.array([mid, mid]), np.array([centre_lon, centre_lon]), np.array([3.01, 2.99]), b)
    assert got.tolist() == [True, False]


def test_bad_regions_are_named() -> None:
    with pytest.raises(TransformError, match="buffer_ring must be an integer >= 0, got -1"):
        region_boxes(["0"], -1)
    with pytest.raises(InvalidQuadkeyError, match="'04'"):
        region_boxes(["0", "04"], 1)


def _overlaps(iw: float, is_: float, ie: float, in_: float, bw: float, bs: float, be: float, bn: float) -> bool:
    """Brute force: the item's box (grown by the slack) and the region box share a point, the region box shifted by
    every whole turn that can matter (longitudes continuous on both sides)."""
    iw, is_, ie, in_ = iw - SLACK_DEG, is_ - SLACK_DEG, ie + SLACK_DEG, in_ + SLACK_DEG
    if bs > in_ or bn < is_:
        return False
    if ie - iw >= 360.0 or be - bw >= 360.0:
        return True
    return any(bw + k * 360.0 <= ie and be + k * 360.0 >= iw for k in range(-3, 4))


@settings(max_examples=150, deadline=None)
@given(regions(), st.integers(0, 2),
       st.lists(st.tuples(st.floats(-0.4, 0.4), st.floats(-0.4, 0.4), st.sampled_from([0.0, 0.01, 0.1, 1.0]),
                          st.sampled_from([0.0, 0.01, 0.1, 1.0]), st.sampled_from([0.0, 360.0, -360.0])), max_size=60))
@example(region=(["3" * 14], 179.99, -84.0), ring=1, items=[(0.0, 0.0, 0.02, 0.02, 0.0)])
def test_the_box_selection_is_the_brute_force_over_every_item_and_box(
        region: tuple[list[str], float, float], ring: int, items: list[tuple[float, float, float, float, float]]
) -> None:
    # GIVEN a mixed-zoom region (some on the antimeridian) and item boxes of 0 to 2 degrees around it, some written
    # a whole turn east or west (continuous longitudes past 180 or below -180)
    qks, lon0, lat0 = region
    boxes = region_boxes(qks, ring)
    west = np.array([lon0 + dx - hw + turn for dx, _, hw, _, turn in items])
    east = np.array([lon0 + dx + hw + turn for dx, _, hw, _, turn in items])
    south = np.array([max(-90.0, lat0 + dy - hh) for _, dy, _, hh, _ in items])
    north = np.array([min(90.0, lat0 + dy + hh) for _, dy, _, hh, _ in items])
    # WHEN the sorted-edge selection runs
    got = boxes_reaching(west, south, east, north, boxes)
    # THEN it is the brute force over every (item, box) pair
    want = [any(_overlaps(west[i], south[i], east[i], north[i], *b) for b in
                zip(boxes.west, boxes.south, boxes.east, boxes.north, strict=True)) for i in range(len(items))]
    assert got.tolist() == want


def test_boxes_across_the_antimeridian_the_poles_and_the_whole_world() -> None:
    # GIVEN a zoom-12 cell on the antimeridian's east side, grown by one ring across it
    b = region_boxes(["1" * 12], 1)
    assert b.west[0] < 180.0 < b.east[0]
    # THEN an item west of the antimeridian written 170..181, one written -181..-179 and one -179.99..-179.9 reach it
    # (the ring's box runs to 180.09), one from -179 to -170 does not
    got = boxes_reaching([170.0, -181.0, -179.99, -179.0], [-90.0] * 4, [181.0, -179.0, -179.9, -170.0], [90.0] * 4, b)
    assert got.tolist() == [True, True, True, False]
    # AND a box up to the north pole reaches the first row's cell; the catch-all reaches everything; no cell nothing
    top = region_boxes(["0" * 10], 1)
    assert top.north[0] == 90.0 and boxes_reaching([0.0], [89.9], [1.0], [90.0], top).tolist() == [False]
    assert boxes_reaching([-180.0], [89.9], [-179.0], [90.0], top).tolist() == [True]
    assert boxes_reaching([10.0], [0.0], [11.0], [1.0], region_boxes([""], 0)).tolist() == [True]
    assert boxes_reaching([10.0], [0.0], [11.0], [1.0], region_boxes([], 0)).tolist() == [False]
    assert boxes_reaching([], [], [], [], b).tolist() == []


def test_an_item_box_touching_a_cell_reaches_it_and_one_a_metre_off_does_not() -> None:
    # GIVEN a zoom-16 cell over London
    b = region_boxes([quadkey(tile(-0.1, 51.5, 16))], 0)
    e, s, n = float(b.east[0]), float(b.south[0]), float(b.north[0])
    # THEN a box whose west edge is the cell's east edge reaches it; one 0.0001 degrees (7 m) east does not
    got = boxes_reaching([e, e + 1e-4], [s, s], [e + 0.01, e + 0.01], [n, n], b)
    assert got.tolist() == [True, False]


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), lons, lats), min_size=1, max_size=12), st.integers(0, 2),
       st.lists(st.tuples(st.floats(-540.0, 540.0), st.floats(0.0, 400.0), lats, st.floats(0.0, 120.0)), max_size=30))
def test_coarse_cells_and_wide_items_are_the_brute_force_too(cells: list[tuple[int, float, float]], ring: int,
                                                            items: list[tuple[float, float, float, float]]) -> None:
    # GIVEN cells of zoom 1 to 5 (a zoom-1 cell grown by a ring spans every longitude) and items up to 400 degrees
    # wide, written anywhere from -540 to 540
    boxes = region_boxes(sorted({quadkey(tile(lon, lat, z)) for z, lon, lat in cells}), ring)
    west = np.array([w for w, _, _, _ in items])
    east = west + np.array([d for _, d, _, _ in items])
    south = np.array([s for _, _, s, _ in items])
    north = np.minimum(90.0, south + np.array([h for _, _, _, h in items]))
    # THEN the selection is the brute force
    got = boxes_reaching(west, south, east, north, boxes)
    want = [any(_overlaps(west[i], south[i], east[i], north[i], *b) for b in
                zip(boxes.west, boxes.south, boxes.east, boxes.north, strict=True)) for i in range(len(items))]
    assert got.tolist() == want
