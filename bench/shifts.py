"""Shifts of benchmark data: day and night, a new hotspot, noise (for stability and the policy).

:func:`diurnal` weights load by local solar time from longitude (the day/night shift),
:func:`new_hotspot` adds load where there was none or little, :func:`noise` multiplies
every weight by a uniform factor in ``[1 - a, 1 + a]``, and :func:`day_night` makes the
pair the benchmark uses. Everything is seeded: the same call returns the same data.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from datasets import Dataset, point_codes, scatter
from geography import FloatArray, IntArray, city

from geokernel.geo.quadtree import tree_keys
from partitioner.load.counts import Counts, Tiles
from partitioner.simulate.places import activity


def diurnal(counts: Counts, utc_hour: float) -> Counts:
    """Return ``counts`` with each weight times :func:`activity` of the local solar time.

    Local solar hour = ``utc_hour + lon / 15`` at the quadkey's centre, so load follows the
    sun westwards. Weights stay integers (rounded, at least 1 on a non-empty cell). A rolled-up
    quadtree is shifted at its leaves and summed up again (:func:`_on_leaves`).
    """
    def shift(x: IntArray, z: IntArray, w: FloatArray) -> FloatArray:
        lon = (x + 0.5) / np.left_shift(1, z).astype(np.float64) * 360.0 - 180.0
        local = (utc_hour + lon / 15.0) % 24.0
        out: FloatArray = np.where(w > 0, np.maximum(np.rint(w * activity(local)), 1.0), 0.0)
        return out

    return _on_leaves(counts, shift, f"{counts.source}@{utc_hour:g}h UTC")


def _on_leaves(counts: Counts, change: Callable[[IntArray, IntArray, FloatArray], FloatArray], source: str
               ) -> Counts:
    """Counts with ``change(x, z, weight)`` applied to the rows that count every place once (the leaves), every
    row of a rolled-up quadtree then the sum of the leaves at and under it (so parents stay their children's sum,
    as the aggregation job writes them). Single-zoom counts are changed row by row."""
    if len(counts.zooms) == 1:
        t = counts.tiles
        return Counts(counts.quadkeys, change(t.x, t.z, counts.weights), source)
    leaves = counts.leaves()
    lw = change(leaves.x, leaves.z, leaves.weight)
    t = counts.tiles
    weights = np.zeros(len(counts))
    for zoom in counts.zooms:
        rows = np.flatnonzero(t.z == zoom)
        keys = tree_keys(t.x[rows], t.y[rows], t.z[rows])
        order = np.argsort(keys)
        below = np.flatnonzero(leaves.z >= zoom)
        d = leaves.z[below] - zoom
        anc = tree_keys(leaves.x[below] >> d, leaves.y[below] >> d, np.full(len(below), zoom))
        pos = np.minimum(np.searchsorted(keys[order], anc), len(rows) - 1)
        hit = keys[order][pos] == anc
        np.add.at(weights, rows[order[pos[hit]]], lw[below][hit])
    return Counts.from_tiles(t, weights, source)


def new_hotspot(counts: Counts, lon: float, lat: float, load: float, sigma_km: float = 3.0, seed: int = 6) -> Counts:
    """Return ``counts`` plus ``load`` events scattered around (lon, lat) (new quadkeys appear).

    The events are binned at the counts' grid zoom and added to existing cells or create new ones;
    the rows of a rolled-up quadtree keep their own zooms (the new load has no finer rows).
    """
    zoom = counts.grid_zoom
    rng = np.random.default_rng(seed)
    k = round(load)
    plon, plat = scatter(rng, np.full(k, float(lon)), np.full(k, float(lat)), sigma_km)
    codes = point_codes(plon, plat, zoom)
    t = counts.tiles
    x = np.concatenate([t.x, codes >> zoom])
    y = np.concatenate([t.y, codes & ((1 << zoom) - 1)])
    z = np.concatenate([t.z, np.full(k, zoom, dtype=np.int64)])
    keys, inv = np.unique(tree_keys(x, y, z), return_inverse=True)
    weights = np.bincount(inv, weights=np.concatenate([counts.weights, np.ones(k)]), minlength=len(keys))
    first = np.unique(inv, return_index=True)[1]
    return Counts.from_tiles(Tiles(x[first], y[first], z[first]), weights,
                             f"{counts.source}+hotspot({lon:.2f},{lat:.2f})")


def noise(counts: Counts, amplitude: float = 0.10, seed: int = 7) -> Counts:
    """Return ``counts`` with every weight times a uniform factor in ``[1 - amplitude, 1 + amplitude]``
    (a rolled-up quadtree's leaves, then summed up again: :func:`_on_leaves`)."""
    rng = np.random.default_rng(seed)

    def jitter(x: IntArray, z: IntArray, w: FloatArray) -> FloatArray:
        out: FloatArray = w * rng.uniform(1.0 - amplitude, 1.0 + amplitude, len(w))
        return out

    return _on_leaves(counts, jitter, f"{counts.source}~noise{amplitude:g}")


PLACES = {
    # places with no history in the city table: where a new hotspot appears from nothing
    "Black Rock Desert": (-119.2065, 40.7864),  # a festival town of ~70k people for one week
}


def day_night(ds: Dataset, day_utc: float = 14.0, night_utc: float = 2.0,
              hotspot: str = "Black Rock Desert", hotspot_share: float = 0.03) -> tuple[Dataset, Dataset]:
    """Return (day, night) versions of ``ds``: the diurnal shift by 12 h plus a new hotspot at night.

    ``max_load`` is kept; the night dataset gets ``hotspot_share`` of the day's total as a new
    hotspot (3 km scatter) at ``hotspot``: a key of :data:`PLACES` (no history: new quadkeys
    that only the catch-all owned) or a city name.
    """
    day = diurnal(ds.counts, day_utc)
    night = diurnal(ds.counts, night_utc)
    lon, lat = PLACES[hotspot] if hotspot in PLACES else city(hotspot)
    night = new_hotspot(night, lon, lat, hotspot_share * day.total)
    return (ds.with_counts(day, f"{ds.name}@day", f"{ds.description}, {day_utc:g}h UTC"),
            ds.with_counts(night, f"{ds.name}@night", f"{ds.description}, {night_utc:g}h UTC + {hotspot} hotspot"))


