"""Web-mercator tile and quadkey math, scalar and vectorised.

The conventions match :mod:`mercantile` (which the tests use as the reference):
tile ``x`` grows eastwards from the antimeridian, ``y`` grows southwards from the
north edge of the mercator square, and a quadkey has one digit ``0-3`` per zoom
level (digit = ``2 * ybit + xbit``). The empty quadkey ``""`` is the zoom-0 tile,
the whole world.

Notes
-----
* **Poles.** Web mercator stops at +/-85.0511287798 degrees. Latitudes beyond it
  (up to +/-90) are clamped to the first or last tile row, exactly what
  mercantile returns for them; mercantile raises at exactly +/-90, we clamp.
* **Antimeridian.** Longitude 180 belongs to the last tile column (as in
  mercantile). Neighbourhoods wrap around in ``x``: the tile east of the last
  column is column 0. They never wrap in ``y``: the first and last rows have only
  five neighbours.
* **Zoom limits.** Zoom 0 to :data:`MAX_ZOOM` (30). Integer tile codes use
  ``x << zoom | y``, which fits an ``int64`` up to zoom 31.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.errors import InvalidCoordinateError, InvalidQuadkeyError, InvalidTileError

MAX_ZOOM = 30
MAX_LAT = 85.0511287798066
EPSILON = 1e-14  # mercantile's nudge so a point on a tile's right/bottom edge goes to the next tile

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Tile(NamedTuple):
    """A web-mercator tile: column ``x``, row ``y``, zoom ``z``."""

    x: int
    y: int
    z: int


class Bounds(NamedTuple):
    """A tile's geographic bounds in degrees."""

    west: float
    south: float
    east: float
    north: float


def check_zoom(zoom: int, where: str = "zoom") -> int:
    """Return ``zoom`` if it is an int in [0, MAX_ZOOM], else raise InvalidTileError."""
    if isinstance(zoom, bool) or not isinstance(zoom, (int, np.integer)) or not 0 <= zoom <= MAX_ZOOM:
        raise InvalidTileError(f"{where}: zoom must be an integer in [0, {MAX_ZOOM}], got {zoom!r}")
    return int(zoom)


def check_tile(t: Tile) -> Tile:
    """Return ``t`` if its x and y lie in the grid of its zoom, else raise InvalidTileError."""
    z = check_zoom(t.z, "tile")
    n = 1 << z
    if not (0 <= t.x < n and 0 <= t.y < n):
        raise InvalidTileError(f"tile {tuple(t)!r} is outside the zoom-{z} grid [0, {n})")
    return t


def _check_lonlat(lon: float, lat: float) -> None:
    if not (isinstance(lon, (int, float)) and math.isfinite(lon) and -180.0 <= lon <= 180.0):
        raise InvalidCoordinateError(f"longitude must be a finite number in [-180, 180], got {lon!r}")
    if not (isinstance(lat, (int, float)) and math.isfinite(lat) and -90.0 <= lat <= 90.0):
        raise InvalidCoordinateError(f"latitude must be a finite number in [-90, 90], got {lat!r}")


def _unit_xy(lon: float, lat: float) -> tuple[float, float]:
    lat = max(-MAX_LAT, min(MAX_LAT, lat))
    x = lon / 360.0 + 0.5
    sinlat = math.sin(math.radians(lat))
    y = 0.5 - 0.25 * math.log((1.0 + sinlat) / (1.0 - sinlat)) / math.pi
    return x, y


def _unit_to_index(u: float, n: int) -> int:
    if u <= 0:
        return 0
    if u >= 1:
        return n - 1
    return min(n - 1, math.floor((u + EPSILON) * n))


def tile(lon: float, lat: float, zoom: int) -> Tile:
    """Return the tile containing a point.

    Parameters
    ----------
    lon, lat : float
        Degrees; ``lon`` in [-180, 180], ``lat`` in [-90, 90].
    zoom : int
        Zoom level in [0, MAX_ZOOM].

    Returns
    -------
    Tile

    Raises
    ------
    InvalidCoordinateError
        If ``lon`` or ``lat`` is not finite or out of range.

    Notes
    -----
    Latitudes beyond +/-85.0511 are clamped (poles go to the edge rows); lon 180
    lands in the last column, like mercantile.
    """
    _check_lonlat(lon, lat)
    z = check_zoom(zoom)
    n = 1 << z
    x, y = _unit_xy(float(lon), float(lat))
    return Tile(_unit_to_index(x, n), _unit_to_index(y, n), z)


