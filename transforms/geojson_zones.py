"""Polygon zones from a GeoJSON FeatureCollection: ids, Polygon and MultiPolygon, holes, the antimeridian.

:func:`read_zones` reads a file (RFC 7946, https://datatracker.ietf.org/doc/html/rfc7946) into
:class:`PolygonZone` records: one per feature, its id, its polygon parts with longitudes within [-180, 180] (each part
split at the antimeridian when it crosses it), each part's bounding box and the zone's area. The geometry is planar in
longitude and latitude, as GeoJSON's is ("a line between two positions is a straight Cartesian line", RFC 7946 3.1.1).

Notes
-----
* **The zone id** is the feature's property named by ``id_property`` (``GEOFENCE_ID_PROPERTY``, default
  :data:`DEFAULT_ID_PROPERTY`: ``"id"``); a feature without it (or with it null) takes the Feature's own ``id`` member
  (RFC 7946 3.2). A string (non-empty) or an integer; anything else, a feature with neither, or two features with one
  id are refused, naming the feature's index and the value.
* **Geometry.** ``Polygon`` or ``MultiPolygon`` (any other type, or a null geometry, is refused). A polygon's first
  ring is its exterior, the others its holes: a point in a hole is not in the zone; a point on a boundary is. Rings
  must be closed with at least four positions; ring orientation is not checked (RFC 7946 says parsers should not
  reject a polygon for it). A self-intersecting polygon is refused with shapely's reason.
* **The antimeridian.** A ring is read as a walk: between two consecutive positions the longitude moves by less than
  180 degrees, so a jump of more (179 -> -179) is the ring crossing the antimeridian, not going round the world: each
  ring is unwrapped to continuous longitudes (179 -> 181), and longitudes written past 180 (or below -180) are read
  the same way. The polygon is then shifted by whole turns to start in [-180, 180) and cut at 180 into at most two
  parts, the eastern one shifted back by 360 degrees. So a feature written across the antimeridian, written with
  longitudes past 180, or already split there (RFC 7946 3.1.9) gives the same zone. Holes are unwrapped with their
  exterior. A ring whose longitudes wind a whole turn (it encircles a pole) and a polygon 360 degrees wide or more are
  refused: split them.
* **Bounding boxes** are per part (within [-180, 180]), so a zone across the antimeridian is two small boxes, not the
  whole world's width (:func:`geo_service.pipeline.extent.boxes_reaching`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import shapely
from shapely import affinity
from shapely.geometry import Polygon
from shapely.geometry.base import BaseGeometry

from geo_service.pipeline.transform import TransformError

DEFAULT_ID_PROPERTY = "id"
#: Geometry types a zone may have.
GEOMETRY_TYPES = ("Polygon", "MultiPolygon")


@dataclass(frozen=True)
class PolygonZone:
    """One zone of a GeoJSON file.

    Attributes
    ----------
    id : str
        The zone id (module Notes).
    parts : tuple of shapely Polygon
        The zone's polygons, longitudes within [-180, 180] (a polygon across the antimeridian is two parts).
    boxes : tuple of (west, south, east, north)
        Each part's bounding box, degrees.
    area : float
        The zone's planar area in square degrees (the order of a point's zones: smallest first).
    feature : int
        The feature's index in the file (for messages).
    """

    id: str
    parts: tuple[Polygon, ...]
    boxes: tuple[tuple[float, float, float, float], ...]
    area: float
    feature: int


def read_zones(path: Path, id_property: str = DEFAULT_ID_PROPERTY) -> tuple[PolygonZone, ...]:
    """The zones of the GeoJSON FeatureCollection at ``path`` (module Notes), in file order.

    Raises
    ------
    TransformError
        The file cannot be read, is not JSON or not a FeatureCollection, has no feature, or a feature is bad (names
        the file, the feature's index and the bad value).
    """
    where = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TransformError(f"cannot read GeoJSON zones {where!r}: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        got = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
        raise TransformError(f"{where!r}: must be a GeoJSON FeatureCollection, got type {got!r}")
    features = doc.get("features")
    if not isinstance(features, list) or not features:
        raise TransformError(f"{where!r}: a FeatureCollection with no features (got {features!r:.80})")
    zones: list[PolygonZone] = []
    seen: dict[str, int] = {}
    for i, feature in enumerate(features):
        zone = read_feature(feature, f"{where!r} feature #{i}", i, id_property)
        if zone.id in seen:
            raise TransformError(f"{where!r} feature #{i}: zone id {zone.id!r} is also feature #{seen[zone.id]}'s")
        seen[zone.id] = i
        zones.append(zone)
    return tuple(zones)


def read_feature(feature: Any, where: str, index: int, id_property: str = DEFAULT_ID_PROPERTY) -> PolygonZone:
    """One feature as a :class:`PolygonZone`; ``where`` names it in errors (:class:`TransformError`)."""
    if not isinstance(feature, dict) or feature.get("type") != "Feature":
        raise TransformError(f"{where}: must be a GeoJSON Feature, got {feature!r:.80}")
    zone_id = feature_id(feature, where, id_property)
    geometry = feature.get("geometry")
    if not isinstance(geometry, dict) or geometry.get("type") not in GEOMETRY_TYPES:
        got = geometry.get("type") if isinstance(geometry, dict) else geometry
        raise TransformError(f"{where} (zone {zone_id!r}): geometry must be one of {GEOMETRY_TYPES}, got {got!r}")
    coords = geometry.get("coordinates")
    polygons = [coords] if geometry["type"] == "Polygon" else coords
    if not isinstance(polygons, list) or not polygons:
        raise TransformError(f"{where} (zone {zone_id!r}): {geometry['type']} coordinates must be a non-empty list, "
                             f"got {coords!r:.80}")
    parts: list[Polygon] = []
    for k, rings in enumerate(polygons):
        parts += normalised_parts(rings, f"{where} (zone {zone_id!r}) polygon #{k}")
    return PolygonZone(zone_id, tuple(parts), tuple(_bounds(p) for p in parts), float(sum(p.area for p in parts)), index)


def _bounds(polygon: Polygon) -> tuple[float, float, float, float]:
    west, south, east, north = (float(v) for v in polygon.bounds)
    return west, south, east, north


def feature_id(feature: Mapping[str, Any], where: str, id_property: str = DEFAULT_ID_PROPERTY) -> str:
    """The zone id of a feature: its ``id_property`` property, else its ``id`` member (module Notes)."""
    props = feature.get("properties")
    value = props.get(id_property) if isinstance(props, dict) else None
    source = f"property {id_property!r}"
    if value is None:
        value, source = feature.get("id"), "Feature 'id' member"
    if value is None:
        raise TransformError(f"{where}: no zone id: no property {id_property!r} and no Feature 'id' member "
                             f"(GEOFENCE_ID_PROPERTY names the property)")
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise TransformError(f"{where}: zone id ({source}) must be a non-empty string or an integer, got {value!r}")
    return str(value)


def normalised_parts(rings: Any, where: str) -> list[Polygon]:
    """A GeoJSON polygon's rings as polygons within [-180, 180]: unwrapped, shifted, cut at 180 (module Notes)."""
    if not isinstance(rings, list) or not rings:
        raise TransformError(f"{where}: a polygon is a non-empty list of rings, got {rings!r:.80}")
    shell = unwrapped_ring(rings[0], f"{where} exterior ring")
    xs = [x for x, _ in shell]
    west, east = min(xs), max(xs)
    if east - west >= 360.0:
        raise TransformError(f"{where}: spans {east - west:g} degrees of longitude (360 or more): split it")
    turn = 360.0 * math.floor((west + 180.0) / 360.0)  # shift by whole turns so that west lies in [-180, 180)
    centre = (west + east) / 2.0 - turn
    holes = []
    for j, ring in enumerate(rings[1:], start=1):
        hole = unwrapped_ring(ring, f"{where} hole #{j}")
        hx = sum(x for x, _ in hole) / len(hole)
        shift = 360.0 * round((hx - turn - centre) / 360.0) + turn  # the whole turns that bring it by its exterior
        holes.append([(x - shift, y) for x, y in hole])
    polygon = Polygon([(x - turn, y) for x, y in shell], holes)
    if not polygon.is_valid:
        raise TransformError(f"{where}: not a valid polygon: {shapely.is_valid_reason(polygon)}")
    return _cut_at_antimeridian(polygon)


def unwrapped_ring(ring: Any, where: str) -> list[tuple[float, float]]:
    """A ring's positions ``(lon, lat)`` with continuous longitudes (each step under 180 degrees).

    Raises
    ------
    TransformError
        Fewer than four positions, a position that is not two or three finite numbers, a latitude out of [-90, 90],
        a ring not closed, or one whose longitudes wind a whole turn.
    """
    if not isinstance(ring, list) or len(ring) < 4:
        raise TransformError(f"{where}: a linear ring has at least 4 positions, got {ring!r:.80}")
    out: list[tuple[float, float]] = []
    for n, pos in enumerate(ring):
        if (not isinstance(pos, list) or len(pos) not in (2, 3)
                or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in pos)):
            raise TransformError(f"{where} position #{n}: must be [lon, lat] (finite numbers), got {pos!r:.80}")
        lon, lat = float(pos[0]), float(pos[1])
        if not -90.0 <= lat <= 90.0:
            raise TransformError(f"{where} position #{n}: latitude must be in [-90, 90], got {pos[1]!r}")
        if out:  # the step of least longitude change: whole turns off a step of more than 180 degrees
            lon -= 360.0 * round((lon - out[-1][0]) / 360.0)
        out.append((lon, lat))
    first, last = ring[0], ring[-1]
    if first[1] != last[1] or (float(first[0]) - float(last[0])) % 360.0 != 0.0:
        raise TransformError(f"{where}: a linear ring must end where it starts, got {ring[0]!r} ... {ring[-1]!r}")
    if abs(out[-1][0] - out[0][0]) > 180.0:
        raise TransformError(f"{where}: its longitudes wind a whole turn (it encircles a pole): split it")
    return out


