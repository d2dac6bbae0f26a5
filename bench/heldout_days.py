"""Held-out days for ``simulate``, drawn from :func:`heldout.places500` (places the other benchmarks never use).

:func:`crowd_day` is a held-out day: 288 five-minute windows of ~36k quadkeys of places in Britain and Ireland at
zoom 15, diurnal, with stadium crowds ramping up over 20 minutes to 60-100 % of a cap, and a new spec live 10 minutes
after its snapshot; :func:`crowd_fixtures` the same crowds as an operator would declare them (``simulate --crowds``).

:func:`quiet_day` is a held-out day for a small fleet: one country's places at zoom 15, a few events per
forecast region and window, flat or slowly ramping, 5-10 workers.

:func:`write_windows` writes a day as the counts CSVs ``simulate`` reads, :func:`run_simulate` runs the command on
them in a fresh process, as a user does.
"""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from datasets import scatter
from geography import FloatArray, IntArray
from heldout import Places, places500

from geokernel.geo.tiles import arrays_to_quadkeys, quadkey_to_tile
from partitioner.simulate.places import activity, code_centres, point_codes
from partitioner.simulate.scenarios import (
    STADIUM_OPEN,
    STADIUM_RAMP_DOWN_S,
    STADIUM_RAMP_UP_S,
    SWAP_SHARE,
    Scenario,
    stadium_level,
)
from partitioner.simulate.windows import CellSeries

DAY_BOX = (-10.7, 49.8, 1.9, 59.0)  # Britain and Ireland
DAY_COUNTRIES = ("GB", "IE", "IM", "JE", "GG")
DAY_ZOOM = 15
DAY_PEAK_EVENTS = 150_000.0  # events per 5-minute window at the daily peak
DAY_WORKERS = 60
CROWDS = 4  # stadium crowds in a day
CROWD_SHARE = (0.6, 1.0)  # each crowd at full, as a share of one worker's cap


class Crowd(NamedTuple):
    cell: int  # index into the day's cells
    start_h: float  # the match starts (full crowd) at this UTC hour
    share: float  # full crowd as a share of the cap


def _crowd_setup(seed: int, crowds: int, crowd_share: tuple[float, float]
                 ) -> tuple[FloatArray, tuple[str, ...], list[Crowd]]:
    """A crowd day's cells (shares, quadkeys) and its crowds, drawn in that order from the seed."""
    p = places500()
    west, south, east, north = DAY_BOX
    sel = np.flatnonzero(np.isin(p.country, DAY_COUNTRIES) & (p.lon >= west) & (p.lon <= east) & (p.lat >= south)
                         & (p.lat <= north))
    rng = np.random.default_rng((seed, 25_288))
    codes, share, qks = _day_cells(rng, p, sel, 1_200_000)
    big = sel[np.argsort(-p.pop[sel], kind="stable")[:40]]
    venues = rng.choice(big, size=crowds, replace=False)
    vcode = point_codes(p.lon[venues], p.lat[venues], DAY_ZOOM)
    crowd_list = [Crowd(int(np.argmin(np.abs(codes - c))), float(rng.uniform(14.0, 21.0)),
                        float(rng.uniform(*crowd_share))) for c in vcode]
    return share, qks, crowd_list


