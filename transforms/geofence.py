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

Optional, for speed: ``apply_batch(events)``, what ``apply`` returns for each event of a read batch, in order, computed
at once (here: one NumPy distance matrix for the batch instead of one array per event; the worker calls it when it is
there, ``geo_service.pipeline.transform.BatchTransform``).

Notes
-----
A zone is kept when its **extent** reaches the region: when some point of one of the region's cells, grown by
``buffer_ring`` rings of cells of that cell's own zoom, lies within ``radius_km`` of the zone's centre (great-circle
distance; :func:`geo_service.pipeline.extent.discs_reaching`). So a worker reports every zone containing a point of its
region or buffer, whatever the zoom of its cells (mixed in one region), the zone's size, the latitude or the
antimeridian: its answers are those of one process holding every zone. Before issue #56 a zone was kept by its
centre alone, and a 4 km zone centred two zoom-14 cells away was missed.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geo_service.pipeline.extent import discs_reaching, region_boxes
from geo_service.pipeline.transform import TransformError
from geokernel.geo.tiles import FloatArray

DEFAULT_CSV = Path(__file__).resolve().parent / "data" / "geofences.csv"
#: The setting naming the zones' CSV (default :data:`DEFAULT_CSV`).
ZONES_ENV = "GEOFENCES_CSV"
EARTH_RADIUS_KM = 6371.0088


def read_zones(path: Path) -> tuple[tuple[str, ...], FloatArray, FloatArray, FloatArray]:
    """The zones of a CSV (``id,name,lat,lon,radius_km``): ids, and latitude, longitude and radius arrays.

    Raises
    ------
    TransformError
        The file has no zones, or a row's lat, lon or radius is not a number in range (names the line and value).
    """
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = [(reader.line_num, row) for row in reader]
    if not rows:
        raise TransformError(f"{str(path)!r}: no geofences")
    values = np.zeros((len(rows), 3))
    limits = (("lat", -90.0, 90.0), ("lon", -180.0, 180.0), ("radius_km", 0.0, math.inf))
    for i, (line, row) in enumerate(rows):
        for j, (field, low, high) in enumerate(limits):
            raw = row.get(field)
            try:
                value = float(raw or "nan")
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and low <= value <= high):
                raise TransformError(f"{str(path)!r} line {line}: {field} must be a number in [{low}, {high}], "
                                     f"got {raw!r}")
            values[i, j] = value
    return tuple(row["id"] for _, row in rows), values[:, 0], values[:, 1], values[:, 2]


class Geofences:
    """Circular geofences of one region; ``loaded`` says how many (the worker logs it)."""

    def __init__(self) -> None:
        self.path = Path(os.environ.get(ZONES_ENV) or DEFAULT_CSV)
        self.ids: tuple[str, ...] = ()
        self.lat = self.lon = self.radius = np.zeros(0)
        self.loaded = 0

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Keep the zones whose circle reaches the region's cells grown by ``buffer_ring`` rings (module Notes)."""
        ids, lat, lon, radius = read_zones(self.path)
        keep = discs_reaching(lat, lon, radius, region_boxes(quadkeys, buffer_ring))
        self.ids = tuple(i for i, k in zip(ids, keep, strict=True) if k)
        self.lat, self.lon, self.radius = lat[keep], lon[keep], radius[keep]
        self.loaded = len(self.ids)

    def apply_batch(self, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`apply` of every event at once (the same zones in the same order: the same arithmetic per pair)."""
        return [{"zones": z} for z in self.zones_batch(events)]

    def zones_batch(self, events: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """The ``zones`` of every event, nearest first: one distance matrix for the batch."""
        if not self.loaded or not events:
            return [[] for _ in events]
        n = len(events)
        la = np.radians(np.fromiter((float(e["lat"]) for e in events), dtype=np.float64, count=n))[:, None]
        lo = np.radians(np.fromiter((float(e["lon"]) for e in events), dtype=np.float64, count=n))[:, None]
        cos_la = np.array([math.cos(x) for x in la[:, 0].tolist()])[:, None]  # math.cos, as apply's scalar
        zl, zo = np.radians(self.lat), np.radians(self.lon)
        h = np.sin((zl - la) / 2) ** 2 + cos_la * np.cos(zl) * np.sin((zo - lo) / 2) ** 2
        dist = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.minimum(h, 1.0)))
        hits = dist <= self.radius
        out: list[list[str]] = [[] for _ in range(n)]
        for row in np.flatnonzero(hits.any(axis=1)).tolist():
            inside = np.nonzero(hits[row])[0]
            out[row] = [self.ids[i] for i in inside[np.argsort(dist[row, inside], kind="stable")]]
        return out

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if not self.loaded:
            return {"zones": []}
        la, lo = math.radians(float(event["lat"])), math.radians(float(event["lon"]))
        zl, zo = np.radians(self.lat), np.radians(self.lon)
        h = np.sin((zl - la) / 2) ** 2 + math.cos(la) * np.cos(zl) * np.sin((zo - lo) / 2) ** 2
        dist = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.minimum(h, 1.0)))
        inside = np.nonzero(dist <= self.radius)[0]
        return {"zones": [self.ids[i] for i in inside[np.argsort(dist[inside], kind="stable")]]}
