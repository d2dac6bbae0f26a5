"""The covered radius around a point (geo_service.pipeline.coverage) and the region-limited geocoder's exact answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geo_service.pipeline.coverage import Coverage
from geo_service.pipeline.extent import region_boxes
from geo_service.pipeline.transform import ReverseGeocoder
from geokernel.geo.tiles import Tile, bounds, children, parent, quadkey, quadkey_to_tile, tile


def test_the_catch_all_covers_the_world_and_a_point_outside_every_prefix_has_no_radius() -> None:
    # GIVEN the catch-all and a quarter of the world WHEN asked about points THEN infinite, then 0 outside
    assert Coverage([""]).radius_km(10.0, 10.0) == math.inf
    assert Coverage(["0"]).radius_km(90.0, 40.0) == 0.0


def test_the_radius_stays_inside_the_loaded_block() -> None:
    # GIVEN a zoom-10 tile over Beijing and its 8 neighbours loaded, and only the tile itself
    t = tile(116.40, 39.90, 10)
    ring = [quadkey(type(t)(t.x + dx, t.y + dy, t.z)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
    b = bounds(t)
    lon, lat = (b.west + b.east) / 2, (b.south + b.north) / 2
    # WHEN the radius around the tile's centre is asked
    block, alone = Coverage(ring).radius_km(lon, lat), Coverage([quadkey(t)]).radius_km(lon, lat)
    # THEN with the block it reaches past the tile (about 1.5 tiles) and without it half a tile at most
    half_height = (b.north - b.south) / 2 * 111.195
    assert 0 < alone <= half_height < block <= 3 * half_height


def test_a_region_limited_geocoder_answers_as_the_whole_world_does_near_its_edges() -> None:
    # GIVEN geocoders loaded for small regions (zoom 11 to 13, buffer ring 1) around big cities, and one holding
    # every place; points inside the regions and some outside them (strays)
    world = ReverseGeocoder()
    world.load_region([""], 0)
    rng = np.random.default_rng(7)
    for lon, lat, zoom in ((116.40, 39.90, 12), (2.35, 48.86, 13), (-74.0, 40.7, 11), (139.7, 35.7, 12)):
        qk = quadkey(tile(lon, lat, zoom))
        g = ReverseGeocoder()
        g.load_region([qk], 1)
        b = bounds(quadkey_to_tile(qk))
        w, h = b.east - b.west, b.north - b.south
        xs = rng.uniform(b.west - w, b.east + w, 150)
        ys = rng.uniform(b.south - h, b.north + h, 150)
        # WHEN both answer every point
        got = [g.apply({"lat": y, "lon": x}) for x, y in zip(xs, ys, strict=True)]
        want = [world.apply({"lat": y, "lon": x}) for x, y in zip(xs, ys, strict=True)]
        # THEN the answers are the same, point by point
        assert got == want, qk


@pytest.fixture(scope="module")
def world() -> ReverseGeocoder:
    g = ReverseGeocoder()
    g.load_region([""], 0)
    return g


def _mixed_region(cell: Tile) -> list[str]:
    """``cell``, the zoom+1 children of the cell two columns east and the zoom-1 parent of the one two rows south."""
    n = 1 << cell.z
    region = [quadkey(cell)] + [quadkey(c) for c in children(Tile((cell.x + 2) % n, cell.y, cell.z))]
    return region + ([quadkey(parent(Tile(cell.x, cell.y + 2, cell.z)))] if cell.y + 2 < n else [])


@pytest.mark.parametrize("zoom", [12, 13, 14, 15, 16])
def test_a_geocoder_of_fine_mixed_zoom_cells_answers_as_the_whole_world_does(world: ReverseGeocoder, zoom: int
                                                                             ) -> None:
    # GIVEN regions of mixed zooms around a cell of `zoom` (issue #56: places, unlike zones, have no extent, and a
    # nearest place farther than the loaded block reaches is asked of all places): in London, on the antimeridian
    # in Fiji, in Svalbard at 78 degrees and in the sea off Chukotka; random points in their cells and rings
    rng = np.random.default_rng(56 + zoom)
    for lon, lat in ((-0.1, 51.5), (179.99, -16.8), (15.63, 78.22), (-179.9, 66.0)):
        qks = _mixed_region(tile(lon, lat, zoom))
        g = ReverseGeocoder()
        g.load_region(qks, 1)
        boxes = region_boxes(qks, 1)
        pick = rng.integers(len(qks), size=40)
        ys = rng.uniform(boxes.south[pick], boxes.north[pick]).clip(-85.05, 85.05)
        xs = (rng.uniform(boxes.west[pick], boxes.east[pick]) + 180.0) % 360.0 - 180.0
        # WHEN the region's geocoder and the world's answer every point
        got = [g.apply({"lat": y, "lon": x}) for x, y in zip(xs, ys, strict=True)]
        want = [world.apply({"lat": y, "lon": x}) for x, y in zip(xs, ys, strict=True)]
        # THEN the answers are the same, point by point
        assert got == want, (zoom, lon, lat)
