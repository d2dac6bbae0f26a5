"""Counts made from random points, and checks on built specs, for the build tests."""

from __future__ import annotations

import numpy as np

from geokernel.geo.tiles import arrays_to_quadkeys, tiles_xy
from geokernel.partition_spec.geometry import square_shapes
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.load.counts import Counts


def counts_from_points(lon: np.ndarray, lat: np.ndarray, zoom: int) -> Counts:
    """One count per point, binned into the tiles at ``zoom``."""
    x, y = tiles_xy(lon, lat, zoom)
    codes, n = np.unique((x << zoom) | y, return_counts=True)
    qks = arrays_to_quadkeys(codes >> zoom, codes & ((1 << zoom) - 1), zoom)
    return Counts(tuple(qks), n.astype(np.float64), "points")


def metro_counts() -> Counts:
    """A dense metro area: 120k points around three centres near New York, zoom 15."""
    rng = np.random.default_rng(7)
    centers = np.array([[-73.98, 40.75], [-73.95, 40.65], [-74.10, 40.70]])
    k = rng.choice(3, 120_000, p=[0.5, 0.3, 0.2])
    return counts_from_points(centers[k, 0] + rng.normal(0, 0.05, k.size), centers[k, 1] + rng.normal(0, 0.04, k.size),
                              15)


def sparse_counts() -> Counts:
    """600 isolated clusters of lognormal size anywhere between 55 S and 65 N, zoom 12."""
    rng = np.random.default_rng(11)
    m = 600
    lon_c, lat_c = rng.uniform(-170, 170, m), rng.uniform(-55, 65, m)
    size = rng.lognormal(2.5, 1.2, m).astype(int) + 1
    lon = np.clip(np.repeat(lon_c, size) + rng.normal(0, 0.04, size.sum()), -180, 180)
    lat = np.repeat(lat_c, size) + rng.normal(0, 0.04, size.sum())
    return counts_from_points(lon, lat, 12)


def regions_connected(spec: Spec, zoom: int) -> bool:
    """Every region (listed squares of any zoom, holes carved) is one 8-connected piece at ``zoom``."""
    regions = [i for i, p in enumerate(spec.partitions) if not p.is_catch_all and p.hash_range is None]
    _, comps, _ = square_shapes(spec, regions, zoom)
    return all(int(comps[i]) == 1 for i in regions)


def stable_share(old: Spec, new: Spec, counts: Counts) -> float:
    """Share of the grid load whose cell keeps its partition id and worker from ``old`` to ``new``."""
    g = counts.grid()
    i_old = SpecIndex(old).locate_xy(g.x, g.y, g.zoom)
    i_new = SpecIndex(new).locate_xy(g.x, g.y, g.zoom)
    keep = np.array([old.partitions[a].id == new.partitions[b].id and old.partitions[a].worker == new.partitions[b].worker
                     for a, b in zip(i_old, i_new, strict=True)])
    return float(g.weight[keep].sum() / g.weight.sum())


def cells_of(quadkeys: tuple[str, ...], zoom: int) -> set[str]:
    """The zoom-``zoom`` cells under the listed squares."""
    out: set[str] = set()
    for q in quadkeys:
        stack = [q]
        while stack:
            c = stack.pop()
            if len(c) == zoom:
                out.add(c)
            else:
                stack += [c + d for d in "0123"]
    return out


def dumbbell(y0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two 10x10 blocks of 800 load joined by a one-cell road of 10 (total 1610), rows y0 .. y0 + 9."""
    bx, by = np.meshgrid(np.arange(10), np.arange(10))
    x = np.concatenate([bx.ravel(), np.arange(10, 20), bx.ravel() + 20]).astype(np.int64)
    y = np.concatenate([by.ravel(), np.full(10, 5), by.ravel()]).astype(np.int64) + y0
    return x, y, np.concatenate([np.full(100, 8.0), np.ones(10), np.full(100, 8.0)])
