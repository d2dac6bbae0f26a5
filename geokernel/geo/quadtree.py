"""Quadtree arithmetic on tiles as integers: one key per tile across zooms, quadtree (Morton) codes, and the code
interval of each square, so that every containment test between squares of any zooms compares integers.

Used by the spec index (:mod:`geokernel.partition_spec.index`), the spec's region geometry, the load readers and
the builders; it knows nothing of specs.

Notes
-----
* Tiles up to :data:`MORTON_ZOOM` (30) fit an int64 code; deeper tiles overflow.
* Inputs are int64 arrays (:data:`geokernel.geo.tiles.IntArray`); a scalar zoom broadcasts.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import IntArray, unique_ints

MORTON_ZOOM = 30  # quadtree codes of tiles up to this zoom fit an int64


def tree_keys(x: IntArray, y: IntArray, z: IntArray | int) -> IntArray:
    """One int64 per tile, unique across zooms: ``1 << 2z | x << z | y`` (fits up to zoom 30)."""
    zz = np.asarray(z, dtype=np.int64)
    keys: IntArray = np.left_shift(np.int64(1), 2 * zz) | (x << zz) | y
    return keys


def morton(x: IntArray, y: IntArray) -> IntArray:
    """The quadkey of each tile as a base-4 number (bits of y and x interleaved, y higher).

    Squares of a quadtree are intervals of these codes: at a zoom ``Z``, the square at zoom
    ``z`` of tile ``(x, y)`` covers ``[morton(x << d, y << d), + 4**d)`` with ``d = Z - z``.
    """
    code: IntArray = _spread(x) | (_spread(y) << 1)
    return code


def square_spans(x: IntArray, y: IntArray, z: IntArray | int, zoom: int) -> tuple[IntArray, IntArray]:
    """Each square's interval ``[start, end)`` of :func:`morton` codes at ``zoom`` (every ``z <= zoom``).

    Notes
    -----
    Two squares overlap exactly when their intervals do, and one holds the other exactly when its interval holds
    the other's: every containment test between squares of any zooms is a comparison of these integers.
    """
    d = zoom - np.asarray(z, dtype=np.int64)
    start = morton(x << d, y << d)
    end: IntArray = start + np.left_shift(np.int64(1), 2 * d)
    return start, end


def _spread_table() -> IntArray:
    """Bit ``i`` of every 16-bit value moved to bit ``2 i``."""
    v = np.arange(1 << 16, dtype=np.int64)
    v = (v | (v << 8)) & 0x00FF00FF
    v = (v | (v << 4)) & 0x0F0F0F0F
    v = (v | (v << 2)) & 0x33333333
    out: IntArray = (v | (v << 1)) & 0x55555555
    return out


_SPREAD = _spread_table()


def _spread(v: IntArray) -> IntArray:
    """Move bit ``i`` of each value (< 2**31) to bit ``2 i`` (two table lookups)."""
    v = np.asarray(v, dtype=np.int64)
    out: IntArray = _SPREAD[v & 0xFFFF] | (_SPREAD[(v >> 16) & 0x7FFF] << 32)
    return out


def has_square_inside(x: IntArray, y: IntArray, z: IntArray) -> npt.NDArray[np.bool_]:
    """Per square (tile ``x, y`` at zoom ``z``): does a finer square of the set lie inside it?"""
    if len(z) == 0:
        return np.zeros(0, dtype=bool)
    start, end = square_spans(x, y, z, int(z.max()))
    order = np.lexsort((z, start))
    s, e, zz = start[order], end[order], z[order]
    # in (start, zoom) order a square's first finer descendant comes right after it and its duplicates
    change = np.ones(len(s), dtype=bool)
    change[1:] = (s[1:] != s[:-1]) | (zz[1:] != zz[:-1])
    run_starts = np.append(np.flatnonzero(change), len(s))
    after = run_starts[np.cumsum(change)]  # first position past each square's run of duplicates
    inside = (after < len(s)) & (s[np.minimum(after, len(s) - 1)] < e)
    out = np.zeros(len(s), dtype=bool)
    out[order] = inside
    return out


def by_zoom(z: IntArray) -> Iterator[tuple[int, npt.NDArray[np.bool_]]]:
    """Yield ``(zoom, mask)`` for each distinct zoom in ``z``, shallowest first."""
    for zoom in unique_ints(z):
        yield int(zoom), z == zoom
