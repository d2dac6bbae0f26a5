"""A worked example of your own geo transform: a spatial join of events against circular geofences.

Each event gets ``zones``: the ids of the geofences (airports, depots, stadiums...) whose circle
contains it, nearest first. The zones come from a CSV (``id,name,lat,lon,radius_km``;
``GEOFENCES_CSV`` names it, default ``transforms/data/geofences.csv``) and a worker keeps only
the zones of its own region, so its memory follows its region as the spec moves.

The two methods are the whole interface (``geo_service.pipeline.transform.GeoTransform``):

* ``load_region(quadkeys, buffer_ring)``: once per region, before the worker reports ready;
  ``quadkeys`` are the region's cells (``""`` = the whole world, the catch-all), ``buffer_ring``
  how many rings of neighbour cells to load around each so events near the border find what is
  just across it;
* ``apply(event)``: per event (``lat``, ``lon``, ``entity_id``, ``event_id`` already validated),
  returns the fields to add to the enriched record. Keep it fast: it runs on the hot path.

Notes
-----
A zone is kept when its centre lies in the region or its buffer ring, so a zone larger than a
buffer cell may be missed by a worker whose region only touches its rim; size ``buffer_ring``
(or the grid zoom) for the largest zone.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geo_service.pipeline.transform import region_prefixes
from geokernel.geo.tiles import arrays_to_quadkeys, tiles_xy

DEFAULT_CSV = Path(__file__).resolve().parent / "data" / "geofences.csv"
EARTH_RADIUS_KM = 6371.0088
LOOKUP_ZOOM = 20  # zone centres are indexed at this zoom; any region zoom up to it works


class Geofences:
    """Circular geofences of one region; ``loaded`` says how many (the worker logs it)."""

    def __init__(self) -> None:
        self.path = Path(os.environ.get("GEOFENCES_CSV") or DEFAULT_CSV)
        self.ids: tuple[str, ...] = ()
        self.lat = self.lon = self.radius = np.zeros(0)
        self.loaded = 0

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        with self.path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise ValueError(f"{self.path}: no geofences")
        lat = np.array([float(r["lat"]) for r in rows])
        lon = np.array([float(r["lon"]) for r in rows])
        x, y = tiles_xy(lon, lat, LOOKUP_ZOOM)
        centres = arrays_to_quadkeys(x, y, LOOKUP_ZOOM)
        prefixes = region_prefixes(quadkeys, buffer_ring)
        keep = np.array([any(c.startswith(p) for p in prefixes) for c in centres], dtype=bool)
        self.ids = tuple(r["id"] for r, k in zip(rows, keep, strict=True) if k)
        self.lat, self.lon = lat[keep], lon[keep]
        self.radius = np.array([float(r["radius_km"]) for r in rows])[keep]
        self.loaded = len(self.ids)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if not self.loaded:
            return {"zones": []}
        la, lo = math.radians(float(event["lat"])), math.radians(float(event["lon"]))
        zl, zo = np.radians(self.lat), np.radians(self.lon)
        h = np.sin((zl - la) / 2) ** 2 + math.cos(la) * np.cos(zl) * np.sin((zo - lo) / 2) ** 2
        dist = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.minimum(h, 1.0)))
        inside = np.nonzero(dist <= self.radius)[0]
        return {"zones": [self.ids[i] for i in inside[np.argsort(dist[inside], kind="stable")]]}
