"""Quiet days of small fleets: the default policy against the reactive one, through ``python -m partitioner simulate``.

For each ``--seeds`` seed, :func:`heldout_days.quiet_day` draws one country's places (a different country per seed), a
sparse load of a few events per forecast region and window, ``flat`` all day or a slow ``ramp``, for a fleet of
``--workers`` (5 and 10 by default: each spare worker is 10-20 % of the cost). Each day is written as counts CSVs and
replayed by the CLI in a fresh process with ``--strategies default,reactive`` (10 minutes to live): the **baseline**
is the reactive policy in the same run (it sizes on the window that closed, with no forecast), the floor the
``ceil(load / cap)`` every cost is measured against.

What it measures: on such a load the forecast's noise, not a trend, decides the fleet: a policy that extrapolates
noise as trends, takes each region's larger end of the interval, or builds its first spec on one window as if the
cells empty in it were empty costs more than sizing on the last window, or puts a worker over the cap
(``bench/README.md``, "Quiet days"). ``--seeds 4 5 6`` were first run after the forecast was changed for seeds 1-3
(one of their days then set the first spec's headroom).

Targets: the default's cost <= the reactive's + 1 % on every day; <= 0.2 % of worker-windows over the cap and the
worst <= 110 % (the control limits of ``bench_control.py``).

Run: ``.venv/bin/python bench/bench_quiet.py [--seeds 1 2 3] [--workers 5 10] [--policy JSON]`` (~1.5 min for three seeds).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import heldout_days as days  # noqa: E402

TARGET_VS_REACTIVE = 1.01
TARGET_OVER_CAP = 0.002
TARGET_WORST = 1.10


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--workers", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--policy", help="the controller's POLICY_JSON for the default (default: the Lambda's defaults)")
    args = ap.parse_args(argv)
    print(f"policy: {args.policy or 'defaults'}")
    print(f"{'day':34} {'workers':>7} {'wall s':>6} {'default':>8} {'reactive':>8} {'ratio':>6} {'over cap':>8} "
          f"{'worst':>7}  targets")
    missed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for kind in days.QUIET_KINDS:
                for workers in args.workers:
                    sc = days.quiet_day(seed, kind=kind, workers=workers)
                    day = Path(tmp) / f"{seed}-{kind}-{workers}"
                    days.write_windows(sc, day)
                    wall, r = days.run_simulate(day, sc.max_load, "default,reactive", args.policy, day / "sim.json")
                    d, re = r["default"], r["reactive"]
                    cost, base = float(d["cost_ratio"]["carry"]), float(re["cost_ratio"]["whole"])
                    over, worst = float(d["over_cap_share"]), float(d["worst_utilisation"])
                    bad = []
                    if cost > base * TARGET_VS_REACTIVE:
                        bad.append(f"cost {cost:.3f}x > reactive {base:.3f}x")
                    if over > TARGET_OVER_CAP:
                        bad.append(f"over cap {100 * over:.2f}% > {100 * TARGET_OVER_CAP:g}%")
                    if worst > TARGET_WORST:
                        bad.append(f"worst {100 * worst:.1f}% > {100 * TARGET_WORST:g}%")
                    missed += bool(bad)
                    name = f"seed {seed} {kind} {sc.description.split(' at ')[0]}"
                    print(f"{name:34} {workers:>7} {wall:>6.1f} {cost:>7.3f}x {base:>7.3f}x {cost / base:>6.3f} "
                          f"{100 * over:>7.2f}% {100 * worst:>6.1f}%  {'PASS' if not bad else 'MISS: ' + '; '.join(bad)}",
                          flush=True)
    print(f"{missed} day(s) miss a target")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