_WEST_HALF = shapely.box(-180.0, -90.0, 180.0, 90.0)
_EAST_HALF = shapely.box(180.0, -90.0, 540.0, 90.0)


def _cut_at_antimeridian(polygon: Polygon) -> list[Polygon]:
    """``polygon`` (west edge in [-180, 180)) as parts within [-180, 180]: the part past 180 shifted west a turn."""
    if polygon.bounds[2] <= 180.0:
        return [polygon]
    parts = _polygons(polygon.intersection(_WEST_HALF))
    parts += [affinity.translate(p, xoff=-360.0) for p in _polygons(polygon.intersection(_EAST_HALF))]
    return parts


def _polygons(geometry: BaseGeometry) -> list[Polygon]:
    """The polygons of an intersection (a polygon, a multipolygon, or a collection with lines where it only touches)."""
    if isinstance(geometry, Polygon):
        return [geometry] if not geometry.is_empty else []
    return [g for g in getattr(geometry, "geoms", ()) if isinstance(g, Polygon) and not g.is_empty]


def zone_boxes(zones: Sequence[PolygonZone]) -> tuple[list[int], list[tuple[float, float, float, float]]]:
    """Every part's box with the index of its zone, flattened: ``(zone index per box, boxes)``."""
    owners = [i for i, z in enumerate(zones) for _ in z.boxes]
    return owners, [b for z in zones for b in z.boxes]
