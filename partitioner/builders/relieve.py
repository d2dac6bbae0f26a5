"""Relieve a piece of a finer-split cell grown past the cap by giving up one of its listed tiles.

A grid cell hotter than the cap is split into pieces of its finer cells
(:func:`partitioner.builders.hot.split_hot_cells`). When one piece grows a little past the cap,
splitting the whole cell again moves most of its load; giving up the one listed tile that
covers the overflow moves only that tile.

Notes
-----
* A tile's load is that of the counts' leaves the piece owns under it (the most specific
  listing of the piece that contains a leaf takes it; a leaf coarser than every listing goes
  to the coarsest).
* The tile given up is the least-loaded listing that covers the overflow, is itself within the
  cap, and leaves the rest of the piece in no more 8-connected parts than before (checked on the
  tiles the piece owns, at its finest listing's zoom); None when there is none (one listing only,
  every listing that covers the overflow hotter than the cap, or every candidate would cut the
  rest apart).
* A tile hotter than the cap is never given up: it would become a region no worker can hold
  whole, and the repair would open a worker for it alone, over the cap (a real AIS log of ships
  arriving in a cell did exactly that: ``worker 'w0013' load 414.0 exceeds max_load 200.0``). The
  repair splits the cell again instead, which splits that tile by its finer counts or by entity hash.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from geokernel.geo.graph import components
from geokernel.geo.tiles import IntArray, quadkeys_to_arrays
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Partition
from partitioner.builders.region import Region


class Leaves(NamedTuple):
    """Leaves of the counts (tile and weight) under one grid cell."""

    x: IntArray
    y: IntArray
    z: IntArray
    weight: np.ndarray


class Relief(NamedTuple):
    """A piece without the tile it gives up (same id and worker), and that tile as a region of its own."""

    kept: Region
    given: Region


def relieve(index: SpecIndex, i: int, part: Partition, leaves: Leaves, excess: float, cap: float) -> Relief | None:
    """Give up the least-loaded listed tile of partition ``i`` that covers ``excess`` and fits ``cap``.

    Parameters
    ----------
    index : SpecIndex
        The live spec's index (which partition owns which leaf).
    i : int
        The piece's index in the live spec; ``part`` is that partition.
    leaves : Leaves
        The counts' leaves under the piece's grid cell.
    excess : float
        The load the piece is over the cap by.
    cap : float
        The cap the repair packs to: the tile given up is placed whole, so it must hold at most this.

    Returns
    -------
    Relief or None
        None when no listed tile covers ``excess`` within ``cap`` (see the module notes).
    """
    if len(part.quadkeys) < 2:
        return None
    qx, qy, qz = quadkeys_to_arrays(list(part.quadkeys))
    mine = index.locate_tiles(leaves.x, leaves.y, leaves.z) == i
    listing = _listing_of(qx, qy, qz, leaves.x[mine], leaves.y[mine], leaves.z[mine])
    load = np.bincount(listing, weights=leaves.weight[mine], minlength=len(qx))
    tiles = _owned_tiles(index, i, qx, qy, qz)
    pieces, _ = components(tiles.x, tiles.y, tiles.zoom)
    for k in np.argsort(load, kind="stable").tolist():
        if load[k] < excess or load[k] <= 0:
            continue
        if load[k] > cap * (1 + 1e-12):  # sorted by load: no later tile fits either
            break
        rest = tiles.listing != k
        if not rest.any():
            continue
        n, _ = components(tiles.x[rest], tiles.y[rest], tiles.zoom)
        if n <= pieces:
            keep = tuple(q for j, q in enumerate(part.quadkeys) if j != k)
            total = float(load.sum())
            return Relief(Region(keep, total - float(load[k])), Region((part.quadkeys[k],), float(load[k])))
    return None


def _listing_of(qx: IntArray, qy: IntArray, qz: IntArray, x: IntArray, y: IntArray, z: IntArray) -> IntArray:
    """The most specific listing containing each leaf (the coarsest listing for a leaf coarser than all)."""
    out = np.full(len(x), int(np.argmin(qz)), dtype=np.int64)
    found = np.zeros(len(x), dtype=bool)
    for k in np.argsort(-qz, kind="stable").tolist():
        d = z - int(qz[k])
        inside = ~found & (d >= 0) & ((x >> np.maximum(d, 0)) == qx[k]) & ((y >> np.maximum(d, 0)) == qy[k])
        out[inside] = k
        found |= inside
    return out


class _Tiles(NamedTuple):
    """The tiles a piece owns at one zoom, with the listing each lies in."""

    x: IntArray
    y: IntArray
    zoom: int
    listing: IntArray


def _owned_tiles(index: SpecIndex, i: int, qx: IntArray, qy: IntArray, qz: IntArray) -> _Tiles:
    """Every listing of partition ``i`` expanded to its finest listing's zoom, keeping the tiles ``i`` owns."""
    zoom = int(qz.max())
    xs: list[IntArray] = []
    ys: list[IntArray] = []
    ks: list[IntArray] = []
    for k in range(len(qx)):
        d = zoom - int(qz[k])
        side = np.arange(1 << d, dtype=np.int64)
        gx, gy = np.meshgrid((int(qx[k]) << d) + side, (int(qy[k]) << d) + side, indexing="ij")
        xs.append(gx.ravel())
        ys.append(gy.ravel())
        ks.append(np.full(gx.size, k, dtype=np.int64))
    x, y, lab = np.concatenate(xs), np.concatenate(ys), np.concatenate(ks)
    own = index.locate_xy(x, y, zoom) == i
    return _Tiles(x[own], y[own], zoom, lab[own])
