"""Shifts of benchmark data: day and night, a new hotspot, noise (for stability and the policy).

:func:`diurnal` weights load by local solar time from longitude (the day/night shift),
:func:`new_hotspot` adds load where there was none or little, :func:`noise` multiplies
every weight by a uniform factor in ``[1 - a, 1 + a]``, and :func:`day_night` makes the
pair the benchmark uses. Everything is seeded: the same call returns the same data.
"""

from __future__ import annotations

import numpy as np
from datasets import Dataset, FloatArray, city, codes_of, scatter, tile_centres

from partitioner.counts import Counts, Tiles
from partitioner.index import tree_keys


def activity(local_hour: FloatArray) -> FloatArray:
    """Relative activity by local solar hour: 0.15 at 04:00, 1.0 at 16:00 (a smooth cosine)."""
    return 0.15 + 0.85 * (0.5 - 0.5 * np.cos(2 * np.pi * (local_hour - 4.0) / 24.0))


def diurnal(counts: Counts, utc_hour: float) -> Counts:
    """Return ``counts`` with each weight times :func:`activity` of the local solar time.

    Local solar hour = ``utc_hour + lon / 15`` at the quadkey's centre, so load follows the
    sun westwards. Weights stay integers (rounded, at least 1 on a non-empty cell).
    """
    lon, _ = tile_centres(counts)
    local = (utc_hour + lon / 15.0) % 24.0
    w = np.maximum(np.rint(counts.weights * activity(local)), 1.0)
    return Counts(counts.quadkeys, w, f"{counts.source}@{utc_hour:g}h UTC")


def new_hotspot(counts: Counts, lon: float, lat: float, load: float, sigma_km: float = 3.0, seed: int = 6) -> Counts:
    """Return ``counts`` plus ``load`` events scattered around (lon, lat) (new quadkeys appear).

    The events are binned at the counts' grid zoom and added to existing cells or create new ones;
    the rows of a rolled-up quadtree keep their own zooms (the new load has no finer rows).
    """
    zoom = counts.grid_zoom
    rng = np.random.default_rng(seed)
    k = round(load)
    plon, plat = scatter(rng, np.full(k, float(lon)), np.full(k, float(lat)), sigma_km)
    codes = codes_of(plon, plat, zoom)
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
    """Return ``counts`` with every weight times a uniform factor in ``[1 - amplitude, 1 + amplitude]``."""
    rng = np.random.default_rng(seed)
    factors = rng.uniform(1.0 - amplitude, 1.0 + amplitude, len(counts))
    return Counts(counts.quadkeys, np.asarray(counts.weights * factors), f"{counts.source}~noise{amplitude:g}")


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


