"""Polygon geofences: a spatial join of events against GeoJSON polygons, and ENTER / EXIT / DWELL per entity.

:class:`PolygonZones` is the stateless join: each event gets ``zones``, the ids of the zones whose polygon contains
it (a point on a boundary is in; a point in a hole is not), smallest zone first (then by id). :class:`GeofencePolygons`
is the stateful transform over it (``GEO_TRANSFORM=transforms.geofence_polygons:GeofencePolygons``): ``zones``,
``transitions``, ``speed_mps``, ``heading_deg`` and ``late`` per event, with the per-entity state and every rule of
:mod:`transforms.zone_state` (shared with the circles of :class:`transforms.geofence_state.GeofenceState`).

Settings (environment variables, listed in :attr:`GeofencePolygons.settings` so the local loop passes them on):

* ``GEOFENCES_GEOJSON``: the GeoJSON FeatureCollection of the zones (default :data:`DEFAULT_GEOJSON`: polygons around
  the cities the local loop replays, made by ``scripts/make_city_polygons.py``);
* ``GEOFENCE_ID_PROPERTY``: the feature property holding a zone's id (default ``id``; a feature without it takes its
  Feature ``id`` member: :mod:`transforms.geojson_zones` states the rules, with those for holes, MultiPolygons and the
  antimeridian);
* ``GEOFENCE_DWELL_S``: seconds of event time inside a zone before its DWELL (default 300);
* ``GEOFENCE_TIME_FIELD``: the event field an event's time comes from (default ``ts``, read as the worker's ``ts_ms``;
  the local replay of a recorded log sets ``recorded_utc``: :mod:`transforms.zone_state`);
* ``GEOFENCE_EVENT_BUS``: read by the worker, not the transform: when set, the worker puts every transition on that
  EventBridge bus (:mod:`geo_service.pipeline.geofence_events`).

Notes
-----
**Zones by extent.** A worker keeps the zones one of whose parts' bounding boxes overlaps one of its region's cells
grown by ``buffer_ring`` rings of cells of the cell's own zoom (:func:`geo_service.pipeline.extent.boxes_reaching`).
A GeoJSON polygon is planar in longitude and latitude, so a polygon containing a point of a cell has a bounding box
overlapping the cell's: a worker answers every point of its region and buffer exactly as one process holding every
zone, whatever the zooms of its cells, the zones' sizes, the latitude or the antimeridian (a zone across it is cut
into two parts there, each with its own box).

**The join** is a shapely ``STRtree`` over the kept zones' parts (one entry per part, so a zone across the
antimeridian is two small envelopes, not one spanning the world), queried with the event's point (``intersects``).
The zone file is parsed once per process and file version (a worker building a transform per region reuses it).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from shapely.strtree import STRtree

from geo_service.pipeline.extent import boxes_reaching, region_boxes
from geo_service.pipeline.geofence_events import EVENT_BUS_ENV
from transforms.geojson_zones import DEFAULT_ID_PROPERTY, PolygonZone, read_zones, zone_boxes
from transforms.zone_state import DWELL_ENV, TIME_ENV, ZoneStates

DEFAULT_GEOJSON = Path(__file__).resolve().parent / "data" / "city_polygons.geojson"
GEOJSON_ENV = "GEOFENCES_GEOJSON"
ID_PROPERTY_ENV = "GEOFENCE_ID_PROPERTY"


@functools.lru_cache(maxsize=4)
def _zones(path: str, id_property: str, version: tuple[int, int]) -> tuple[PolygonZone, ...]:
    """The zones of a file, parsed once per (path, id property, modification time and size)."""
    return read_zones(Path(path), id_property)


def zones_of(path: Path, id_property: str) -> tuple[PolygonZone, ...]:
    """The zones of the GeoJSON file at ``path`` (cached while the file is unchanged).

    Raises
    ------
    TransformError
        The file is missing or bad (:func:`transforms.geojson_zones.read_zones` names what).
    """
    try:
        stat = path.stat()
    except OSError:
        return read_zones(path, id_property)  # raises, naming the file
    return _zones(str(path), id_property, (stat.st_mtime_ns, stat.st_size))


class PolygonZones:
    """The polygon zones of one region; ``loaded`` says how many (the worker logs it)."""

    def __init__(self) -> None:
        self.path = Path(os.environ.get(GEOJSON_ENV) or DEFAULT_GEOJSON)
        self.id_property = os.environ.get(ID_PROPERTY_ENV) or DEFAULT_ID_PROPERTY
        self.zones: tuple[PolygonZone, ...] = ()
        self._owner = np.zeros(0, dtype=np.int64)  # the zone (index in self.zones) of each part in the tree
        self._tree: STRtree | None = None
        self.loaded = 0

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Keep the zones one of whose parts' boxes overlaps a cell of the region grown by ``buffer_ring`` rings
        (module Notes), ordered smallest first (then by id)."""
        every = zones_of(self.path, self.id_property)
        owners, boxes = zone_boxes(every)
        b = np.array(boxes, dtype=np.float64).reshape(-1, 4)
        reach = boxes_reaching(b[:, 0], b[:, 1], b[:, 2], b[:, 3], region_boxes(quadkeys, buffer_ring))
        kept = sorted({owners[i] for i in np.flatnonzero(reach)}, key=lambda i: (every[i].area, every[i].id))
        self.zones = tuple(every[i] for i in kept)
        parts = [(k, p) for k, z in enumerate(self.zones) for p in z.parts]
        self._owner = np.array([k for k, _ in parts], dtype=np.int64)
        self._tree = STRtree([p for _, p in parts]) if parts else None
        self.loaded = len(self.zones)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """``{"zones": [...]}``: the ids of the loaded zones containing the event's point, smallest first."""
        if self._tree is None:
            return {"zones": []}
        hits = self._tree.query(shapely.Point(float(event["lon"]), float(event["lat"])), predicate="intersects")
        return {"zones": [self.zones[k].id for k in np.unique(self._owner[hits])]}

    def zones_batch(self, events: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """The ``zones`` of every event, as :meth:`apply` gives them, from one tree query for the batch."""
        if self._tree is None or not events:
            return [[] for _ in events]
        n = len(events)
        lon = np.fromiter((float(e["lon"]) for e in events), dtype=np.float64, count=n)
        lat = np.fromiter((float(e["lat"]) for e in events), dtype=np.float64, count=n)
        point, part = self._tree.query(shapely.points(lon, lat), predicate="intersects")
        owners: list[set[int]] = [set() for _ in range(n)]
        for i, k in zip(point.tolist(), self._owner[part].tolist(), strict=True):
            owners[i].add(k)
        return [[self.zones[k].id for k in sorted(ks)] for ks in owners]


class GeofencePolygons(ZoneStates[PolygonZones]):
    """Polygon geofence transitions and speed per entity (module docstring; :mod:`transforms.zone_state` states
    every rule).

    Examples
    --------
    >>> t = GeofencePolygons(); t.load_region([""], 1)
    >>> t.apply({"entity_id": "a", "ts": 0, "lat": 35.6895, "lon": 139.6917})["zones"]
    ['TOKYO-JP-CORE', 'JP-CORES']
    """

    #: Environment variables it reads (and the worker's sink setting): the local loop passes them on to its workers.
    settings: tuple[str, ...] = (GEOJSON_ENV, ID_PROPERTY_ENV, DWELL_ENV, TIME_ENV, EVENT_BUS_ENV)

    def __init__(self) -> None:
        super().__init__(PolygonZones())
