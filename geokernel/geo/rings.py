"""The union of quadtree squares as polygons: outer rings and holes, traced in pure NumPy.

:func:`square_polygons` dissolves a set of disjoint quadtree squares (mixed zooms) into
the polygons they cover, so a partition's GeoJSON is a few valid polygons rather than a
``MultiPolygon`` of squares that share edges (which OGC validity rejects as
self-intersection).

How: every square contributes its four edges, oriented counter-clockwise on a
north-up integer grid at the deepest zoom. On each grid line the edges' intervals are
summed (a sweep over sorted end points): where two squares meet their edges cancel, and
what remains is the boundary, each piece oriented with the interior on its left. The
pieces are chained into rings taking the left-most turn at every vertex, so squares
that touch only at a corner become separate rings (never one ring touching itself).
A ring that touches itself (a pocket of the complement meeting the rest of it at a
corner) is split there into simple loops. Counter-clockwise loops are shells (one per
edge-connected piece), clockwise ones holes; each hole goes to the smallest shell
containing a point just outside it, which is the shell of the piece around it.

Notes
-----
* **Exact.** Coordinates are the squares' own corners (no simplification beyond dropping
  vertices in the middle of a straight edge), so the polygons cover exactly the squares.
* **Antimeridian.** Squares never cross +/-180 and the sweep does not wrap in x, so a
  region spanning the antimeridian comes out as polygons on both sides, split at the
  meridian as RFC 7946 section 3.1.9 asks.
* **Poles.** Squares end at the web-mercator limit +/-85.0511.
* **Overlap.** The squares must not overlap (:func:`geokernel.partition_spec.geometry.owned_squares`
  guarantees it within a partition); a duplicate square is counted once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from geokernel.geo.tiles import IntArray, quadkeys_to_arrays

__all__ = ["LonLatPolygon", "square_polygons", "tile_polygons"]

Ring = list[tuple[int, int]]


class LonLatPolygon(NamedTuple):
    """One polygon: a counter-clockwise shell and clockwise holes, closed rings of (lon, lat)."""

    shell: list[list[float]]
    holes: list[list[list[float]]]


def _runs(line: IntArray, lo: IntArray, hi: IntArray, sign: IntArray
          ) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Sum signed intervals per grid line; return (line, start, end, direction) of the non-zero runs."""
    ev_line = np.concatenate([line, line])
    ev_pos = np.concatenate([lo, hi])
    ev_d = np.concatenate([sign, -sign])
    order = np.lexsort((ev_pos, ev_line))
    ev_line, ev_pos, ev_d = ev_line[order], ev_pos[order], ev_d[order]
    first = np.ones(len(ev_line), dtype=bool)
    first[1:] = (ev_line[1:] != ev_line[:-1]) | (ev_pos[1:] != ev_pos[:-1])
    starts = np.nonzero(first)[0]
    u_line, u_pos = ev_line[starts], ev_pos[starts]
    level = np.cumsum(np.add.reduceat(ev_d, starts))  # each line's deltas sum to 0: the sum restarts per line
    keep = (level[:-1] != 0) & (u_line[1:] == u_line[:-1])
    return u_line[:-1][keep], u_pos[:-1][keep], u_pos[1:][keep], np.sign(level[:-1][keep])


def _boundary(x0: IntArray, v0: IntArray, side: IntArray) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Directed boundary pieces (start, end) of the squares' union, interior on the left."""
    v1, x1 = v0 + side, x0 + side
    one = np.ones(len(x0), dtype=np.int64)
    segs: list[tuple[tuple[int, int], tuple[int, int]]] = []
    # vertical lines x = const: east edges go north (+1), west edges go south (-1)
    line, a, b, d = _runs(np.concatenate([x1, x0]), np.concatenate([v0, v0]), np.concatenate([v1, v1]),
                          np.concatenate([one, -one]))
    for xl, p, q, s in zip(line.tolist(), a.tolist(), b.tolist(), d.tolist(), strict=True):
        segs.append(((xl, p), (xl, q)) if s > 0 else ((xl, q), (xl, p)))
    # horizontal lines v = const: south edges go east (+1), north edges go west (-1)
    line, a, b, d = _runs(np.concatenate([v0, v1]), np.concatenate([x0, x0]), np.concatenate([x1, x1]),
                          np.concatenate([one, -one]))
    for vl, p, q, s in zip(line.tolist(), a.tolist(), b.tolist(), d.tolist(), strict=True):
        segs.append(((p, vl), (q, vl)) if s > 0 else ((q, vl), (p, vl)))
    return segs


def _turn_rank(din: tuple[int, int], dout: tuple[int, int]) -> int:
    """0 for a left turn, 1 straight on, 2 right (the cross and dot products of unit steps)."""
    cross = din[0] * dout[1] - din[1] * dout[0]
    return 0 if cross > 0 else (1 if cross == 0 and din[0] * dout[0] + din[1] * dout[1] > 0 else 2)


