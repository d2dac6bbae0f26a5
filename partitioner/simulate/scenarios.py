"""Built-in scenarios: a day of windows made from real places, offline and deterministic per seed.

==============  =======  ==============  =====================================================
name            windows  cells           what moves
==============  =======  ==============  =====================================================
``global-day``  144x10m  ~25k, zoom 10   every GeoNames place, population x a diurnal curve of
                                         local solar time (:func:`places.activity`); the cap
                                         is sized for ~100 workers at the daily peak
``metro-day``   288x5m   ~20k, zoom 16   London (30 km disc): homes and workplaces, two commute
                                         peaks, and a stadium whose crowd ramps up over 20 min
                                         before an evening match and leaves after it
``cost-day``    144x10m  as global-day   the global day where events in some metro areas cost
                                         10x the CPU of the others (uneven cost per event)
==============  =======  ==============  =====================================================

Each window's events are Poisson draws around the expected load; ``seed`` changes the places'
scatter, the draws and (cost-day) which areas are expensive, never the structure. A scenario also
carries the settings it was sized for: ``max_load``, ``window_s``, ``latency_s`` (a new spec goes
live one window after its snapshot closes) and ``swap_s`` (a swap's overlap, 0.4 of a window: fleet
start + warm-up + drain).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import arrays_to_quadkeys, tiles_xy
from partitioner.simulate.places import (
    activity,
    code_centres,
    km_per_tile,
    load_places,
    point_codes,
    scatter,
)
from partitioner.simulate.windows import CellSeries, SimulationError, WindowSeries

FloatArray = npt.NDArray[np.float64]
DAY_S = 86_400.0
SWAP_SHARE = 0.4  # a swap's overlap as a share of the window (start + warm-up + drain; --swap-timings measures it)


@dataclass(frozen=True, eq=False)
class Scenario:
    """A named run of windows with the settings it was sized for."""

    name: str
    description: str
    series: WindowSeries
    max_load: float
    window_s: float
    latency_s: float
    swap_s: float


def round_cap(raw: float) -> float:
    """A round cap near ``raw`` (two significant digits)."""
    mag = 10.0 ** math.floor(math.log10(raw)) / 10.0
    return float(math.ceil(raw / mag) * mag)


def _cells(codes: npt.NDArray[np.int64], zoom: int) -> tuple[tuple[str, ...], npt.NDArray[np.int64], FloatArray]:
    """Unique tile codes -> (quadkeys, codes, share of points per cell)."""
    uniq, cnt = np.unique(codes, return_counts=True)
    mask = (1 << zoom) - 1
    return tuple(arrays_to_quadkeys(uniq >> zoom, uniq & mask, zoom)), uniq, cnt / cnt.sum()


# ---------------------------------------------------------------------------
# global day
# ---------------------------------------------------------------------------

GLOBAL_ZOOM = 10
GLOBAL_PEAK_EVENTS = 760_000.0  # events per 10-minute window at the daily peak (about 20k non-empty cells)
GLOBAL_WORKERS = 100


@functools.lru_cache(maxsize=4)
def _global_geography(seed: int, zoom: int, points: int = 3_000_000) -> tuple[tuple[str, ...], FloatArray, FloatArray]:
    """Cells around every place: (quadkeys, share of the world's load, centre longitude); cached, never mutated."""
    p = load_places()
    rng = np.random.default_rng((seed, 1_000_003))
    n_per = rng.poisson(points * p.pop / p.pop.sum())
    idx = np.repeat(np.arange(len(p.pop)), n_per)
    sigma = 1.5 + 4.0 * np.sqrt(p.pop[idx] / 1e6)
    lon, lat = scatter(rng, p.lon[idx], p.lat[idx], sigma)
    qks, codes, share = _cells(point_codes(lon, lat, zoom), zoom)
    clon, _ = code_centres(codes >> zoom, codes & ((1 << zoom) - 1), zoom)
    return qks, share, clon


def _diurnal(share: FloatArray, lon: FloatArray, scale: float, window_s: float) -> Callable[[float], FloatArray]:
    def expected(t: float) -> FloatArray:
        utc_hour = (t + 0.5) * window_s / 3600.0
        return scale * share * activity((utc_hour + lon / 15.0) % 24.0)
    return expected


def _global_scale(share: FloatArray, lon: FloatArray, window_s: float, n: int, peak_events: float) -> float:
    unit = _diurnal(share, lon, 1.0, window_s)
    return peak_events / max(float(unit(t).sum()) for t in range(n))


def global_day(seed: int = 1, *, windows: int = 144, window_s: float = 600.0,
               peak_events: float = GLOBAL_PEAK_EVENTS, workers: int = GLOBAL_WORKERS) -> Scenario:
    """Every place: population x the activity of its local solar time, Poisson per window.

    ``max_load`` is the peak window's expected total / ``workers`` (rounded up).
    """
    qks, share, lon = _global_geography(seed, GLOBAL_ZOOM)
    scale = _global_scale(share, lon, window_s, windows, peak_events)
    series = CellSeries(qks, _diurnal(share, lon, scale, window_s), windows, seed, source=f"global-day(seed={seed})")
    return Scenario("global-day", f"{len(qks)} cells at zoom {GLOBAL_ZOOM} around every place, diurnal by local "
                    f"solar time, {windows} windows of {window_s / 60:g} min", series,
                    round_cap(peak_events / workers), window_s, window_s, SWAP_SHARE * window_s)


# ---------------------------------------------------------------------------
# metro commute day
# ---------------------------------------------------------------------------

METRO = (-0.12574, 51.50853)  # London (GeoNames)
METRO_ZOOM = 16
METRO_RADIUS_KM = 30.0
METRO_PEAK_EVENTS = 240_000.0  # events per 5-minute window at the evening peak
METRO_WORKERS = 60
STADIUM_KM_EAST = 8.0
STADIUM_PEAK_SHARE = 0.4  # the stadium's crowd at full, as a share of one worker's cap (see metro_day)
STADIUM_RAMP_UP_S = 20 * 60.0
STADIUM_OPEN = (19.0, 21.5)  # full between these hours; ramps up over 20 min before, down over 30 min after
STADIUM_RAMP_DOWN_S = 30 * 60.0


def _bump(h: FloatArray | float, centre: float, width: float) -> FloatArray:
    return np.exp(-0.5 * ((np.asarray(h) - centre) / width) ** 2)


def commute_profiles(hour: float) -> tuple[float, float, float]:
    """Relative activity (home, work, commute) at a local ``hour``: two commute peaks, work by day, homes by evening."""
    home = 0.25 + 0.35 * float(_bump(hour, 7.0, 1.0)) + 0.6 * float(_bump(hour, 20.5, 2.0))
    work = 0.75 / (1.0 + math.exp(-(hour - 8.8) * 3.0)) / (1.0 + math.exp((hour - 17.8) * 3.0))
    commute = 1.0 * float(_bump(hour, 8.2, 0.8)) + 1.1 * float(_bump(hour, 17.7, 0.9))
    return home, work, commute


def stadium_level(hour: float) -> float:
    """The stadium crowd in [0, 1]: a linear 20-minute ramp up, full during the match, 30 minutes down."""
    up, down = STADIUM_RAMP_UP_S / 3600.0, STADIUM_RAMP_DOWN_S / 3600.0
    start, end = STADIUM_OPEN
    if start - up <= hour < start:
        return (hour - (start - up)) / up
    if start <= hour < end:
        return 1.0
    if end <= hour < end + down:
        return 1.0 - (hour - end) / down
    return 0.0


@dataclass(frozen=True, eq=False)
class _MetroFields:
    qks: tuple[str, ...]
    home: FloatArray
    work: FloatArray
    stadium: FloatArray


def _metro_fields(seed: int, zoom: int, radius_km: float) -> _MetroFields:
    """Home and work densities of every tile of the disc, and the stadium's footprint (each sums to 1)."""
    lon0, lat0 = METRO
    n = 1 << zoom
    tile_km = km_per_tile(zoom, lat0)
    r = math.ceil(radius_km / tile_km) + 1
    (cx,), (cy,) = tiles_xy(np.array([lon0]), np.array([lat0]), zoom)
    mx, my = np.meshgrid(np.arange(cx - r, cx + r + 1), np.arange(cy - r, cy + r + 1))
    gx, gy = mx.ravel() % n, my.ravel()
    dx, dy = (gx - cx) * tile_km, (gy - cy) * tile_km
    inside = np.hypot(dx, dy) <= radius_km
    gx, gy, dx, dy = gx[inside], gy[inside], dx[inside], dy[inside]
    dist = np.hypot(dx, dy)
    home = np.exp(-(dist / (0.55 * radius_km)) ** 2)
    work = 3.0 * np.exp(-(dist / (0.12 * radius_km)) ** 2)
    p = load_places()
    px, py = tiles_xy(p.lon, p.lat, zoom)
    hx, hy = (px - cx) * tile_km, (py - cy) * tile_km
    rng = np.random.default_rng((seed, 2_000_003))
    for i in np.nonzero((np.hypot(hx, hy) <= radius_km) & (np.hypot(hx, hy) > 1.0))[0]:
        s = 0.8 + 1.5 * math.sqrt(p.pop[i] / 1e6) * rng.uniform(0.8, 1.25)
        bump = np.exp(-((dx - hx[i]) ** 2 + (dy - hy[i]) ** 2) / (2 * s * s))
        home += (0.3 + 2.0 * p.pop[i] / 1e6) * bump
        work += 0.4 * (0.3 + 2.0 * p.pop[i] / 1e6) * np.exp(-((dx - hx[i]) ** 2 + (dy - hy[i]) ** 2) / (0.5 * s * s))
    sd = np.hypot(dx - STADIUM_KM_EAST, dy)
    stadium = np.where(sd < 0.5 * tile_km, 0.7, 0.0) + np.where((sd >= 0.5 * tile_km) & (sd < 1.5 * tile_km), 0.3 / 8, 0.0)
    qks = tuple(arrays_to_quadkeys(gx, gy, zoom))
    return _MetroFields(qks, home / home.sum(), work / work.sum(), stadium / stadium.sum())


def metro_day(seed: int = 1, *, windows: int = 288, window_s: float = 300.0, peak_events: float = METRO_PEAK_EVENTS,
              workers: int = METRO_WORKERS, stadium_share: float = STADIUM_PEAK_SHARE) -> Scenario:
    """A metro commute day: homes and workplaces with two commute peaks, plus an evening stadium event.

    Load per tile = ``home(h) * homes + work(h) * workplaces + commute(h) * (homes + workplaces) / 2``
    (:func:`commute_profiles`), plus the stadium's crowd (:func:`stadium_level`) on its footprint
    (a tile 8 km east of the centre and its ring). ``max_load`` = the busiest window's expected
    total / ``workers``; the crowd at full is ``stadium_share`` of one worker's cap.

    Notes
    -----
    No controller can see a crowd before its first window closes, so the window after it (37.5 %
    of a 20-minute ramp at 5-minute windows) runs on a spec decided without it: the default share
    (40 % of a cap) fits in the headroom; 90 % puts that worker at ~112 % for one window.
    """
    f = _metro_fields(seed, METRO_ZOOM, METRO_RADIUS_KM)

    def shape(t: float) -> FloatArray:
        h = ((t + 0.5) * window_s / 3600.0) % 24.0
        home, work, commute = commute_profiles(h)
        return home * f.home + work * f.work + commute * 0.5 * (f.home + f.work)

    scale = peak_events / max(float(shape(t).sum()) for t in range(windows))
    cap = round_cap(peak_events / workers)

    def expected(t: float) -> FloatArray:
        h = ((t + 0.5) * window_s / 3600.0) % 24.0
        return scale * shape(t) + stadium_share * cap * stadium_level(h) * f.stadium

    series = CellSeries(f.qks, expected, windows, seed, source=f"metro-day(seed={seed})")
    return Scenario("metro-day", f"London {METRO_RADIUS_KM:g} km disc, {len(f.qks)} tiles at zoom {METRO_ZOOM}, two "
                    f"commute peaks, a stadium ramping up over {STADIUM_RAMP_UP_S / 60:g} min to "
                    f"{100 * stadium_share:.0f}% of a worker; {windows} windows of {window_s / 60:g} min", series,
                    cap, window_s, window_s, SWAP_SHARE * window_s)


# ---------------------------------------------------------------------------
# cost day: events cost the workers unevenly, so counts alone misjudge the load
# ---------------------------------------------------------------------------

COST_FACTOR = 10.0
COST_AREAS = 12  # metro areas (among the 60 most populous places) whose events cost COST_FACTOR x
COST_AREA_KM = 40.0


def cost_day(seed: int = 1, *, windows: int = 144, window_s: float = 600.0,
             peak_events: float = GLOBAL_PEAK_EVENTS, workers: int = GLOBAL_WORKERS) -> Scenario:
    """The global day where events within 40 km of some big places cost 10x the CPU (what balancing on
    the workers' measured cost is for).

    Rates are in units of the day's mean CPU per event (so ``max_load`` stays in "events at mean
    cost"); which places are expensive depends on ``seed``.
    """
    qks, share, lon = _global_geography(seed, GLOBAL_ZOOM)
    p = load_places()
    rng = np.random.default_rng((seed, 3_000_017))
    big = np.argsort(-p.pop, kind="stable")[:60]
    chosen = rng.choice(big, size=COST_AREAS, replace=False)
    x, y = _cell_xy(qks)
    clon, clat = code_centres(x, y, GLOBAL_ZOOM)
    expensive = np.zeros(len(qks), dtype=bool)
    for i in chosen:
        d = np.hypot((clon - p.lon[i]) * np.cos(np.radians(p.lat[i])), clat - p.lat[i]) * 111.32
        expensive |= d <= COST_AREA_KM
    raw = np.where(expensive, COST_FACTOR, 1.0)
    scale = _global_scale(share, lon, window_s, windows, peak_events)
    expected = _diurnal(share, lon, scale, window_s)
    day = np.sum([expected(t) for t in range(windows)], axis=0)
    rates = raw / float((day * raw).sum() / day.sum())
    series = CellSeries(qks, expected, windows, seed, rates=rates, source=f"cost-day(seed={seed})")
    return Scenario("cost-day", f"global day; events within {COST_AREA_KM:g} km of {COST_AREAS} big places "
                    f"({100 * float((day * expensive).sum() / day.sum()):.0f}% of events) cost {COST_FACTOR:g}x",
                    series, round_cap(peak_events / workers), window_s, window_s, SWAP_SHARE * window_s)


def _cell_xy(qks: tuple[str, ...]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    from geokernel.geo.tiles import quadkeys_to_arrays

    x, y, _ = quadkeys_to_arrays(qks)
    return x, y


SCENARIOS: dict[str, Callable[..., Scenario]] = {"global-day": global_day, "metro-day": metro_day,
                                                 "cost-day": cost_day}


def scenario(name: str, seed: int = 1) -> Scenario:
    """Return the built-in scenario ``name`` drawn with ``seed``.

    Raises
    ------
    SimulationError
        For an unknown name (the message lists the known ones).
    """
    if name not in SCENARIOS:
        raise SimulationError(f"unknown scenario {name!r}; built-in scenarios are {', '.join(SCENARIOS)}")
    return SCENARIOS[name](seed)