def crowd_day(seed: int = 1, *, windows: int = 288, window_s: float = 300.0, latency_s: float = 600.0,
              peak_events: float = DAY_PEAK_EVENTS, workers: int = DAY_WORKERS, crowds: int = CROWDS,
              crowd_share: tuple[float, float] = CROWD_SHARE, ticks: int = 1) -> Scenario:
    """A held-out day: Britain and Ireland's places at zoom 15, diurnal, with stadium crowds; 10 minutes to live.

    Every place of :data:`DAY_COUNTRIES` scatters 0.3 + 1.5 sqrt(pop/1e6) km around it, weight ~ pop^0.7, times
    :func:`partitioner.simulate.places.activity` of the local hour (~36k non-empty quadkeys a window at the
    daytime peak). ``crowds`` stadiums (random big places, random evening starts) each ramp up over 20 minutes
    to ``crowd_share`` (low, high; default 60-100 %) of a cap on one tile
    (:func:`partitioner.simulate.scenarios.stadium_level`), stay for the match and leave over 30 minutes.
    ``max_load`` = the peak's expected total / ``workers``. The crowds are drawn after the places, so a day with
    other shares has the same places, venues and start times, and one with ``crowds=0`` the same places.
    ``ticks`` > 1 draws each window in that many ticks (the router's intervals, :meth:`CellSeries.ticks`): the same
    windows, each split over its ticks as the load expected at each tick's middle (a crowd's ramp within the window).
    """
    share, qks, crowd_list = _crowd_setup(seed, crowds, crowd_share)
    local = 0.0  # UTC+0/+1: the solar hour is close enough

    def base(t: float) -> FloatArray:
        h = ((t + 0.5) * window_s / 3600.0 + local) % 24.0
        return share * float(activity(np.array([h]))[0])

    scale = peak_events / max(float(base(t).sum()) for t in range(windows))
    cap = _round(peak_events / workers)

    def expected(t: float) -> FloatArray:
        h = ((t + 0.5) * window_s / 3600.0) % 24.0
        e = scale * base(t)
        for c in crowd_list:
            e[c.cell] += c.share * cap * stadium_level(h - c.start_h + 19.0)
        return e

    series = CellSeries(qks, expected, windows, seed, source=f"crowd-day(seed={seed})", ticks_per_window=ticks)
    names = ", ".join(f"{100 * c.share:.0f}% at {c.start_h:.1f} h" for c in crowd_list)
    return Scenario("crowd-day", f"{len(qks)} cells of Britain and Ireland at zoom {DAY_ZOOM}, diurnal, stadium "
                    f"crowds ({names}); {windows} windows of {window_s / 60:g} min", series, cap, window_s, latency_s,
                    SWAP_SHARE * window_s)


def crowd_fixtures(seed: int = 1, *, epoch0: float, window_s: float = 300.0, peak_events: float = DAY_PEAK_EVENTS,
                   workers: int = DAY_WORKERS, crowds: int = CROWDS, crowd_share: tuple[float, float] = CROWD_SHARE
                   ) -> list[dict[str, Any]]:
    """The crowds of :func:`crowd_day` as an operator would declare them (``simulate --crowds``): the venue's tile
    centre, from the first arrivals to the last departures (window 0 starting at ``epoch0``), the full crowd per
    second. What a fixture list gives; the day's windows are not looked at."""
    _share, qks, crowd_list = _crowd_setup(seed, crowds, crowd_share)
    cap = _round(peak_events / workers)
    open_h, close_h = STADIUM_OPEN
    out = []
    for i, c in enumerate(crowd_list):
        t = quadkey_to_tile(qks[c.cell])
        lon, lat = (float(v[0]) for v in code_centres(np.array([t.x]), np.array([t.y]), DAY_ZOOM))
        first = c.start_h - STADIUM_RAMP_UP_S / 3600.0
        last = c.start_h + (close_h - open_h) + STADIUM_RAMP_DOWN_S / 3600.0
        out.append({"name": f"venue {i + 1}", "lat": round(lat, 6), "lon": round(lon, 6),
                    "start": epoch0 + first * 3600.0, "end": epoch0 + last * 3600.0,
                    "load_per_s": c.share * cap / window_s})
    return out


def _day_cells(rng: np.random.Generator, p: Places, sel: IntArray, points: int
               ) -> tuple[IntArray, FloatArray, tuple[str, ...]]:
    """A day's cells at :data:`DAY_ZOOM`: ``points`` drawn from the places ``sel`` (weight ~ pop^0.7), scattered
    0.3 + 1.5 sqrt(pop/1e6) km around them; the cells' tile codes, shares of the points and quadkeys."""
    mass = np.maximum(p.pop[sel], 500.0) ** 0.7
    idx = rng.choice(sel, size=points, p=mass / mass.sum())
    lon, lat = scatter(rng, p.lon[idx], p.lat[idx], 0.3 + 1.5 * np.sqrt(p.pop[idx] / 1e6))
    codes, cnt = np.unique(point_codes(lon, lat, DAY_ZOOM), return_counts=True)
    mask = (1 << DAY_ZOOM) - 1
    return codes, cnt / cnt.sum(), tuple(arrays_to_quadkeys(codes >> DAY_ZOOM, codes & mask, DAY_ZOOM))


def run_simulate(windows: Path, max_load: float, strategies: str, policy: str | None, out: Path,
                 crowds: Path | None = None) -> tuple[float, dict[str, Any]]:
    """``python -m partitioner simulate`` on the counts CSVs in ``windows`` in a fresh process, as a user runs it
    (5-minute windows, 10 minutes to live; ``--crowds`` when ``crowds`` is given): its wall seconds and its JSON
    per strategy."""
    wall, _cpu, result = run_simulate_timed(windows, max_load, strategies, policy, out, crowds)
    return wall, result