def _unit(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return ((b[0] > a[0]) - (b[0] < a[0]), (b[1] > a[1]) - (b[1] < a[1]))


def _chain(segs: list[tuple[tuple[int, int], tuple[int, int]]]) -> list[Ring]:
    """Chain directed pieces into closed rings, left-most turn first; collinear vertices dropped.

    The left-most outgoing piece of a vertex is a function of the incoming one and a
    bijection at the corner-touch vertices (two in, two out), so each ring closes on its start.
    """
    out_of: dict[tuple[int, int], list[int]] = {}
    for i, (a, _) in enumerate(segs):
        out_of.setdefault(a, []).append(i)
    used = [False] * len(segs)
    rings: list[Ring] = []
    for start in range(len(segs)):
        if used[start]:
            continue
        ring: Ring = [segs[start][0]]
        i = start
        while not used[i]:
            used[i] = True
            a, b = segs[i]
            ring.append(b)
            din = _unit(a, b)
            i = min(out_of[b], key=lambda j: _turn_rank(din, _unit(segs[j][0], segs[j][1])))
        rings += [_simplify(loop) for loop in _simple_loops(ring)]
    return rings


def _simple_loops(ring: Ring) -> list[Ring]:
    """Split a closed ring at the vertices it visits twice into simple closed loops.

    With left-most turns a ring separates two region cells touching at a corner, but a
    pocket of the complement that touches the rest of it at a corner stays on the ring
    (the ring touches itself there, which OGC forbids); each such pocket becomes a loop
    of its own (a hole, clockwise).
    """
    loops: list[Ring] = []
    path: list[tuple[int, int]] = []
    at: dict[tuple[int, int], int] = {}
    for p in ring:
        k = at.get(p)
        if k is None:
            at[p] = len(path)
            path.append(p)
            continue
        loop = [*path[k:], p]
        for q in path[k + 1:]:
            del at[q]
        del path[k + 1:]
        loops.append(loop)
    return loops


def _simplify(ring: Ring) -> Ring:
    """Drop vertices in the middle of a straight edge; the ring stays closed."""
    pts = ring[:-1]
    n = len(pts)
    keep = [p for k, p in enumerate(pts) if _unit(pts[k - 1], p) != _unit(p, pts[(k + 1) % n])]
    return [*keep, keep[0]]


def _area2(ring: Ring) -> int:
    return sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in itertools.pairwise(ring))


def _contains(ring: Ring, px: float, py: float) -> bool:
    """Even-odd ray cast of a point that lies on no edge of ``ring``."""
    xy = np.asarray(ring, dtype=np.float64)
    x1, y1, x2, y2 = xy[:-1, 0], xy[:-1, 1], xy[1:, 0], xy[1:, 1]
    crosses = (y1 > py) != (y2 > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        xi = x1 + (py - y1) * (x2 - x1) / (y2 - y1)
    return bool(np.count_nonzero(crosses & (xi > px)) % 2)


def _probe(hole: Ring) -> tuple[float, float]:
    """A point a quarter-unit left of the hole's first edge: inside the region's square that borders it."""
    (ax, ay), (bx, by) = hole[0], hole[1]
    dx, dy = _unit(hole[0], hole[1])
    return ((ax + bx) / 2 - 0.25 * dy, (ay + by) / 2 + 0.25 * dx)


def _to_lonlat(ring: Ring, zoom: int, precision: int) -> list[list[float]]:
    n = float(1 << zoom)
    xy = np.asarray(ring, dtype=np.float64)
    lon = xy[:, 0] / n * 360.0 - 180.0
    lat = np.degrees(np.arctan(np.sinh(math.pi * (1.0 + 2.0 * xy[:, 1] / n))))  # v = -y (north up)
    return [[round(a, precision), round(b, precision)] for a, b in zip(lon.tolist(), lat.tolist(), strict=True)]


def square_polygons(quadkeys: Sequence[str], *, precision: int = 7) -> list[LonLatPolygon]:
    """Return the polygons (shell + holes, lon/lat, RFC 7946 orientation) that ``quadkeys`` cover.

    Parameters
    ----------
    quadkeys : sequence of str
        Disjoint quadtree squares of any zooms (a duplicate counts once).
    precision : int
        Decimal places of the coordinates (7 ~ 1 cm).

    Returns
    -------
    list of LonLatPolygon
        One per edge-connected piece, largest first; empty for no squares.

    Notes
    -----
    Shells are counter-clockwise and holes clockwise (RFC 7946 section 3.1.6). Pieces that
    touch only at a corner are separate polygons; a pocket that touches the outside or
    another pocket at a corner is a hole of its own (all valid under OGC rules: rings
    may touch at points, each polygon's interior is connected).
    """
    x, y, z = quadkeys_to_arrays(sorted(set(quadkeys)))
    return tile_polygons(x, y, z, precision=precision)


def tile_polygons(x: IntArray, y: IntArray, z: IntArray, *, precision: int = 7) -> list[LonLatPolygon]:
    """:func:`square_polygons` of tiles given as arrays (no duplicates): for callers that convert many at once."""
    if len(x) == 0:
        return []
    zoom = int(z.max())
    side = np.left_shift(1, zoom - z).astype(np.int64)
    x0 = x << (zoom - z)
    v0 = -((y + 1) << (zoom - z))  # north-up: the square spans v0 .. v0 + side
    rings = _chain(_boundary(x0, v0, side))
    areas = [_area2(r) for r in rings]
    shells = sorted((k for k, a in enumerate(areas) if a > 0), key=lambda k: -areas[k])
    holes_of: dict[int, list[int]] = {k: [] for k in shells}
    for h in (k for k, a in enumerate(areas) if a < 0):
        px, py = _probe(rings[h])
        owner = min((k for k in shells if _contains(rings[k], px, py)), key=lambda k: areas[k])
        holes_of[owner].append(h)
    return [LonLatPolygon(_to_lonlat(rings[k], zoom, precision),
                          [_to_lonlat(rings[h], zoom, precision) for h in holes_of[k]]) for k in shells]
