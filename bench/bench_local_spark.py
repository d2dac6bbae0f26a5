"""Benchmark: the local Spark's JVM options (``LOCAL_JAVA_OPTIONS``) against the JVM's defaults, per micro-batch.

Run::

    .venv/bin/python bench/bench_local_spark.py [--batches 10] [--events 500] [--draws 1 2]

Each variant runs in a fresh process (its own JVM): the job's local Spark session
(``glue_jobs.quadkey_counts.local_spark`` with the variant's ``java_options``), then ``--batches`` micro-batches of
``--events`` JSON events each (positions drawn around New York harbour, 10 s windows, 3 s watermark, 4 s of event time
per batch, so windows close as in the local loop) through the streaming
job's own batch body (``glue_jobs.batch.stream_batch_fn``: classify, window store, snapshots). Measured per variant:
the first batch's wall time (the JVM's warm-up), the mean of the others, and the CPU seconds of the JVM and of the
Python driver over the whole run (``/proc/<pid>/stat`` of the JVM before it stops; Spark's Python workers are not
counted). The **baseline** is the same run with the JVM's default options, measured in the same invocation; the
ratios are what to compare. Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BASE_S = 1_700_000_040  # a multiple of 10 s: windows start here


def _jvm_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(java_options: str, batches: int, events: int, draw: int) -> dict[str, float]:
    """One variant in this process: a session, the batches, the timings (JSON on stdout)."""
    from glue_jobs.batch import JobConfig, stream_batch_fn
    from glue_jobs.quadkey_counts import local_spark
    from glue_jobs.transform import RollupSpec, WindowSpec

    spark = local_spark("bench-local-spark", java_options=java_options)  # the job's own session
    jvm_pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    tmp = tempfile.mkdtemp(prefix="bench-local-spark-")
    cfg = JobConfig(out=f"{tmp}/out", window=WindowSpec("10 seconds", None, "3 seconds"),
                    rollup=RollupSpec(grid_zoom=12, zoom=14, refine_events=5))
    on_batch = stream_batch_fn(cfg, f"{tmp}/checkpoint/windows", lambda line: None)
    rnd = random.Random(draw)
    times = []
    for batch in range(batches):
        records = [(json.dumps({"event_id": f"e{batch}-{i}", "entity_id": f"u{i % 50}",
                                "ts": int((BASE_S + batch * 4 + rnd.random() * 4) * 1000),
                                "lat": 40.6 + rnd.random() * 0.2, "lon": -74.1 + rnd.random() * 0.2}),
                    f"bench/{batch}/{i}") for i in range(events)]
        df = spark.createDataFrame(records, "value string, source string")
        t0 = time.perf_counter()
        on_batch(df, batch)
        times.append(time.perf_counter() - t0)
    jvm_s = _jvm_cpu_s(jvm_pid)
    spark.stop()
    return {"first_s": times[0], "mean_s": sum(times[1:]) / max(len(times) - 1, 1), "jvm_cpu_s": jvm_s,
            "driver_cpu_s": time.process_time()}


def run(java_options: str, batches: int, events: int, draw: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", java_options, "--batches", str(batches),
                          "--events", str(events), "--draws", str(draw)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    from glue_jobs.quadkey_counts import LOCAL_JAVA_OPTIONS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--events", type=int, default=500)
    ap.add_argument("--draws", type=int, nargs="+", default=[1])
    ap.add_argument("--child", metavar="JAVA_OPTIONS", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.batches, args.events, args.draws[0])))
        return 0
    print(f"{args.batches} micro-batches of {args.events} events, local[2]; baseline: the JVM's default options")
    print(f"{'draw':>4} {'options':44} {'first s':>8} {'mean s':>7} {'JVM CPU s':>9} {'driver CPU s':>12}")
    for draw in args.draws:
        rows = {name: run(opts, args.batches, args.events, draw)
                for name, opts in (("defaults (baseline)", ""), (LOCAL_JAVA_OPTIONS, LOCAL_JAVA_OPTIONS))}
        for name, r in rows.items():
            print(f"{draw:>4} {name:44} {r['first_s']:>8.2f} {r['mean_s']:>7.2f} {r['jvm_cpu_s']:>9.1f} "
                  f"{r['driver_cpu_s']:>12.1f}")
        base, new = rows["defaults (baseline)"], rows[LOCAL_JAVA_OPTIONS]
        print(f"{draw:>4} ratio (options / baseline): first batch {new['first_s'] / base['first_s']:.2f}, "
              f"mean batch {new['mean_s'] / base['mean_s']:.2f}, JVM CPU {new['jvm_cpu_s'] / base['jvm_cpu_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