def quadkey(t: Tile) -> str:
    """Return the quadkey of a tile (``""`` for the zoom-0 tile)."""
    check_tile(t)
    digits = []
    for i in range(t.z, 0, -1):
        mask = 1 << (i - 1)
        digits.append(str((1 if t.x & mask else 0) + (2 if t.y & mask else 0)))
    return "".join(digits)


def parse_quadkey(qk: object, where: str = "quadkey") -> str:
    """Return ``qk`` if it is a valid quadkey string, else raise InvalidQuadkeyError.

    ``where`` names the source (file and line, field) for the error message.
    """
    if not isinstance(qk, str):
        raise InvalidQuadkeyError(f"{where}: quadkey must be a string of digits 0-3, got {qk!r}")
    if len(qk) > MAX_ZOOM:
        raise InvalidQuadkeyError(f"{where}: quadkey {qk!r} is longer than zoom {MAX_ZOOM}")
    if qk.strip("0123") != "":
        raise InvalidQuadkeyError(f"{where}: quadkey {qk!r} has characters other than 0-3")
    return qk


def quadkey_to_tile(qk: str) -> Tile:
    """Return the tile of a quadkey; raise InvalidQuadkeyError if it is malformed."""
    parse_quadkey(qk)
    x = y = 0
    for ch in qk:
        d = ord(ch) - 48
        x = (x << 1) | (d & 1)
        y = (y << 1) | (d >> 1)
    return Tile(x, y, len(qk))


def parent(t: Tile, zoom: int | None = None) -> Tile:
    """Return the ancestor of ``t`` at ``zoom`` (default: one level up).

    Raises InvalidTileError for the zoom-0 tile or a ``zoom`` deeper than ``t.z``.
    """
    z = t.z - 1 if zoom is None else check_zoom(zoom)
    if z < 0 or z > t.z:
        raise InvalidTileError(f"tile {tuple(t)!r} has no ancestor at zoom {z!r}")
    shift = t.z - z
    return Tile(t.x >> shift, t.y >> shift, z)


def children(t: Tile) -> list[Tile]:
    """Return the four children of ``t`` in quadkey digit order 0, 1, 2, 3."""
    if t.z >= MAX_ZOOM:
        raise InvalidTileError(f"tile {tuple(t)!r} is at MAX_ZOOM and has no children")
    x, y, z = 2 * t.x, 2 * t.y, t.z + 1
    return [Tile(x, y, z), Tile(x + 1, y, z), Tile(x, y + 1, z), Tile(x + 1, y + 1, z)]


def neighbors(t: Tile) -> list[Tile]:
    """Return the up-to-8 tiles around ``t``, wrapping across the antimeridian.

    Notes
    -----
    At zoom 0 there are none; at zoom 1 wrapping makes east and west the same tile,
    so duplicates are removed. Rows never wrap (the poles are edges).
    """
    n = 1 << t.z
    out: list[Tile] = []
    seen = {(t.x, t.y)}
    for dy in (-1, 0, 1):
        y = t.y + dy
        if not 0 <= y < n:
            continue
        for dx in (-1, 0, 1):
            x = (t.x + dx) % n
            if (x, y) not in seen:
                seen.add((x, y))
                out.append(Tile(x, y, t.z))
    return out


def bounds(t: Tile) -> Bounds:
    """Return the west, south, east, north bounds of ``t`` in degrees."""
    check_tile(t)
    n = 1 << t.z

    def lat(y: int) -> float:
        return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * y / n))))

    return Bounds(t.x / n * 360.0 - 180.0, lat(t.y + 1), (t.x + 1) / n * 360.0 - 180.0, lat(t.y))


