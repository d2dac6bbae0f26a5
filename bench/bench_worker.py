"""Geo worker hot path: reverse-geocode throughput and region-load cost, against in-run baselines.

Two measurements, each printed with its baseline from the same run:

1. **Lookups per second per core**: :meth:`ReverseGeocoder.apply` (KD-tree over the loaded
   places) versus a brute-force NumPy scan of the same places per event (haversine to every
   place, argmin). Same events, same answers (checked).
2. **Region load**: places kept and load time for one zoom-8 region plus its buffer ring
   versus the whole world (the catch-all), showing memory scales with the region.

Run: ``.venv/bin/python bench/bench_worker.py [--events 20000]``. Single core: BLAS/OpenMP
threads are pinned to 1 before NumPy loads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from geo_service.pipeline.transform import EARTH_RADIUS_KM, ReverseGeocoder  # noqa: E402
from geokernel.geo.tiles import quadkey, tile  # noqa: E402


def brute_force(g: ReverseGeocoder, lat: float, lon: float) -> str:
    """Baseline: haversine to every loaded place, nearest wins."""
    assert g.places is not None
    p1, p2 = np.radians(lat), np.radians(g.places.lat)
    dp, dl = p2 - p1, np.radians(g.places.lon - lon)
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    d = 2 * EARTH_RADIUS_KM * np.arcsin(np.minimum(1.0, np.sqrt(a)))
    return g.places.name[int(np.argmin(d))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--baseline-events", type=int, default=500)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(7)
    lat = rng.uniform(-60, 70, args.events)
    lon = rng.uniform(-180, 180, args.events)

    t0 = time.perf_counter()
    world = ReverseGeocoder()
    world.load_region([""], buffer_ring=1)
    world_load_s = time.perf_counter() - t0

    region = quadkey(tile(2.3522, 48.8566, 8))
    t0 = time.perf_counter()
    local = ReverseGeocoder()
    local.load_region([region], buffer_ring=1)
    local_load_s = time.perf_counter() - t0

    t0 = time.thread_time()
    got = [world.apply({"lat": float(a), "lon": float(b)})["place"] for a, b in zip(lat, lon, strict=True)]
    kd_rate = args.events / (time.thread_time() - t0)
    n = min(args.baseline_events, args.events)
    t0 = time.thread_time()
    base = [brute_force(world, float(a), float(b)) for a, b in zip(lat[:n], lon[:n], strict=True)]
    base_rate = n / (time.thread_time() - t0)
    mismatches = sum(1 for x, y in zip(got[:n], base, strict=True) if x != y)

    print(f"places: world {world.loaded} (load {world_load_s:.2f}s), zoom-8 Paris region + ring {local.loaded} "
          f"(load {local_load_s:.2f}s): region holds {local.loaded / world.loaded:.2%} of the world")
    print(f"lookups/s/core: kd-tree {kd_rate:,.0f}, brute-force baseline {base_rate:,.0f}, "
          f"ratio {kd_rate / base_rate:.1f}x; answers differing from baseline: {mismatches}/{n}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
