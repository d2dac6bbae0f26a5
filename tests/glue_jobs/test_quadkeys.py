"""Tests for glue_jobs.quadkeys: the native quadkey expressions against mercantile and geokernel.geo.tiles."""

from __future__ import annotations

import warnings

import mercantile
import numpy as np
import pytest
from pyspark.sql import functions as F

from geokernel.geo import tiles
from geokernel.geo.tiles import EPSILON, MAX_LAT, arrays_to_quadkeys, tiles_xy
from glue_jobs.quadkeys import quadkey_expr
from tests.glue_jobs.conftest import spark4_only

pytestmark = pytest.mark.spark

N_RANDOM = 250_000  # a million took 30 s of the gate's busiest lane for no case the edges test misses


def _mercantile_qk(lon: float, lat: float, zoom: int) -> str:
    """mercantile's quadkey; where mercantile returns a tile outside the grid (x or y == 2**zoom, for a
    coordinate within EPSILON of the east/south edge) the capped geokernel.geo.tiles answer instead."""
    t = _mercantile_tile(lon, lat, zoom)
    if t.x >= 1 << zoom or t.y >= 1 << zoom:
        return tiles.quadkey(tiles.tile(lon, lat, zoom))
    return str(mercantile.quadkey(t))


def _mercantile_tile(lon: float, lat: float, zoom: int) -> mercantile.Tile:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # mercantile warns about its own out-of-grid tiles
        return mercantile.tile(lon, lat, zoom)


def test_reference_partitioner_tiles_equals_mercantile_on_a_sample() -> None:
    # GIVEN 20k random points (inside the mercator square, away from lon=180-EPSILON) at zooms 1..23
    rng = np.random.default_rng(7)
    lon = rng.uniform(-180, 180, 20_000)
    lat = rng.uniform(-MAX_LAT, MAX_LAT, 20_000)
    for zoom in (1, 5, 12, 18, 23):
        # WHEN both compute tiles
        x, y = tiles_xy(lon, lat, zoom)
        ref = [mercantile.tile(a, b, zoom) for a, b in zip(lon.tolist(), lat.tolist(), strict=True)]
        # THEN they agree everywhere, so geokernel.geo.tiles can stand in for mercantile on the random draw below
        assert x.tolist() == [t.x for t in ref]
        assert y.tolist() == [t.y for t in ref]
        assert arrays_to_quadkeys(x[:500], y[:500], zoom) == [mercantile.quadkey(t) for t in ref[:500]]


