"""Control-quality benchmark: every strategy against the floor ceil(load / cap), in the same run.

Run ``.venv/bin/python bench/bench_control.py [--seeds 1,2,3] [--quick] [--only global,metro,cost]``.
Everything runs through ``partitioner.simulate`` (the code behind ``python -m partitioner simulate``):
each strategy sees a window once it has closed, its specs go live one window later, each window's
true load is applied to the spec live in it, and both fleets are counted during every swap.

1. **Global day** (every GeoNames place, diurnal by local solar time, 144 windows of 10 min, cap for
   ~100 workers at peak), each seed: ``floor``, ``static``, ``rebuild``, ``reactive`` and ``default``.
   Targets for ``default`` with carry-over swaps: cost <= 1.20x the floor (swaps counted), <= 0.2 %
   of worker-windows over cap, worst <= 110 %, median moved <= 10 %.
2. **Metro day** (London, two commute peaks and a stadium ramping up over 20 min, 288 windows of
   5 min): ``default`` on every seed (same targets); ``static``, ``rebuild`` and ``reactive`` on the
   first seed (``--metro-baselines`` for every seed).
3. **Cost day** (the global day where some areas cost 10x the CPU, so load is CPU cost, not events): ``counts`` (the
   controller balancing on event counts) against ``default`` (balancing on the cost rates the workers
   measured in earlier windows). Targets: with measured cost the p10-p95 spread of worker CPU is
   <= 10 points; on counts max / median worker CPU is >= 2x (both medians over windows).
4. **Speed**: the global day's first seed, ``floor`` + ``default`` only: the whole simulation's wall
   time (144 windows of ~20k quadkeys) <= 60 s.

The forecast only ever sees windows that have closed; the floor and every strategy are measured on
the same windows. Timings are wall-clock on this machine (shared CPUs make them slower, never faster).

The controllers run with the fast path, as the Lambdas do (``--fast-path off``: the window path alone): each scenario
is drawn in one-minute ticks (its windows the same draws), the router's surge meter counts every tick, and a signal's
relief is live 90 s after the meter's check (``partitioner.simulate.fastpath``'s defaults; bench/README.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from geokernel.surge.meter import SurgeSettings  # noqa: E402
from partitioner.control.controller import ControlSettings  # noqa: E402
from partitioner.simulate.fastpath import FastSettings  # noqa: E402
from partitioner.simulate.scenarios import Scenario, scenario  # noqa: E402
from partitioner.simulate.session import SimSettings, Simulation, simulate  # noqa: E402
from partitioner.simulate.windows import CellSeries  # noqa: E402

COST_MAX = 1.20
OVER_CAP_MAX = 0.002
WORST_MAX = 1.10
MOVED_MAX = 0.10
SPREAD_MAX = 10.0
COUNTS_RATIO_MIN = 2.0
SPEED_MAX_S = 60.0
MODE_OF = {"floor": "-", "static": "-", "rebuild": "whole", "reactive": "whole", "counts": "carry", "default": "carry"}


class Verdicts:
    """PASS/FAIL lines, counted for the final summary."""

    def __init__(self) -> None:
        self.lines: list[tuple[bool, str]] = []

    def check(self, ok: bool, text: str) -> None:
        self.lines.append((ok, text))
        print(f"  {'PASS' if ok else 'FAIL'}  {text}", flush=True)


def pct(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{100 * v:.{digits}f}%"


TICK_S = 60.0
FAST = True  # main(): --fast-path


def run(sc: Scenario, names: Sequence[str]) -> Simulation:
    """Simulate ``names`` on ``sc``, with the fast path on one-minute ticks unless ``--fast-path off``."""
    if not FAST:
        return simulate(sc.series, SimSettings(sc.max_load, sc.window_s, sc.latency_s, sc.swap_s), names,
                        ControlSettings())
    k = max(1, round(sc.window_s / TICK_S)) if isinstance(sc.series, CellSeries) else 1  # a drawn series has ticks
    series = replace(sc.series, ticks_per_window=k) if k > 1 else sc.series
    fast = FastSettings()
    fast = replace(fast, surge=SurgeSettings(bucket_share=1.0 / k,
                                             horizon_s=sc.window_s / k + fast.signal_s + fast.deploy_s))
    settings = SimSettings(sc.max_load, sc.window_s, sc.latency_s, sc.swap_s, fast=fast)
    return simulate(series, settings, names, ControlSettings())


def table(summaries: Mapping[str, Mapping[str, Any]]) -> None:
    print(f"  {'strategy':<10}{'swaps':>7}{'cost whole':>11}{'cost carry':>11}{'over cap':>10}{'worst':>7}{'p99':>6}"
          f"{'redeploys':>10}{'moved med':>10}{'moved max':>10}{'spread':>8}{'max/med':>8}{'s/window':>9}")
    for name, s in summaries.items():
        print(f"  {name:<10}{MODE_OF.get(name, '-'):>7}{s['cost_ratio']['whole']:>10.2f}x{s['cost_ratio']['carry']:>10.2f}x"
              f"{pct(s['over_cap_share'], 2):>10}{pct(s['worst_utilisation'], 0):>7}{pct(s['p99_utilisation'], 0):>6}"
              f"{s['redeploys']:>10}{pct(s['moved_median']):>10}{pct(s['moved_max']):>10}"
              f"{s['spread_p10_p95']:>7.1f}p{s['max_over_median']:>7.2f}x{s['seconds_per_window']:>9.3f}", flush=True)


def targets(v: Verdicts, label: str, s: Mapping[str, Any]) -> None:
    cost = s["cost_ratio"]["carry"]
    v.check(cost <= COST_MAX, f"{label}: default cost {cost:.3f}x the floor with carry-over swaps (<= {COST_MAX:.2f}x)")
    v.check(s["over_cap_share"] <= OVER_CAP_MAX, f"{label}: {pct(s['over_cap_share'], 3)} of worker-windows over cap "
                                                 f"(<= {pct(OVER_CAP_MAX)})")
    v.check(s["worst_utilisation"] <= WORST_MAX, f"{label}: worst worker {pct(s['worst_utilisation'])} "
                                                 f"(<= {pct(WORST_MAX, 0)})")
    moved = s["moved_median"] if s["moved_median"] is not None else 0.0
    v.check(moved <= MOVED_MAX, f"{label}: median moved {pct(moved)} per redeploy (<= {pct(MOVED_MAX, 0)})")


def section_day(v: Verdicts, name: str, seeds: Sequence[int], baselines_on: Sequence[int]) -> dict[int, Simulation]:
    out: dict[int, Simulation] = {}
    for seed in seeds:
        sc = scenario(name, seed)
        names = ["floor", "static", "rebuild", "reactive", "default"] if seed in baselines_on else ["floor", "default"]
        sim = run(sc, names)
        print(f"\n{name} seed {seed}: {sc.description}; max_load {sc.max_load:g}, latency {sc.latency_s:g} s, swap "
              f"overlap {sc.swap_s:g} s; {sim.wall_s:.0f} s")
        table(sim.summaries)
        targets(v, f"{name} seed {seed}", sim.summaries["default"])
        out[seed] = sim
    return out


def section_cost(v: Verdicts, seeds: Sequence[int]) -> None:
    print("\n== 3. Cost day: balancing on event counts vs on measured cost ==")
    for seed in seeds:
        sc = scenario("cost-day", seed)
        sim = run(sc, ["floor", "counts", "default"])
        print(f"\ncost-day seed {seed}: {sc.description}; {sim.wall_s:.0f} s")
        table(sim.summaries)
        counts, cost = sim.summaries["counts"], sim.summaries["default"]
        v.check(cost["spread_p10_p95"] <= SPREAD_MAX, f"cost-day seed {seed}: measured cost keeps the p10-p95 spread "
                                                      f"of worker CPU at {cost['spread_p10_p95']:.1f} points "
                                                      f"(<= {SPREAD_MAX:g})")
        v.check(counts["max_over_median"] >= COUNTS_RATIO_MIN, f"cost-day seed {seed}: counts leave max / median "
                                                                f"worker CPU at {counts['max_over_median']:.2f}x "
                                                                f"(>= {COUNTS_RATIO_MIN:g}x)")


def section_speed(v: Verdicts, seed: int) -> None:
    print("\n== 4. Speed: python -m partitioner simulate global-day --strategies floor,default ==")
    sc = scenario("global-day", seed)
    qks = [len(sc.series.window(t).events) for t in range(0, len(sc.series), 12)]
    began = time.perf_counter()
    sim = run(sc, ["floor", "default"])
    wall = time.perf_counter() - began
    s = sim.summaries["default"]
    print(f"  {len(sc.series)} windows of {min(qks)}-{max(qks)} quadkeys: {wall:.1f} s in all (the controller "
          f"{s['seconds_per_window']:.3f} s a window, {s['redeploys']} redeploys)")
    v.check(wall <= SPEED_MAX_S, f"simulate {len(sc.series)} windows of ~{sum(qks) // len(qks)} quadkeys in "
                                 f"{wall:.1f} s (<= {SPEED_MAX_S:g} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seeds", default="1,2,3", help="random draws of every scenario (default 1,2,3)")
    ap.add_argument("--quick", action="store_true", help="first seed only (a few minutes)")
    ap.add_argument("--only", default="global,metro,cost,speed", help="sections to run (default all)")
    ap.add_argument("--metro-baselines", action="store_true", help="static/rebuild/reactive on every metro seed")
    ap.add_argument("--fast-path", choices=("on", "off"), default="on",
                    help="the router's surge meter and the partitioner's relief on one-minute ticks (default on)")
    args = ap.parse_args(argv)
    global FAST
    FAST = args.fast_path == "on"
    print(f"fast path: {args.fast_path}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.quick:
        seeds = seeds[:1]
    only = set(args.only.split(","))
    t0 = time.perf_counter()
    v = Verdicts()
    if "global" in only:
        print("== 1. Global day: static, rebuild and reactive (whole-fleet swaps) beside the default (carry-over) ==")
        section_day(v, "global-day", seeds, seeds)
    if "metro" in only:
        print("\n== 2. Metro commute day with a stadium: the same limits ==")
        section_day(v, "metro-day", seeds, seeds if args.metro_baselines else seeds[:1])
    if "cost" in only:
        section_cost(v, seeds[:2])
    if "speed" in only:
        section_speed(v, seeds[0])
    failed = [t for ok, t in v.lines if not ok]
    print(f"\n{len(v.lines) - len(failed)} PASS, {len(failed)} FAIL; benchmark wall time {time.perf_counter() - t0:.0f} s")
    for t in failed:
        print(f"  FAIL  {t}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
