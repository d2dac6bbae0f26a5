"""Benchmark: loading geofence zones for a region by their extent (issue #56) against the old loading by centre.

For each region size (cells of mixed zooms 12-16 around Paris: a block of zoom-12 cells, cells refined into their
four children at random down to zoom 16) and zone count (half near the region, half anywhere; radii 0.5, 4 and
20 km) it times

* ``extent``: :func:`geo_service.pipeline.extent.region_boxes` and :func:`~geo_service.pipeline.extent.discs_reaching`
  (what :class:`transforms.geofence.Geofences` does now, CSV parsing aside);
* ``centre``: the baseline, the old loading: the region's quadkey prefixes plus the buffer ring
  (:func:`geo_service.pipeline.places.region_prefixes`) and a prefix test of each zone centre's zoom-20 quadkey;

and prints the zones each keeps (the old loading misses zones that reach the region from beyond its ring).

Run: ``.venv/bin/python bench/bench_zones.py [--cells 100 1000 5000] [--zones 100 1000 10000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from geo_service.pipeline.extent import discs_reaching, region_boxes  # noqa: E402
from geo_service.pipeline.places import region_prefixes  # noqa: E402
from geokernel.geo.tiles import Tile, arrays_to_quadkeys, children, quadkey, tile, tiles_xy  # noqa: E402


def mixed_region(cells: int, rng: np.random.Generator) -> list[str]:
    """About ``cells`` disjoint cells of zooms 12-16 around Paris."""
    t = tile(2.35, 48.86, 12)
    out = [Tile(t.x + dx, t.y + dy, 12) for dx in range(-4, 4) for dy in range(-4, 4)]
    while len(out) < cells:
        i = int(rng.integers(len(out)))
        if out[i].z < 16:
            out[i:i + 1] = children(out[i])
    return [quadkey(c) for c in out]


def zones(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    near = count // 2
    lat = np.concatenate([rng.uniform(48.0, 49.7, near), rng.uniform(-80, 80, count - near)])
    lon = np.concatenate([rng.uniform(1.0, 3.7, near), rng.uniform(-180, 180, count - near)])
    return lat, lon, rng.choice([0.5, 4.0, 20.0], count)


def by_extent(qks: list[str], lat: np.ndarray, lon: np.ndarray, radius: np.ndarray, ring: int) -> np.ndarray:
    return discs_reaching(lat, lon, radius, region_boxes(qks, ring))


def by_centre(qks: list[str], lat: np.ndarray, lon: np.ndarray, ring: int) -> np.ndarray:
    x, y = tiles_xy(lon, lat, 20)
    prefixes = region_prefixes(qks, ring)
    return np.array([any(c.startswith(p) for p in prefixes) for c in arrays_to_quadkeys(x, y, 20)], dtype=bool)


def best(fn: Callable[[], np.ndarray], repeat: int) -> tuple[float, np.ndarray]:
    times, out = [], np.zeros(0, dtype=bool)
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[100, 1000, 5000])
    ap.add_argument("--zones", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--ring", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(56)
    print(f"{'cells':>6} {'zones':>6} {'extent s':>9} {'kept':>6} {'centre s':>9} {'kept':>6} {'missed':>6}")
    for n_cells in args.cells:
        qks = mixed_region(n_cells, rng)
        for n_zones in args.zones:
            lat, lon, radius = zones(n_zones, rng)
            t_ext, ext = best(partial(by_extent, qks, lat, lon, radius, args.ring), args.repeat)
            t_old, old = best(partial(by_centre, qks, lat, lon, args.ring), 1)
            print(f"{len(qks):>6} {n_zones:>6} {t_ext:>9.4f} {int(ext.sum()):>6} {t_old:>9.4f} {int(old.sum()):>6} "
                  f"{int((ext & ~old).sum()):>6}")


if __name__ == "__main__":
    main()
