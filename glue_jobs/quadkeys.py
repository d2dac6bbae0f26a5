"""Tile and quadkey of a point as native Spark expressions (``mercantile.tile`` + ``mercantile.quadkey`` semantics).

The same float operations, in the same order, as :mod:`geokernel.geo.tiles`, so the job's quadkeys equal the
partitioner's (and mercantile's, except where mercantile leaves the grid within ``EPSILON`` of the east or
south edge: both cap at the last tile). The job's hot path groups on the row-major :func:`cell_key` (a long)
and formats each cell's quadkey string once, after the aggregation (:func:`quadkey_of_cell`).
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from geokernel.geo.tiles import EPSILON, MAX_LAT, MAX_ZOOM


def tile_index(unit: Column, zoom: int) -> Column:
    """Tile index along one axis of a unit coordinate in [0, 1] (mercantile's rule).

    ``u <= 0`` -> 0, ``u >= 1`` -> ``2**zoom - 1``, else ``floor((u + EPSILON) * 2**zoom)``
    capped at ``2**zoom - 1`` (mercantile would return ``2**zoom`` for ``u`` within EPSILON
    below 1; geokernel.geo.tiles caps it, and so do we). Written as one clamp of the floor: for
    ``u <= 0`` the floor is 0 or negative (``EPSILON * 2**30 < 1``), for ``u >= 1`` it is at
    least ``2**zoom``, so no branch is needed.
    """
    n = float(1 << zoom)
    idx = F.floor((unit + F.lit(EPSILON)) * F.lit(n))
    return F.greatest(F.least(idx, F.lit(int(n) - 1)), F.lit(0)).cast("long")


def tile_xy(lon: Column, lat: Column, zoom: int) -> tuple[Column, Column]:
    """Tile ``x`` and ``y`` (long columns) of ``lon``/``lat`` degrees at ``zoom``.

    Latitudes are clamped to +/-MAX_LAT first (poles go to the edge rows); lon 180 lands in
    the last column. Same float operations, in the same order, as ``geokernel.geo.tiles``.
    """
    clamped = F.greatest(F.least(lat, F.lit(MAX_LAT)), F.lit(-MAX_LAT))
    ux = lon / F.lit(360.0) + F.lit(0.5)
    sinlat = F.sin(F.radians(clamped))
    uy = F.lit(0.5) - F.lit(0.25) * F.log((F.lit(1.0) + sinlat) / (F.lit(1.0) - sinlat)) / F.lit(math.pi)
    return tile_index(ux, zoom), tile_index(uy, zoom)


_SPREAD = (
    (16, 0x0000FFFF0000FFFF),
    (8, 0x00FF00FF00FF00FF),
    (4, 0x0F0F0F0F0F0F0F0F),
    (2, 0x3333333333333333),
    (1, 0x5555555555555555),
)


def _spread_bits(v: Column) -> Column:
    """Insert a zero bit above each of the low 32 bits of ``v`` (Morton interleave helper)."""
    for shift, mask in _SPREAD:
        v = v.bitwiseOR(F.shiftleft(v, shift)).bitwiseAND(F.lit(mask))
    return v


def morton_of_xy(x: Column, y: Column) -> Column:
    """Interleaved tile code (long): bit pairs ``(ybit, xbit)``, i.e. the quadkey read in base 4."""
    return _spread_bits(x).bitwiseOR(F.shiftleft(_spread_bits(y), 1))


def quadkey_of_code(code: Column, zoom: int) -> Column:
    """Quadkey string of an interleaved tile code (see :func:`morton_of_xy`) at ``zoom``."""
    if zoom == 0:
        return F.lit("")
    return F.lpad(F.conv(code.cast("string"), 10, 4), zoom, "0")


def quadkey_of_xy(x: Column, y: Column, zoom: int) -> Column:
    """Quadkey string of tile ``x``, ``y`` at ``zoom``: one digit ``2*ybit + xbit`` per level."""
    return quadkey_of_code(morton_of_xy(x, y), zoom)


def cell_key(x: Column, y: Column, zoom: int) -> Column:
    """Row-major cell key (long) of tile ``x``, ``y`` at ``zoom``: ``x << zoom | y``.

    One shift and one OR per event, against about twenty bit operations for the Morton
    code; the job groups on this key and formats each cell's quadkey once, after the
    aggregation (:func:`quadkey_of_cell`).
    """
    return F.shiftleft(x, zoom).bitwiseOR(y)


def quadkey_of_cell(key: Column, zoom: int) -> Column:
    """Quadkey string of a :func:`cell_key` at ``zoom``."""
    x = F.shiftright(key, zoom)
    y = key.bitwiseAND(F.lit((1 << zoom) - 1))
    return quadkey_of_xy(x, y, zoom)


def cell_key_expr(lon: Column, lat: Column, zoom: int) -> Column:
    """Native expression for the :func:`cell_key` of a point at ``zoom``.

    ``quadkey_of_cell(cell_key_expr(lon, lat, z), z) == quadkey_expr(lon, lat, z)``. Aggregating on
    this long and formatting the quadkey string once per cell afterwards is the job's hot path.
    """
    _check_zoom(zoom)
    x, y = tile_xy(lon, lat, zoom)
    return cell_key(x, y, zoom)


def quadkey_expr(lon: Column, lat: Column, zoom: int) -> Column:
    """Native Spark expression for ``mercantile.quadkey(mercantile.tile(lon, lat, zoom))``.

    Parameters
    ----------
    lon, lat : Column
        Degrees, already validated (finite, lon in [-180, 180]); lat is clamped here.
    zoom : int
        Zoom level in [0, 30].

    Returns
    -------
    Column
        String quadkey of ``zoom`` digits (``""`` at zoom 0).
    """
    _check_zoom(zoom)
    x, y = tile_xy(lon, lat, zoom)
    return quadkey_of_xy(x, y, zoom)


def _check_zoom(zoom: object) -> None:
    if isinstance(zoom, bool) or not isinstance(zoom, int) or not 0 <= zoom <= MAX_ZOOM:
        raise ValueError(f"quadkey: zoom must be an integer in [0, {MAX_ZOOM}], got {zoom!r}")


def with_cell_key(df: DataFrame, zoom: int, lon_col: str = "lon", lat_col: str = "lat",
                  out_col: str = "cell") -> DataFrame:
    """Return ``df`` with ``out_col`` = :func:`cell_key` of (``lon_col``, ``lat_col``) at ``zoom``.

    Computed in two projections (unit coordinates, then the key) so the trigonometry is
    evaluated once per row even where Spark would otherwise inline a reused sub-expression.
    """
    _check_zoom(zoom)
    cols = [c for c in df.columns if c != out_col]
    lat = F.greatest(F.least(F.col(lat_col), F.lit(MAX_LAT)), F.lit(-MAX_LAT))
    sinlat = F.sin(F.radians(lat))
    staged = df.select(
        *cols,
        (F.col(lon_col) / F.lit(360.0) + F.lit(0.5)).alias("_ux"),
        (F.lit(0.5) - F.lit(0.25) * F.log((F.lit(1.0) + sinlat) / (F.lit(1.0) - sinlat)) / F.lit(math.pi)).alias("_uy"),
    )
    return staged.select(*cols, cell_key(tile_index(F.col("_ux"), zoom), tile_index(F.col("_uy"), zoom), zoom)
                         .alias(out_col))


def with_quadkey(df: DataFrame, zoom: int, lon_col: str = "lon", lat_col: str = "lat",
                 out_col: str = "quadkey") -> DataFrame:
    """Return ``df`` with ``out_col`` = quadkey of (``lon_col``, ``lat_col``) at ``zoom`` (same as :func:`quadkey_expr`)."""
    coded = with_cell_key(df, zoom, lon_col, lat_col, "_qk_cell")
    cols = [c for c in coded.columns if c not in ("_qk_cell", out_col)]
    return coded.select(*cols, quadkey_of_cell(F.col("_qk_cell"), zoom).alias(out_col))
