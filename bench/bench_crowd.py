"""The control tail: held-out days with stadium crowds through ``python -m partitioner simulate``, as a user runs it.

For each ``--seeds`` seed, :func:`heldout_days.crowd_day` is drawn three times: without crowds (the **baseline**: what the
policy costs on that day's places alone), with four crowds of 30-50 % of a cap, and with four of 60-100 % (the
default draw). Each crowd day is replayed twice: unannounced, and with its crowds declared as an operator's fixture
list would (``simulate --crowds``: venue, first arrivals to last departures, full crowd per second;
:func:`heldout_days.crowd_fixtures`, made from the draw's venues and times, never from its windows). Each day (288 windows
of 5 minutes, ~36k quadkeys, a spec live 10 minutes after its snapshot, cap 2,500) is written as counts CSVs of
one-minute ticks (``--tick-s``, the router's interval: each window the same draw as without ticks, split over its
ticks as the load expected at each tick's middle, so a crowd ramps within its windows) and replayed by the CLI in a
fresh process, ``--strategies default`` (carry-over swaps), optionally with ``--policy JSON``.

**The fast path** (the Lambdas' default, and ``simulate``'s): the router's surge meter counts every tick under the
live spec, and a signal is relieved by the partitioner's delta on the newest published spec. The model's timings:
15 s from the meter's check to the relief published (the router's conditional put, the S3 notification, the
partitioner's read, relief and publish), 75 s from the publish to the flip (Kinesis ``CreateStream`` of the version's
stream, a new slot's Fargate task started and warm, the carried slots loading what they gain), one deployment at a
time with 15 s of drain between (a relief waits for a window's deployment in flight): a relief is live 90 s after
the check at the earliest, and the check comes at the end of the minute that showed the surge. ``--compare`` also
replays each day with ``--fast-path off`` (the window path alone, the loop before the fast path) in the same run.

Printed per day: the command's wall and CPU time, the cost against the floor (and against the same seed's day without
crowds, measured in this run), the share of worker-windows over the cap, the worst worker-window, the p99, and the
fast path's reliefs (signals).

Targets (#25, #61): wall time <= 60 s; on every crowd day, declared or not, worst worker-window <= 110 % with cost
<= 1.15x the floor.

Run: ``.venv/bin/python bench/bench_crowd.py [--seeds 1 2] [--compare] [--policy '{"headroom_z": 1.5}']``
(~1 min a run, five runs a seed, ten with ``--compare``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import heldout  # noqa: E402
import heldout_days as days  # noqa: E402

from partitioner.simulate.session import EPOCH0  # noqa: E402

TARGET_WALL_S = 60.0
TARGET_WORST = 1.10
TARGET_COST = 1.15
TICK_S = 60.0
#: name -> (crowds, share of a cap low, high) of the day's stadium crowds
DAYS: dict[str, tuple[int, tuple[float, float]]] = {
    "no crowds": (0, days.CROWD_SHARE), "crowds 30-50%": (days.CROWDS, (0.3, 0.5)),
    "crowds 60-100%": (days.CROWDS, days.CROWD_SHARE),
}
DECLARED = " declared"  # suffix of a day replayed with its crowds declared (``simulate --crowds``)
OFF = " (window path)"  # suffix of a day replayed with the fast path off (``--compare``)


def _row(label: str, seed: int, wall: float, cpu: float, r: dict[str, Any], base_cost: float | None,
         crowds: int) -> tuple[str, bool]:
    """The printed line of one run and whether it missed a target."""
    cost, worst = float(r["cost_ratio"]["carry"]), float(r["worst_utilisation"])
    bad = []
    if wall > TARGET_WALL_S:
        bad.append(f"wall {wall:.0f} s > {TARGET_WALL_S:g} s")
    if crowds and worst > TARGET_WORST:
        bad.append(f"worst {100 * worst:.1f}% > {100 * TARGET_WORST:g}%")
    if crowds and cost > TARGET_COST:
        bad.append(f"cost {cost:.3f}x > {TARGET_COST:g}x")
    rel = f"{cost / base_cost:.3f}x" if base_cost else "-"
    fast = r.get("fast_path")
    fp = f"{fast['reliefs']} ({fast['signals']})" if fast else "off"
    return (f"{label:36} {seed:>4} {wall:>6.1f} {cpu:>6.1f} {cost:>5.3f}x {rel:>10} "
            f"{100 * float(r['over_cap_share']):>8.3f}% {100 * worst:>6.1f}% {100 * float(r['p99_utilisation']):>4.0f}% "
            f"{fp:>9}  {'PASS' if not bad else 'MISS: ' + '; '.join(bad)}"), bool(bad)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--policy", help="the controller's POLICY_JSON for every day (default: the Lambda's defaults)")
    ap.add_argument("--compare", action="store_true", help="also replay every day with the fast path off")
    ap.add_argument("--only", choices=sorted(DAYS), action="append", help="only these days (repeat the flag)")
    ap.add_argument("--extra", default="", help="more simulate arguments, space separated (e.g. '--deploy-s 105')")
    args = ap.parse_args(argv)
    print(f"policy: {args.policy or 'defaults'}; ticks of {TICK_S:g} s; simulate extra: {args.extra or '-'}")
    print(f"{'day':36} {'seed':>4} {'wall s':>6} {'cpu s':>6} {'cost':>6} {'/no crowds':>10} {'over cap':>9} "
          f"{'worst':>7} {'p99':>5} {'reliefs':>9}  targets")
    missed = 0
    extra = ("--tick-s", f"{TICK_S:g}", *args.extra.split())
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            base_cost: dict[str, float] = {}
            for name, (crowds, share) in DAYS.items():
                if args.only and name not in args.only and crowds:
                    continue
                day = Path(tmp) / f"{seed}-{crowds}-{share[0]:g}"
                days.write_ticks(days.crowd_day(seed, crowds=crowds, crowd_share=share,
                                                ticks=round(300.0 / TICK_S)), day)
                runs: list[tuple[str, Path | None]] = [(name, None)]
                if crowds:
                    fixtures = day.with_suffix(".crowds.json")
                    fixtures.write_text(json.dumps(days.crowd_fixtures(seed, epoch0=EPOCH0, crowds=crowds,
                                                                          crowd_share=share), indent=1))
                    runs.append((name + DECLARED, fixtures))
                modes = [("", ())] + ([(OFF, ("--fast-path", "off"))] if args.compare else [])
                for label, declared in runs:
                    for suffix, flags in modes:
                        wall, cpu, strategies = days.run_simulate_timed(day, heldout.MAX_LOAD, "default", args.policy,
                                                                        day / "sim.json", declared, (*extra, *flags))
                        r = strategies["default"]
                        if crowds == 0:
                            base_cost[suffix] = float(r["cost_ratio"]["carry"])
                        line, bad = _row(label + suffix, seed, wall, cpu, r, base_cost.get(suffix), crowds)
                        missed += bad
                        print(line, flush=True)
                for f in day.iterdir():
                    f.unlink()
    print(f"{missed} day(s) miss a target (the days without crowds are judged on wall time only)")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