# ---------------------------------------------------------------------------
# Vectorised forms
# ---------------------------------------------------------------------------


def tiles_xy(lon: npt.ArrayLike, lat: npt.ArrayLike, zoom: int) -> tuple[IntArray, IntArray]:
    """Vectorised :func:`tile`: return tile ``x`` and ``y`` arrays at ``zoom``.

    Inputs must already be valid (finite, in range); use :func:`valid_lonlat_mask`
    to filter first. Latitudes are clamped to the mercator limit.
    """
    z = check_zoom(zoom)
    n = float(1 << z)
    lon_a = np.asarray(lon, dtype=np.float64)
    lat_a = np.clip(np.asarray(lat, dtype=np.float64), -MAX_LAT, MAX_LAT)
    ux = lon_a / 360.0 + 0.5
    sinlat = np.sin(np.radians(lat_a))
    uy = 0.5 - 0.25 * np.log((1.0 + sinlat) / (1.0 - sinlat)) / math.pi
    return _units_to_index(ux, n), _units_to_index(uy, n)


def bounds_arrays(x: npt.ArrayLike, y: npt.ArrayLike, z: npt.ArrayLike) -> tuple[FloatArray, ...]:
    """Vectorised :func:`bounds`: ``west, south, east, north`` arrays (degrees) of tiles given as arrays.

    ``z`` may be one zoom or one per tile. Raises InvalidTileError naming the first tile outside its zoom's grid.
    """
    xa, ya = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    za = np.broadcast_to(np.asarray(z, dtype=np.int64), xa.shape)
    n = np.left_shift(np.int64(1), np.clip(za, 0, MAX_ZOOM)).astype(np.float64)
    bad = (za < 0) | (za > MAX_ZOOM) | (xa < 0) | (xa >= n) | (ya < 0) | (ya >= n)
    if np.any(bad):
        i = int(np.argmax(bad))
        check_tile(Tile(int(xa[i]), int(ya[i]), int(za[i])))
    west, east = xa / n * 360.0 - 180.0, (xa + 1) / n * 360.0 - 180.0
    north = np.degrees(np.arctan(np.sinh(math.pi * (1.0 - 2.0 * ya / n))))
    south = np.degrees(np.arctan(np.sinh(math.pi * (1.0 - 2.0 * (ya + 1) / n))))
    return west, south, east, north


def _units_to_index(u: FloatArray, n: float) -> IntArray:
    idx = np.floor((u + EPSILON) * n)
    idx = np.where(u <= 0, 0.0, np.where(u >= 1, n - 1, idx))
    return np.clip(idx, 0, n - 1).astype(np.int64)