def run_simulate_timed(windows: Path, max_load: float, strategies: str, policy: str | None, out: Path,
                       crowds: Path | None = None, extra: tuple[str, ...] = ()
                       ) -> tuple[float, float, dict[str, Any]]:
    """:func:`run_simulate` with ``extra`` arguments after the others (e.g. ``--tick-s 60`` for a folder of ticks):
    its wall seconds, its CPU seconds (user + system) and its JSON per strategy."""
    cmd = [sys.executable, "-m", "partitioner", "simulate", str(windows), "--max-load", f"{max_load:g}",
           "--window-s", "300", "--latency-s", "600", "--strategies", strategies, "--json", str(out), "-q", *extra]
    if policy:
        cmd += ["--policy", policy]
    if crowds is not None:
        cmd += ["--crowds", str(crowds)]
    t0 = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if proc.returncode:
        raise SystemExit(f"python -m partitioner simulate exited {proc.returncode} on {windows} (its error above)")
    result: dict[str, Any] = json.loads(out.read_text())["strategies"]
    return wall, cpu, result


QUIET_EVENTS = 8_000.0  # events per 5-minute window of a quiet day
QUIET_KINDS = ("flat", "ramp")


def quiet_day(seed: int = 1, *, kind: str = "flat", workers: int = 5, events: float = QUIET_EVENTS,
              windows: int = 288, window_s: float = 300.0, latency_s: float = 600.0) -> Scenario:
    """A held-out quiet day: a small fleet on a sparse load with no diurnal swing, 10 minutes to live.

    The places of one country with more than 200 of them (drawn per ``seed``) scatter 300,000 points around
    them, weight ~ pop^0.7, at zoom 15 (5-60k cells); each window is ``Poisson(events x share)`` per cell (a few
    events per forecast region), ``flat`` all day or a slow ``ramp`` from 0.6 to 1.4 times ``events``.
    ``max_load`` = ``events / workers``, rounded. The load where a forecast's noise, not its trend, decides
    the fleet: a handful of workers, each spare one 10-20 % of the cost.
    """
    if kind not in QUIET_KINDS:
        raise ValueError(f"quiet day kind {kind!r} is not one of {QUIET_KINDS!r}")
    p = places500()
    rng = np.random.default_rng((seed, 4_881))
    names, sizes = np.unique(p.country, return_counts=True)
    country = str(rng.choice(names[sizes > 200]))
    _, share, qks = _day_cells(rng, p, np.flatnonzero(p.country == country), 300_000)

    def expected(t: float) -> FloatArray:
        level = 1.0 if kind == "flat" else 0.6 + 0.8 * t / max(1, windows - 1)
        return share * events * level

    series = CellSeries(qks, expected, windows, seed, source=f"quiet-day({kind}, seed={seed})")
    return Scenario("quiet-day", f"{len(qks)} cells of {country} at zoom {DAY_ZOOM}, {kind}, {events:,.0f} events "
                    f"a window; {windows} windows of {window_s / 60:g} min", series, _round(events / workers),
                    window_s, latency_s, SWAP_SHARE * window_s)


def _round(raw: float) -> float:
    mag = 10.0 ** math.floor(math.log10(raw)) / 10.0
    return float(math.ceil(raw / mag) * mag)


def write_windows(sc: Scenario, out: Path) -> list[Path]:
    """Write every window of ``sc`` as ``window-NNN.csv`` (``quadkey,weight``) into ``out``; return the files."""
    from datasets import write_csv

    out.mkdir(parents=True, exist_ok=True)
    files = []
    for t in range(len(sc.series)):
        f = out / f"window-{t:03d}.csv"
        write_csv(sc.series.window(t).events, f)
        files.append(f)
    return files


def write_ticks(sc: Scenario, out: Path) -> list[Path]:
    """Write every tick of ``sc`` (a series drawn with ticks) as ``tick-NNNNN.csv`` into ``out``, windows in order
    (``simulate --tick-s`` reads them back, each window the sum of its ticks); return the files."""
    from datasets import write_csv

    from partitioner.simulate.windows import ticks_of

    out.mkdir(parents=True, exist_ok=True)
    files = []
    for t in range(len(sc.series)):
        for tick in ticks_of(sc.series, t):
            f = out / f"tick-{len(files):05d}.csv"
            if len(tick.events):
                write_csv(tick.events, f)
            else:
                f.write_text("quadkey,weight\n", encoding="utf-8")
            files.append(f)
    return files


