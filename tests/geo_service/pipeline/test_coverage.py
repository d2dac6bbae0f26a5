"""The covered radius around a point (geo_service.pipeline.coverage) and the region-limited geocoder's exact answers."""

from __future__ import annotations

import math

import numpy as np

from geo_service.pipeline.coverage import Coverage
from geo_service.pipeline.transform import ReverseGeocoder
from geokernel.geo.tiles import bounds, quadkey, quadkey_to_tile, tile


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