def valid_lonlat_mask(lon: npt.ArrayLike, lat: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Return True where lon/lat are finite and lon in [-180, 180], lat in [-90, 90]."""
    lon_a = np.asarray(lon, dtype=np.float64)
    lat_a = np.asarray(lat, dtype=np.float64)
    ok: npt.NDArray[np.bool_] = (
        np.isfinite(lon_a) & np.isfinite(lat_a) & (np.abs(lon_a) <= 180.0) & (np.abs(lat_a) <= 90.0)
    )
    return ok


def quadkeys_to_arrays(qks: Sequence[str] | npt.NDArray[np.str_]) -> tuple[IntArray, IntArray, IntArray]:
    """Vectorised :func:`quadkey_to_tile`: return ``x``, ``y``, ``z`` arrays.

    Raises InvalidQuadkeyError naming the first bad quadkey and its index.
    """
    n = len(qks)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    try:
        arr = np.asarray(qks, dtype=np.bytes_)  # one byte a digit (a quarter of the bytes of str_)
    except UnicodeEncodeError:
        bad = next(k for k, q in enumerate(qks) if not str(q).isascii())
        raise InvalidQuadkeyError(f"quadkey #{bad} {str(qks[bad])!r} has characters other than 0-3") from None
    width = max(1, arr.dtype.itemsize)
    chars = arr.view(np.uint8).reshape(n, width)
    if width > MAX_ZOOM:  # NUL padding counts in the item size, not in a quadkey's length
        lengths = np.char.str_len(arr)
        if int(lengths.max()) > MAX_ZOOM:
            bad = int(np.argmax(lengths > MAX_ZOOM))
            raise InvalidQuadkeyError(f"quadkey #{bad} {str(qks[bad])!r} is longer than zoom {MAX_ZOOM}")
        width = MAX_ZOOM
        chars = chars[:, :width]
    present = chars != 0
    z = np.count_nonzero(present, axis=1).astype(np.int64)
    digits = chars - np.uint8(48)  # the padding after a quadkey's last digit wraps to 208
    bad_rows = np.any(present & (digits > 3), axis=1) | np.any(~present[:, :-1] & present[:, 1:], axis=1)
    if np.any(bad_rows):
        bad = int(np.argmax(bad_rows))
        raise InvalidQuadkeyError(f"quadkey #{bad} {str(qks[bad])!r} has characters other than 0-3")
    # as if every quadkey had ``width`` digits (the padding adds 0 bits), then shifted down to its own zoom:
    # digit ``col`` is bit ``width - 1 - col`` of x (its low bit) and of y (its high bit); 2x the column loop
    digits[~present] = 0
    weights = np.left_shift(np.int64(1), np.arange(width - 1, -1, -1, dtype=np.int64))
    down = width - z
    x: IntArray = ((digits & 1) @ weights) >> down
    y: IntArray = ((digits >> 1) @ weights) >> down
    return x, y, z


#: Up to this many tiles :func:`arrays_to_quadkeys` makes every digit at once (a repair names many small regions:
#: 5x faster below 300 tiles); above it, one column of digits at a time (the (tiles x zoom) arrays cost more).
_SMALL = 1024


def arrays_to_quadkeys(x: npt.ArrayLike, y: npt.ArrayLike, zoom: int | npt.ArrayLike) -> list[str]:
    """Vectorised :func:`quadkey`: return the quadkeys of tiles given as arrays.

    ``zoom`` may be one int (all tiles at that zoom) or an array per tile.
    """
    xa = np.asarray(x, dtype=np.int64)
    ya = np.asarray(y, dtype=np.int64)
    za = np.broadcast_to(np.asarray(zoom, dtype=np.int64), xa.shape)
    if xa.size == 0:
        return []
    width = int(za.max())
    if width == 0:
        return [""] * xa.size
    if xa.size <= _SMALL:  # every digit in one broadcast: a few NumPy calls instead of a few per digit
        shift = za[:, None] - 1 - np.arange(width, dtype=np.int64)[None, :]
        s = np.maximum(shift, 0)
        digits = ((xa[:, None] >> s) & 1) + 2 * ((ya[:, None] >> s) & 1) + 48
        small = np.where(shift >= 0, digits, 0).astype(np.uint8)
        return [b.decode() for b in small.view(f"S{width}").ravel()]
    out = np.zeros((xa.size, width), dtype=np.uint8)
    for col in range(width):
        shift = za - 1 - col
        live = shift >= 0
        s = np.maximum(shift, 0)
        d = ((xa >> s) & 1) + 2 * ((ya >> s) & 1) + 48
        out[:, col] = np.where(live, d, 0)
    return [b.decode() for b in out.view(f"S{width}").ravel()]


def tile_codes(x: npt.ArrayLike, y: npt.ArrayLike, zoom: int) -> IntArray:
    """Return one int64 per tile at one zoom: ``x << zoom | y`` (unique within the zoom)."""
    z = check_zoom(zoom)
    return (np.asarray(x, dtype=np.int64) << z) | np.asarray(y, dtype=np.int64)


def unique_ints(a: npt.ArrayLike) -> IntArray:
    """The distinct values of a 1-D integer array, ascending (``np.unique`` without its hash path).

    Notes
    -----
    NumPy 2.3+ answers a plain ``np.unique`` on integers with a hash table and then sorts; on 1.5M int64 codes that
    took 1.45 s here against 0.02 s for a sort and a neighbour mask, and the compact build calls it once per gap
    filling round. The result is the same: sorted distinct values.
    """
    s = np.sort(np.asarray(a, dtype=np.int64), kind="stable")
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
