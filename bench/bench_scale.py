"""The control plane's AWS calls against fleet size: the scale simulation (``python -m local.scale``) at several fleet
sizes in the same run, each API's calls per simulated second fitted as ``rate ~ workers ** exponent``.

Each size is a fresh child process (its own moto and simulated clock) running the whole scenario: fleet start, steady
routing, a swap that moves ~5 % of the load, a swap that adds ~20 % workers, the drain. Events per second scale with
the fleet (``--events-per-worker``, 100 by default: 100,000 events/s at 1,000 workers). Printed per size: the phases,
the worst margins; then per control-plane API its rates at each size and the fitted exponent (1 = linear; above
``LINEAR_MAX_EXPONENT`` = 1.25 fails), and the worst margin of any API at any size (below 2x fails).

Run: ``.venv/bin/python bench/bench_scale.py [--workers 20 50 100]``. The simulation costs about 2-4 s of wall time per
simulated second at 100 workers on a 2-core machine (moto's request handling dominates); 1,000 workers is hours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partitioner.aws_budget.report import CONTROL_PLANE, LINEAR_MAX_EXPONENT, MIN_MARGIN, growth

ROOT = Path(__file__).resolve().parents[1]


def run_size(workers: int, events_per_worker: float, steady_s: float, out: Path) -> dict[str, object]:
    """One simulation in a child process; its result.json."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "local.scale", "--workers", str(workers), "--events-per-s",
                           str(events_per_worker * workers), "--steady", str(steady_s), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout[proc.stdout.find("scale simulation:"):].rstrip() if "scale simulation:" in proc.stdout
          else proc.stdout[-3000:] + proc.stderr[-3000:])
    if not (out / "result.json").exists():
        raise SystemExit(f"the simulation at {workers} workers wrote no result (exit {proc.returncode})")
    result: dict[str, object] = json.loads((out / "result.json").read_text())
    print(f"  ({workers} workers: {time.monotonic() - started:.0f} s wall, exit {proc.returncode})\n")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[20, 50, 100])
    p.add_argument("--events-per-worker", type=float, default=100.0)
    p.add_argument("--steady", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=ROOT / "out" / "bench_scale")
    a = p.parse_args(argv)
    sizes = sorted(set(a.workers))
    if len(sizes) < 2 or sizes[0] < 2:
        p.error(f"--workers needs at least two sizes >= 2, got {a.workers!r}")
    results = [run_size(n, a.events_per_worker, a.steady, a.out / f"w{n}") for n in sizes]
    rates = [dict(r["rates"]) for r in results]  # type: ignore[call-overload]
    fits = growth(sizes, rates, CONTROL_PLANE)
    print(f"control-plane calls per simulated second (whole run) at {', '.join(map(str, sizes))} workers")
    print(f"{'API':34} " + " ".join(f"{n:>10}" for n in sizes) + f" {'exponent':>9}")
    for g in fits:
        verdict = "" if g.linear else f"  FASTER THAN LINEAR (> {LINEAR_MAX_EXPONENT})"
        print(f"{g.key:34} " + " ".join(f"{r:10.2f}" for r in g.rates) + f" {g.exponent:9.2f}{verdict}")
    worst = [(min((row["margin"] for row in r["budget"] if row["margin"] is not None), default=float("inf")),  # type: ignore[index,union-attr]
              n) for r, n in zip(results, sizes, strict=True)]
    for margin, n in worst:
        print(f"worst margin at {n} workers: {margin:.2f}x (needs >= {MIN_MARGIN:g}x)")
    ok = all(g.linear for g in fits) and all(m >= MIN_MARGIN for m, _ in worst) and all(r["ok"] for r in results)
    print("RESULT:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
