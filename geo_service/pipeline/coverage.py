"""How far around a point the loaded places reach: when the nearest *loaded* place is the nearest place.

A region-limited geocoder (:class:`geo_service.pipeline.transform.ReverseGeocoder`) holds only the places under some quadkey
prefixes (the region's tiles plus a buffer ring). Its nearest loaded place, at great-circle distance ``d``, is the
nearest place of all when every point within ``d`` of the query lies under those prefixes. :class:`Coverage` gives
a radius that is certainly covered: the distance from the point to the edge of the 3 x 3 block of same-zoom tiles
around the prefix tile holding it, when all nine are loaded (else to the edge of its own tile; 0 when the point is
not under any prefix). A lookup whose answer lies farther than that radius must be answered from all places.

Notes
-----
The east-west distances use the cosine of the block's most poleward latitude (a parallel is shortest there), and
the radius is shrunk by :data:`SAFETY` for the flat-earth approximation inside one block, so the radius is never
larger than the true covered one. ``""`` (the catch-all prefix) covers the world: the radius is infinite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import Tile, bounds, quadkey_to_tile

#: Kilometres per degree of a great circle (mean Earth radius 6371.0088 km).
KM_PER_DEG = 6371.0088 * math.pi / 180.0
#: Latitude limit of the Web Mercator tiles.
MAX_LAT = 85.0511287798066
#: The covered radius is shrunk by this factor (approximations inside one block of tiles).
SAFETY = 0.98


class Coverage:
    """The loaded prefixes of a region-limited transform and the covered radius around a point.

    Examples
    --------
    >>> c = Coverage(["0"])                     # the north-west quarter of the world
    >>> round(c.radius_km(-90.0, 40.0)), c.radius_km(90.0, 40.0), c.covers(-90.0, 40.0, 500.0)
    (846, 0.0, True)
    """

    def __init__(self, prefixes: Iterable[str]) -> None:
        self.prefixes = frozenset(prefixes)
        self._world = "" in self.prefixes
        self._tiles: dict[int, set[tuple[int, int]]] = {}
        for p in self.prefixes:
            t = quadkey_to_tile(p)
            self._tiles.setdefault(t.z, set()).add((t.x, t.y))
        self._zooms = sorted(self._tiles)
        self._margins: dict[Tile, float] = {}  # holder tile -> radius every point inside it surely has (km)
        self._known: dict[Tile, tuple[float, float, float, float]] = {}  # holder tile -> loaded edges around it

    def covers(self, lon: float, lat: float, distance_km: float) -> bool:
        """True when every point within ``distance_km`` of the point lies under the loaded prefixes."""
        if self._world:
            return True
        t = self._holder(lon, lat)
        if t is None:
            return False
        margin = self._margins.get(t)
        if margin is None:
            margin = self._margins[t] = self._margin(t)
        return distance_km <= margin or distance_km <= self._radius(t, lon, lat)

    def covers_many(self, lon: npt.NDArray[np.float64], lat: npt.NDArray[np.float64],
                    distance_km: npt.NDArray[np.float64]) -> list[bool]:
        """:meth:`covers` of many points at once: the points within their holder tile's margin (found per distinct
        tile, vectorised) are covered; the others are asked of :meth:`covers` one by one."""
        n = len(lon)
        if self._world or not self._zooms:
            return [self._world] * n
        top = self._zooms[-1]
        size = 1 << top
        phi = np.radians(np.clip(lat, -MAX_LAT, MAX_LAT))
        x = np.clip(((lon + 180.0) / 360.0 * size).astype(np.int64), 0, size - 1)
        y = np.clip(((1.0 - np.arcsinh(np.tan(phi)) / math.pi) / 2.0 * size).astype(np.int64), 0, size - 1)
        codes, inv = np.unique(x * size + y, return_inverse=True)
        margins = np.array([self._margin_at(int(c) // size, int(c) % size) for c in codes.tolist()])
        inside = (distance_km <= margins[inv]).tolist()
        return [True if ok else self.covers(lo, la, km) for ok, lo, la, km
                in zip(inside, lon.tolist(), lat.tolist(), distance_km.tolist(), strict=True)]

    def _margin_at(self, x: int, y: int) -> float:
        """The margin of the prefix tile holding top-zoom tile ``(x, y)`` (0 when none holds it)."""
        top = self._zooms[-1]
        for z in self._zooms:
            shift = top - z
            if (x >> shift, y >> shift) in self._tiles[z]:
                t = Tile(x >> shift, y >> shift, z)
                margin = self._margins.get(t)
                if margin is None:
                    margin = self._margins[t] = self._margin(t)
                return margin
        return 0.0

    def radius_km(self, lon: float, lat: float) -> float:
        """A radius in km around the point that lies wholly under the loaded prefixes (0 when none is known)."""
        if self._world:
            return math.inf
        t = self._holder(lon, lat)
        return 0.0 if t is None else self._radius(t, lon, lat)

    def _holder(self, lon: float, lat: float) -> Tile | None:
        """The prefix tile holding the point, or None."""
        if not self._zooms:
            return None
        top = self._zooms[-1]
        n = 1 << top
        phi = math.radians(max(-MAX_LAT, min(MAX_LAT, lat)))
        x = min(n - 1, max(0, int((lon + 180.0) / 360.0 * n)))
        y = min(n - 1, max(0, int((1.0 - math.asinh(math.tan(phi)) / math.pi) / 2.0 * n)))
        for z in self._zooms:
            shift = top - z
            if (x >> shift, y >> shift) in self._tiles[z]:
                return Tile(x >> shift, y >> shift, z)
        return None

    def _loaded(self, x: int, y: int, z: int) -> bool:
        return any((x >> (z - zp), y >> (z - zp)) in self._tiles[zp] for zp in self._zooms if zp <= z)

    def _block_loaded(self, t: Tile) -> bool:
        """True when the 8 same-zoom neighbours of ``t`` (x wraps; no row beyond a pole) are all loaded."""
        n = 1 << t.z
        if t.y == 0 or t.y == n - 1:
            return False
        return all(self._loaded((t.x + dx) % n, t.y + dy, t.z) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dx or dy)

    def _edges(self, t: Tile) -> tuple[float, float, float, float]:
        """West, south, east, north of the loaded area known around ``t``: its 3 x 3 block, or ``t`` alone."""
        known = self._known.get(t)
        if known is None:
            known = self._known[t] = self._block_edges(t)
        return known

    def _block_edges(self, t: Tile) -> tuple[float, float, float, float]:
        b = bounds(t)
        if not self._block_loaded(t):
            return b.west, b.south, b.east, b.north
        width = b.east - b.west
        return (b.west - width, bounds(Tile(t.x, t.y + 1, t.z)).south, b.east + width,
                bounds(Tile(t.x, t.y - 1, t.z)).north)

    def _margin(self, t: Tile) -> float:
        """The radius every point of ``t`` has inside its block: one tile, or 0 when the block is not loaded."""
        if not self._block_loaded(t):
            return 0.0
        b = bounds(t)
        _, south, _, north = self._edges(t)
        poleward = math.cos(math.radians(max(abs(north), abs(south))))
        return min(b.south - south, north - b.north, (b.east - b.west) * poleward) * KM_PER_DEG * SAFETY

    def _radius(self, t: Tile, lon: float, lat: float) -> float:
        west, south, east, north = self._edges(t)
        poleward = math.cos(math.radians(max(abs(north), abs(south))))
        to_edge = min((north - lat) * KM_PER_DEG, (lat - south) * KM_PER_DEG,
                      (lon - west) * KM_PER_DEG * poleward, (east - lon) * KM_PER_DEG * poleward)
        return max(0.0, to_edge) * SAFETY