@spark4_only("the random draw runs on the Spark 4.0 line; the edges test checks 3.5")
def test_native_quadkey_matches_reference_on_250k_random_points(spark) -> None:
    # GIVEN 250k random points generated in Spark (lon in [-180, 180], lat beyond the mercator limit too)
    df = spark.range(N_RANDOM).select(
        (F.rand(11) * 360.0 - 180.0).alias("lon"),
        (F.rand(12) * 180.0 - 90.0).alias("lat"),
    )
    # WHEN the native expression computes quadkeys at zoom 23 and at zoom 7
    out = df.select("lon", "lat", quadkey_expr(F.col("lon"), F.col("lat"), 23).alias("qk23"),
                    quadkey_expr(F.col("lon"), F.col("lat"), 7).alias("qk7")).toPandas()
    lon, lat = out["lon"].to_numpy(), out["lat"].to_numpy()
    # THEN every one equals the (mercantile-equivalent) vectorised reference
    for zoom, col in ((23, "qk23"), (7, "qk7")):
        x, y = tiles_xy(lon, lat, zoom)
        expected = arrays_to_quadkeys(x, y, zoom)
        got = out[col].tolist()
        assert len(got) == N_RANDOM
        mismatches = [] if got == expected else [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
        assert not mismatches, f"zoom {zoom}: {len(mismatches)} mismatches, first {lon[mismatches[0]]!r}, " \
                               f"{lat[mismatches[0]]!r}: {got[mismatches[0]]!r} != {expected[mismatches[0]]!r}"


def _edge_points() -> list[tuple[float, float]]:
    pts = [(0.0, 0.0), (-180.0, 0.0), (180.0, 0.0), (180.0, MAX_LAT), (-180.0, -MAX_LAT), (179.999999, 85.0),
           (-179.999999, -85.0), (0.0, MAX_LAT), (0.0, -MAX_LAT), (0.0, 85.0511), (0.0, -85.0511),
           (13.4, 52.5), (-0.0, -0.0), (1e-15, -1e-15), (-1e-15, 1e-15), (90.0, 0.0), (-90.0, 0.0)]
    for zoom in (1, 2, 3, 8, 12, 17, 23):
        n = 1 << zoom
        for k in (1, n // 3, n // 2, n - 1):
            b = mercantile.bounds(mercantile.Tile(k, k, zoom))
            # exactly on tile edges, and a hair either side of them
            for dx in (0.0, 1e-12, -1e-12):
                pts.append((b.west + dx, b.north - dx))
                pts.append((b.east - dx, b.south + dx))
    return pts


def test_native_quadkey_matches_mercantile_on_edges_at_every_zoom(spark) -> None:
    # GIVEN tile-edge points (mercantile's EPSILON nudge matters), the antimeridian and the poles
    pts = _edge_points()
    df = spark.createDataFrame(pts, "lon double, lat double")
    # WHEN quadkeys are computed natively at every zoom 1..23
    cols = [quadkey_expr(F.col("lon"), F.col("lat"), z).alias(f"z{z}") for z in range(1, 24)]
    rows = df.select("lon", "lat", *cols).collect()
    # THEN each equals mercantile.quadkey(mercantile.tile(...)) exactly (out-of-grid quirk aside, see below)
    assert any(_mercantile_tile(lon, lat, 1).x >= 2 for lon, lat in pts)  # the quirk is exercised
    for r in rows:
        for z in range(1, 24):
            assert r[f"z{z}"] == _mercantile_qk(r["lon"], r["lat"], z), (r["lon"], r["lat"], z)


def test_poles_clamp_to_edge_rows_and_lon_180_is_the_last_column(spark) -> None:
    # GIVEN points at and beyond the mercator limit (mercantile raises at exactly +/-90) and lon=180
    df = spark.createDataFrame([(0.0, 90.0), (0.0, -90.0), (180.0, 89.0), (-180.0, -89.9)], "lon double, lat double")
    # WHEN quadkeys are computed at zoom 4
    got = [r[0] for r in df.select(quadkey_expr(F.col("lon"), F.col("lat"), 4)).collect()]
    # THEN the poles land in the first/last row, lon 180 in the last column (as geokernel.geo.tiles says)
    assert got == [tiles.quadkey(tiles.tile(lon, lat, 4)) for lon, lat in ((0, 90), (0, -90), (180, 89), (-180, -89.9))]
    assert got[0] == "1000" and got[1] == "3222" and got[2] == "1111" and got[3] == "2222"


def test_lon_within_epsilon_below_180_stays_in_the_last_column(spark) -> None:
    # GIVEN a longitude whose unit x is within EPSILON below 1 (mercantile would return column 2**z,
    # which its quadkey() silently wraps to column 0: a known mercantile quirk geokernel.geo.tiles caps)
    lon = 180.0 - 1e-12
    assert (lon / 360 + 0.5 + EPSILON) * 2 ** 10 >= 2 ** 10
    df = spark.createDataFrame([(lon, 10.0)], "lon double, lat double")
    # WHEN its quadkey is computed natively
    got = df.select(quadkey_expr(F.col("lon"), F.col("lat"), 10)).first()[0]
    # THEN it is the last column, like geokernel.geo.tiles
    assert got == tiles.quadkey(tiles.tile(lon, 10.0, 10))
    assert tiles.quadkey_to_tile(got).x == 2 ** 10 - 1


def test_quadkey_expr_rejects_a_bad_zoom() -> None:
    # GIVEN / WHEN / THEN a zoom outside [0, 30] is refused with its value in the message
    with pytest.raises(ValueError, match="31"):
        quadkey_expr(F.lit(0.0), F.lit(0.0), 31)
    with pytest.raises(ValueError, match="'3'"):
        quadkey_expr(F.lit(0.0), F.lit(0.0), "3")  # type: ignore[arg-type]
