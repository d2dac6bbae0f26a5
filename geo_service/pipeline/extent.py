"""Reference data with an extent: which discs (a centre and a radius: a geofence, a catchment) or boxes (a polygon's
bounding box) reach a region.

A transform that loads by region must keep every item that can contain a point of its region, not only the items
whose centre lies in it: a 4 km zone centred two zoom-14 cells away (1.5 km each at 51 degrees) covers the cell.
:func:`region_boxes` turns the region's cells (quadkeys of any zooms, mixed) into longitude/latitude boxes, each
grown by ``buffer_ring`` cells of its own zoom; :func:`discs_reaching` says which discs reach at least one box, by the
great-circle distance from each disc's centre to the nearest point of the box (:func:`box_distance_km`);
:func:`boxes_reaching` says which items' bounding boxes overlap at least one (an item whose shape is planar in
longitude and latitude, as a GeoJSON polygon is, can contain a point of a box only if its bounding box overlaps it).

Notes
-----
* **Exact, with a metre of slack.** A disc is kept when that distance is at most its radius plus :data:`SLACK_KM`
  (float rounding of the routing at cell edges and of the distances), so a point of the grown boxes inside a disc
  always finds the disc loaded; a disc reaching a box only within the slack is kept too (harmless: the join
  measures exact distances).
* **Antimeridian.** A box's longitudes are continuous (the west edge of a column-0 cell grown by a ring is below
  -180, the east edge of the last column above 180); distances take the longitude difference modulo 360. A box
  grown to 360 degrees or more spans every longitude.
* **Poles.** The first and last rows of cells reach the poles: web mercator clamps a point beyond +/-85.0511 into
  them (:func:`geokernel.geo.tiles.tile`). A ring never wraps over a pole.
* **Cost.** Per zoom of the region's cells, a KD-tree of the box centres answers each disc's nearest centre (inside
  the disc: kept, no more work; farther than the radius plus the largest box's circumradius: dropped); only the
  discs in between are measured against the boxes whose centres lie that near. Cells x discs are never formed.
* ``""`` (the catch-all quadkey, zoom 0) is the whole world: every disc reaches it.
* **Boxes** (:func:`boxes_reaching`) are compared in degrees, each item's box grown by :data:`SLACK_DEG` on every side
  (about a metre); longitudes overlap modulo 360. Per zoom the region's boxes are sorted by their west edge: the boxes
  an item can overlap have their west edge within a (circular) interval as wide as the item plus the zoom's widest
  box, found by a binary search, and only those are compared. Items x cells are never formed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from geo_service.pipeline.transform import EARTH_RADIUS_KM, TransformError, unit_vectors
from geokernel.geo.quadtree import by_zoom
from geokernel.geo.tiles import FloatArray, IntArray, bounds_arrays, quadkeys_to_arrays

#: A disc reaching a box within this many km more than its radius is kept too (float rounding at cell edges).
SLACK_KM = 0.001
#: An item's bounding box is grown by this many degrees on every side (:func:`boxes_reaching`): about a metre.
SLACK_DEG = 1e-5
_HAIR_DEG = 1e-9  # the candidate search's margin for float rounding (boxes_reaching)

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class RegionBoxes:
    """The cells of a region as longitude/latitude boxes (degrees), each grown by the buffer ring.

    Attributes
    ----------
    west, south, east, north : ndarray
        One box per cell; longitudes continuous across the antimeridian (``west`` may be below -180, ``east`` above
        180; ``east - west >= 360`` spans every longitude).
    zoom : ndarray
        The zoom of each cell (a ring is cells of the cell's own zoom).
    world : bool
        The region is the catch-all ``""``: every disc reaches it.
    """

    west: FloatArray
    south: FloatArray
    east: FloatArray
    north: FloatArray
    zoom: IntArray
    world: bool = False

    def __len__(self) -> int:
        return len(self.zoom)


def region_boxes(quadkeys: Sequence[str], buffer_ring: int) -> RegionBoxes:
    """The region's cells grown by ``buffer_ring`` rings of same-zoom cells, as boxes.

    Raises
    ------
    TransformError
        ``buffer_ring`` is negative.
    InvalidQuadkeyError
        A quadkey is malformed (names it and its index).

    Notes
    -----
    A cell whose ring reaches the first (last) row reaches the north (south) pole, where mercator puts every point
    beyond its edge. At zoom 1 with a ring, or zoom 0, a box spans every longitude.
    """
    if isinstance(buffer_ring, bool) or not isinstance(buffer_ring, int) or buffer_ring < 0:
        raise TransformError(f"buffer_ring must be an integer >= 0, got {buffer_ring!r}")
    x, y, z = quadkeys_to_arrays(list(quadkeys))
    if np.any(z == 0):
        empty = np.zeros(0)
        return RegionBoxes(empty, empty, empty, empty, np.zeros(0, dtype=np.int64), world=True)
    last = np.left_shift(np.int64(1), z) - 1
    west, _, east, _ = bounds_arrays(x, y, z)
    grow = buffer_ring * (east - west)
    top, bottom = y - buffer_ring, y + buffer_ring
    north = np.where(top <= 0, 90.0, bounds_arrays(x, np.clip(top, 0, last), z)[3])
    south = np.where(bottom >= last, -90.0, bounds_arrays(x, np.clip(bottom, 0, last), z)[1])
    return RegionBoxes(west - grow, south, east + grow, north, z)


def _angle(lat1: FloatArray, lat2: FloatArray, dlon: FloatArray) -> FloatArray:
    """Great-circle angle (radians) between points at latitudes ``lat1``, ``lat2`` and longitude difference ``dlon``
    (radians; haversine, accurate at small distances)."""
    h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(dlon / 2) ** 2
    out: FloatArray = 2.0 * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))
    return out


def _to_meridian(phi: FloatArray, dlon: FloatArray, south: FloatArray, north: FloatArray) -> FloatArray:
    """Angle from a point at latitude ``phi`` to the arc of the meridian ``dlon`` away between ``south`` and
    ``north`` (radians): along the arc the cosine of the distance is a sinusoid of latitude, largest at its peak
    ``star`` when that is on the arc, else at an end."""
    star = np.arctan2(np.sin(phi), np.cos(phi) * np.cos(dlon))
    ends = np.minimum(_angle(phi, south, dlon), _angle(phi, north, dlon))
    return np.minimum(ends, _angle(phi, np.clip(star, south, north), dlon))


def box_distance_km(lat: npt.ArrayLike, lon: npt.ArrayLike, west: npt.ArrayLike, south: npt.ArrayLike,
                    east: npt.ArrayLike, north: npt.ArrayLike) -> FloatArray:
    """Great-circle distance (km) from each point to the nearest point of its box (0 inside); arrays broadcast.

    Notes
    -----
    A point between the box's meridians is nearest to the box along its own meridian (a latitude difference is the
    shortest way to change latitude). Any other point is nearest to one of the two meridian edges: on a parallel
    edge the nearest point is the one of least longitude difference, an end of the edge.
    """
    la, lo, w, s, e, n = (np.asarray(a, dtype=np.float64) for a in (lat, lon, west, south, east, north))
    width = e - w
    between = (width >= 360.0) | (np.mod(lo - w, 360.0) <= width)
    phi, s_r, n_r = np.radians(la), np.radians(s), np.radians(n)
    along = np.maximum(0.0, np.maximum(s_r - phi, phi - n_r))
    edges = np.minimum(_to_meridian(phi, np.radians(lo - w), s_r, n_r), _to_meridian(phi, np.radians(lo - e), s_r, n_r))
    out: FloatArray = np.where(between, along, edges) * EARTH_RADIUS_KM
    return out


def _chord(angle: FloatArray) -> FloatArray:
    """Chord length on the unit sphere of a great-circle angle (capped at the antipode)."""
    out: FloatArray = 2.0 * np.sin(np.minimum(angle, math.pi) / 2.0)
    return out


def _circumradius(boxes: RegionBoxes, idx: IntArray, c_lat: FloatArray, c_lon: FloatArray) -> FloatArray:
    """Angle from each box's centre to its farthest point (radians): a corner when the box spans at most 180 degrees
    of longitude (the distance along each edge is then largest at an end), else the antipode."""
    phi = np.radians(c_lat)
    far = np.zeros(len(idx))
    for edge_lat in (boxes.south[idx], boxes.north[idx]):
        for edge_lon in (boxes.west[idx], boxes.east[idx]):
            far = np.maximum(far, _angle(phi, np.radians(edge_lat), np.radians(edge_lon - c_lon)))
    out: FloatArray = np.where(boxes.east[idx] - boxes.west[idx] > 180.0, math.pi, far)
    return out


def discs_reaching(lat: npt.ArrayLike, lon: npt.ArrayLike, radius_km: npt.ArrayLike, boxes: RegionBoxes,
                   slack_km: float = SLACK_KM) -> BoolArray:
    """Per disc (centre ``lat``, ``lon`` in degrees, ``radius_km``): does it reach at least one box?

    Parameters
    ----------
    lat, lon, radius_km : array_like
        One value per disc, valid (finite, in range, radius >= 0): the caller checks its data.
    boxes : RegionBoxes
        The region (:func:`region_boxes`).
    slack_km : float
        Kept also when the nearest box is at most this much farther than the radius.

    Returns
    -------
    ndarray of bool
        True for a disc whose distance to some box is at most its radius plus ``slack_km``.
    """
    la, lo = np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
    reach = (np.asarray(radius_km, dtype=np.float64) + slack_km) / EARTH_RADIUS_KM
    if boxes.world:
        return np.ones(len(la), dtype=bool)
    out = np.zeros(len(la), dtype=bool)
    if len(la) == 0:
        return out
    xyz = unit_vectors(la, lo)
    for _, in_zoom in by_zoom(boxes.zoom):
        pending = np.flatnonzero(~out)
        if len(pending) == 0:
            break
        out[pending] = _reaching_zoom(la[pending], lo[pending], xyz[pending], reach[pending], boxes,
                                      np.flatnonzero(in_zoom))
    return out


def _reaching_zoom(lat: FloatArray, lon: FloatArray, xyz: FloatArray, reach: FloatArray, boxes: RegionBoxes,
                   idx: IntArray) -> BoolArray:
    """Per disc (``reach``: radius plus slack, radians): does it reach one of the boxes ``idx`` (cells of one zoom)?"""
    c_lat = (boxes.south[idx] + boxes.north[idx]) / 2.0
    c_lon = (boxes.west[idx] + boxes.east[idx]) / 2.0
    far = float(_circumradius(boxes, idx, c_lat, c_lon).max()) + 1e-12
    tree = cKDTree(unit_vectors(c_lat, c_lon))
    chord, _ = tree.query(xyz)
    nearest = 2.0 * np.arcsin(np.minimum(np.asarray(chord, dtype=np.float64) / 2.0, 1.0))
    out = nearest <= reach  # a box's centre lies in the disc
    maybe = np.flatnonzero(~out & (nearest <= reach + far))  # a box whose centre is that near may reach in
    if len(maybe) == 0:
        return out
    near = tree.query_ball_point(xyz[maybe], r=_chord(reach[maybe] + far), return_sorted=False)
    counts = np.fromiter((len(c) for c in near), dtype=np.int64, count=len(maybe))
    disc = np.repeat(np.arange(len(maybe)), counts)
    box = idx[np.concatenate([np.asarray(c, dtype=np.int64) for c in near])]
    pick = maybe[disc]
    dist = box_distance_km(lat[pick], lon[pick], boxes.west[box], boxes.south[box], boxes.east[box], boxes.north[box])
    out[maybe] = np.bincount(disc[dist / EARTH_RADIUS_KM <= reach[pick]], minlength=len(maybe)) > 0
    return out


def boxes_reaching(west: npt.ArrayLike, south: npt.ArrayLike, east: npt.ArrayLike, north: npt.ArrayLike,
                   boxes: RegionBoxes, slack_deg: float = SLACK_DEG) -> BoolArray:
    """Per item box (degrees), does it overlap at least one of the region's boxes?

    Parameters
    ----------
    west, south, east, north : array_like
        One box per item (a polygon's bounding box): longitudes continuous (``west`` may be below -180 or ``east``
        above 180 for an item across the antimeridian; ``east - west >= 360`` spans every longitude), ``south <=
        north`` within [-90, 90]. The caller checks its data.
    boxes : RegionBoxes
        The region (:func:`region_boxes`).
    slack_deg : float
        Each item's box is grown by this much on every side first.

    Returns
    -------
    ndarray of bool
        True for an item whose (grown) box shares a point with some region box, longitudes modulo 360.

    Notes
    -----
    Exact for items whose shape is planar in longitude and latitude (a GeoJSON polygon: its edges are straight lines
    in those coordinates): a point of a region box inside the item lies in the item's bounding box, so the boxes
    overlap. An item whose box overlaps but whose shape does not reach the region is kept too (harmless: the join
    tests the points). Boxes touching at an edge overlap.
    """
    w, s, e, n = (np.asarray(a, dtype=np.float64) for a in (west, south, east, north))
    w, s, e, n = w - slack_deg, s - slack_deg, e + slack_deg, n + slack_deg
    if boxes.world:
        return np.ones(len(w), dtype=bool)
    out = np.zeros(len(w), dtype=bool)
    for _, in_zoom in by_zoom(boxes.zoom):
        pending = np.flatnonzero(~out)
        if len(pending) == 0:
            break
        out[pending] = _boxes_zoom(w[pending], s[pending], e[pending], n[pending], boxes, np.flatnonzero(in_zoom))
    return out


def _boxes_zoom(w: FloatArray, s: FloatArray, e: FloatArray, n: FloatArray, boxes: RegionBoxes,
                idx: IntArray) -> BoolArray:
    """Per item, does it overlap one of the boxes ``idx`` (cells of one zoom)? Candidates by their west edge, then
    the exact test (:func:`boxes_reaching` Notes)."""
    b_w = np.mod(boxes.west[idx] + 180.0, 360.0) - 180.0  # in [-180, 180)
    order = np.argsort(b_w, kind="stable")
    idx, b_w = idx[order], b_w[order]
    b_width = boxes.east[idx] - boxes.west[idx]
    widest = float(b_width.max())
    a_w = np.mod(w + 180.0, 360.0) - 180.0
    # the west edges of the boxes an item may overlap: [a_w - widest, a_w + (e - w)], a hair wider (the exact test
    # below decides; the hair keeps a box whose edge rounding puts just outside among the candidates)
    span = (e - w) + widest + 2 * _HAIR_DEG
    lo = np.mod(a_w - widest - _HAIR_DEG + 180.0, 360.0) - 180.0
    everything = span >= 360.0
    first = np.where(everything, 0, np.searchsorted(b_w, lo, side="left"))
    last = np.where(everything, len(idx), np.searchsorted(b_w, lo + span, side="right"))
    wraps = ~everything & (lo + span >= 180.0)  # the interval runs on past 180: its rest starts at -180
    rest = np.where(wraps, np.searchsorted(b_w, lo + span - 360.0, side="right"), 0)
    item, pos = _spans(np.concatenate([first, np.zeros(len(w), dtype=np.int64)]),
                       np.concatenate([last, rest]))
    item = item % len(w) if len(w) else item
    box = idx[pos]
    width = e[item] - w[item]
    lat_ok = (boxes.south[box] <= n[item]) & (boxes.north[box] >= s[item])
    lon_ok = ((width >= 360.0) | (b_width[pos] >= 360.0) | (np.mod(boxes.west[box] - w[item], 360.0) <= width)
              | (np.mod(w[item] - boxes.west[box], 360.0) <= b_width[pos]))
    return np.bincount(item[lat_ok & lon_ok], minlength=len(w)) > 0


def _spans(starts: IntArray, stops: IntArray) -> tuple[IntArray, IntArray]:
    """``(row, position)`` of every position in ``range(starts[row], stops[row])`` (an empty range gives none)."""
    counts = np.maximum(stops - starts, 0)
    row = np.repeat(np.arange(len(starts)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return row, np.repeat(starts, counts) + offsets
