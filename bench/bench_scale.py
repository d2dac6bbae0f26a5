"""The control plane's AWS calls against fleet size: the scale simulation (``python -m local.scale``) at several fleet
sizes in the same run, each API's calls per simulated second fitted as ``rate ~ workers ** exponent``.

Each size is a fresh child process (its own moto and simulated clock) running the whole scenario: fleet start, steady
routing, a swap that moves ~5 % of the load, a swap that adds ~20 % workers, the drain. Events per second scale with
the fleet (``--events-per-worker``, 100 by default: 100,000 events/s at 1,000 workers). Printed per size: the phases,
the worst margins; then per control-plane API its rates at each size and the fitted exponent (1 = linear; above
``LINEAR_MAX_EXPONENT`` = 1.25 fails), and the worst margin of any API at any size (below 2x fails).

Also per phase (the steady state, the swap moving ~5 %, the swap adding ~20 %): each API's calls per simulated second
within that phase and its exponent (APIs under ``PHASE_FLOOR`` calls/s in a phase at every size are not fitted). The whole-run rates weigh the phases differently at each size (the fleet start
of 1,000 slots takes 405 simulated seconds, of 100 slots 60), so the per-phase rates are the like-for-like ones.

Run: ``.venv/bin/python bench/bench_scale.py [--workers 20 50 100]``; ``--results DIR...`` fits the runs already in
those ``python -m local.scale --out`` directories (``result.json`` and ``calls.json``) instead of running any. The simulation costs about 2-4 s of wall time per
simulated second at 100 workers on a 2-core machine (moto's request handling dominates); 1,000 workers is hours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geokernel.aws_budget.report import CONTROL_PLANE, LINEAR_MAX_EXPONENT, MIN_MARGIN, growth

ROOT = Path(__file__).resolve().parents[1]


def run_size(workers: int, events_per_worker: float, steady_s: float, out: Path) -> Path:
    """One simulation in a child process; the directory of its result.json and calls.json."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "local.scale", "--workers", str(workers), "--events-per-s",
                           str(events_per_worker * workers), "--steady", str(steady_s), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout[proc.stdout.find("scale simulation:"):].rstrip() if "scale simulation:" in proc.stdout
          else proc.stdout[-3000:] + proc.stderr[-3000:])
    if not _finished(out):
        raise SystemExit(f"the simulation at {workers} workers wrote no result (exit {proc.returncode})")
    print(f"  ({workers} workers: {time.monotonic() - started:.0f} s wall, exit {proc.returncode})\n")
    return out


def _finished(out: Path) -> bool:
    return (out / "result.json").is_file() and (out / "calls.json").is_file()


PHASES = ("steady", "swap v2", "swap v3")  # name prefixes of the phases fitted one by one
#: An API below this many calls per second within a phase at every size is a handful of calls (at 1,000 workers the
#: 5 % swap launched 3 tasks, 6 UpdateTaskProtection calls in 45 s, none at 100 or 300): too few to fit.
PHASE_FLOOR = 1.0


def phase_rates(result: dict[str, Any], calls: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per phase of :data:`PHASES`: each API's calls per simulated second within it (all scopes summed)."""
    start = float(result["sim_start"])
    spans = {}
    for ph in result["phases"]:
        for name in PHASES:
            if str(ph["name"]).startswith(name) and ph["end"] > ph["start"]:
                spans[name] = (start + float(ph["start"]), start + float(ph["end"]))
    out: dict[str, dict[str, float]] = {name: {} for name in spans}
    for series in calls["series"]:
        for name, (t0, t1) in spans.items():
            n = sum(v for t, v in series["seconds"].items() if t0 <= float(t) < t1)
            out[name][series["key"]] = out[name].get(series["key"], 0.0) + n / (t1 - t0)
    return out


def load_run(out: Path) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """A finished run's result.json and its per-phase rates (from calls.json)."""
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    return result, phase_rates(result, json.loads((out / "calls.json").read_text()))


def print_growth(title: str, sizes: list[int], rates: list[dict[str, float]], floor: float = 0.05) -> bool:
    """Print one table of rates and exponents; True when every API grows at most linearly."""
    fits = growth(sizes, rates, CONTROL_PLANE, floor)
    print(f"{title} at {', '.join(map(str, sizes))} workers")
    print(f"{'API':34} " + " ".join(f"{n:>10}" for n in sizes) + f" {'exponent':>9}")
    for g in fits:
        verdict = "" if g.linear else f"  FASTER THAN LINEAR (> {LINEAR_MAX_EXPONENT})"
        print(f"{g.key:34} " + " ".join(f"{r:10.2f}" for r in g.rates) + f" {g.exponent:9.2f}{verdict}")
    print()
    return all(g.linear for g in fits)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[20, 50, 100])
    p.add_argument("--events-per-worker", type=float, default=100.0)
    p.add_argument("--steady", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=ROOT / "out" / "bench_scale")
    p.add_argument("--results", type=Path, nargs="+", help="fit these finished runs' directories instead of running")
    a = p.parse_args(argv)
    if a.results:
        for d in a.results:
            if not _finished(d):
                p.error(f"--results {str(d)!r} has no result.json and calls.json of a finished run")
        dirs = list(a.results)
    else:
        dirs = [run_size(n, a.events_per_worker, a.steady, a.out / f"w{n}") for n in sorted(set(a.workers))]
    loaded = sorted((load_run(d) for d in dirs), key=lambda r: int(r[0]["config"]["workers"]))
    results, per_phase = [r for r, _ in loaded], [ph for _, ph in loaded]
    sizes = [int(r["config"]["workers"]) for r in results]
    for r, n in zip(results, sizes, strict=True):
        cfg = r["config"]
        print(f"{n} workers: {cfg['events_per_s']:,.0f} events/s, steady {cfg['steady_s']:g} s, "
              f"{r['sim_s']:g} simulated s in {r['wall_s']:.0f} s wall, {'OK' if r['ok'] else 'FAILED'}")
    print()
    if len(sizes) < 2 or sizes[0] < 2 or len(set(sizes)) != len(sizes):
        p.error(f"needs at least two different fleet sizes >= 2, got {sizes!r}")
    rates = [dict(r["rates"]) for r in results]
    linear = print_growth("control-plane calls per simulated second (whole run)", sizes, rates)
    for name in PHASES:
        if all(name in ph for ph in per_phase):
            linear &= print_growth(f"calls per simulated second within the phase {name!r}", sizes,
                                   [ph[name] for ph in per_phase], PHASE_FLOOR)
    worst = [(min((row["margin"] for row in r["budget"] if row["margin"] is not None), default=float("inf")),
              n) for r, n in zip(results, sizes, strict=True)]
    for margin, n in worst:
        print(f"worst margin at {n} workers: {margin:.2f}x (needs >= {MIN_MARGIN:g}x)")
    ok = linear and all(m >= MIN_MARGIN for m, _ in worst) and all(r["ok"] for r in results)
    print("RESULT:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
