"""The partitioner command end to end, as a user types it, against the build algorithm alone, in the same run.

Run ``.venv/bin/python bench/bench_cli.py [--quick] [--repeat 3]``. For each data set it writes
``COUNTS.csv`` once, then ``--repeat`` times, each in a fresh process pinned to one CPU:

* **command**: ``python -m partitioner build COUNTS.csv --max-load N -o spec.json -q`` with the
  table going to a file (read, build, validate, write, measure, print); wall time, CPU time
  (user + system, from ``wait4``) and peak RSS of the process;
* **algorithm**: a process that reads the same file and times ``build_spec`` alone (wall and CPU).

It prints the median of the repeats, the command's ratio to the algorithm, and the verdict
against the CLI's speed targets: 400k quadkeys <= 2 s, 2M <= 10 s, dense continental data of
300k+ quadkeys <= 3 s, peak <= 2 GB. The load average is printed before and after: on a
shared, loaded machine wall time exceeds CPU time, and the verdict says which one passed.

Data (``datasets.py``, ``ports.py``): ``sized(400000)`` and ``sized(2000000)`` (sparse worldwide,
zoom 15), ``dense_continent("europe", zoom=13)`` (515k quadkeys in big connected areas) and a
port's ship traffic (15 cells above the cap).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import datasets  # noqa: E402
import ports  # noqa: E402

TARGET_RSS_MB = 2048.0
ALGORITHM = """
import json, sys, time
from partitioner.builders import build_spec
from partitioner.load.counts import read_counts_csv
counts = read_counts_csv(sys.argv[1])
counts.grid()
t0, c0 = time.perf_counter(), time.process_time()
spec = build_spec(counts, float(sys.argv[2]), created_at="2026-01-01T00:00:00Z")
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "workers": len(spec.workers)}))
"""


@dataclass(frozen=True)
class Case:
    name: str
    csv: Path
    quadkeys: int
    max_load: float
    target_s: float


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    rss_mb: float


def _pin() -> None:
    """Run the child on one CPU (and any threads NumPy starts), where the OS allows it."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def run_pinned(args: list[str], stdout: Path) -> tuple[Run, str]:
    """Run a command pinned to one CPU; return its wall time, CPU time, peak RSS and its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with stdout.open("w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, cwd=stdout.parent, env=env,
                                preexec_fn=_pin)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {err.strip()}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0), stdout.read_text()


def cases(work: Path, quick: bool) -> list[Case]:
    """Write the data sets once; return the cases to time."""
    out: list[Case] = []
    plan = [("sized_400k", lambda: datasets.sized(400_000), 2.0)]
    if not quick:
        plan.append(("sized_2M", lambda: datasets.sized(2_000_000), 10.0))
    plan += [("dense_europe_z13", lambda: datasets.dense_continent("europe", zoom=13), 3.0),
             ("port_rotterdam", lambda: ports.dense_port("rotterdam"), 2.0)]
    for name, make, target in plan:
        ds = make()
        csv = work / f"{name}.csv"
        datasets.write_csv(ds.counts, csv)
        out.append(Case(name, csv, len(ds.counts), ds.max_load, target))
        print(f"  {name:<18} {len(ds.counts):>9,} quadkeys, max_load {ds.max_load:,.0f}, lower bound "
              f"{ds.lower_bound}: {ds.description}", flush=True)
    return out


def measure(case: Case, work: Path, repeat: int) -> tuple[list[Run], list[dict[str, float]], str]:
    command = [sys.executable, "-m", "partitioner", "build", str(case.csv), "--max-load", f"{case.max_load:g}",
               "-o", str(work / f"{case.name}.json"), "-q"]
    runs: list[Run] = []
    algo: list[dict[str, float]] = []
    table = ""
    for _ in range(repeat):
        run, table = run_pinned(command, work / f"{case.name}.out.txt")
        runs.append(run)
        _, text = run_pinned([sys.executable, "-c", ALGORITHM, str(case.csv), f"{case.max_load:g}"],
                             work / f"{case.name}.algo.txt")
        algo.append(json.loads(text.strip().splitlines()[-1]))
    return runs, algo, table


def report(case: Case, runs: list[Run], algo: list[dict[str, float]], table: str) -> str:
    wall = statistics.median(r.wall for r in runs)
    cpu = statistics.median(r.cpu for r in runs)
    rss = max(r.rss_mb for r in runs)
    a_wall = statistics.median(a["wall"] for a in algo)
    a_cpu = statistics.median(a["cpu"] for a in algo)
    summary = next((ln for ln in table.splitlines() if ln.startswith("Workers:")), "")
    verdict = ("PASS" if wall <= case.target_s else "PASS on CPU only (loaded machine)" if cpu <= case.target_s
               else "FAIL") if rss <= TARGET_RSS_MB else "FAIL (memory)"
    return (f"{case.name:<18}{case.quadkeys:>10,}{wall:>8.2f}{min(r.wall for r in runs):>8.2f}{cpu:>8.2f}"
            f"{rss:>9.0f}{a_wall:>8.2f}{a_cpu:>9.2f}{wall / a_wall:>7.1f}x{case.target_s:>7.1f}  {verdict}\n"
            f"{'':<18}{summary}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="skip the 2M data set")
    ap.add_argument("--repeat", type=int, default=3, help="runs per data set (median reported; default 3)")
    args = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        print("Data sets:")
        todo = cases(work, args.quick)
        print(f"\ncommand = python -m partitioner build (end to end); algo = build_spec alone; median of "
              f"{args.repeat} runs, each pinned to one CPU")
        print(f"{'dataset':<18}{'quadkeys':>10}{'wall s':>8}{'min s':>8}{'cpu s':>8}{'peak MB':>9}"
              f"{'algo s':>8}{'algo cpu':>9}{'ratio':>8}{'target':>7}  verdict")
        for case in todo:
            runs, algo, table = measure(case, work, args.repeat)
            print(report(case, runs, algo, table), flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
