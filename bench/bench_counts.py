"""``python -m partitioner counts`` on 10M recorded events, CSV and Parquet, against reading the file alone.

Run ``.venv/bin/python bench/bench_counts.py [--events 10000000] [--seeds 1,2]``. For each seed it makes
one day of events (epoch milliseconds) of a few hundred entities moving around real cities (coordinates
from :func:`datasets.city`), writes them as CSV and as Parquet in a temporary directory, then times, each
in a fresh process:

* **command**: ``python -m partitioner counts FILE --window-s 300 --zoom 15 -o DIR -q`` (the time a
  user sees: interpreter start, read, check, count, write);
* **baseline**: a process that reads the same file's three columns with pyarrow and does nothing else.

It prints both times, their ratio (the command's overhead over reading) and the verdict against the
target: 10M events <= 30 s for the whole command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import datasets  # noqa: E402

TARGET_S = 30.0
CITIES = ("London", "Paris", "Berlin", "Madrid", "New York City", "Tokyo", "Singapore", "Sydney")
DAY_MS = 86_400_000
T0_MS = 1_714_521_600_000  # 2024-05-01T00:00:00Z
BASELINE = """
import sys, pyarrow.csv as c, pyarrow.parquet as q
f = sys.argv[1]
cols = ["lat", "lon", "ts"]
t = q.read_table(f, columns=cols) if f.endswith(".parquet") else c.read_csv(
    f, convert_options=c.ConvertOptions(include_columns=cols))
print(t.num_rows)
"""


def make_events(n: int, seed: int, entities: int = 400) -> dict[str, np.ndarray]:
    """``n`` events of ``entities`` entities, each a random walk around one real city, over one day."""
    rng = np.random.default_rng(seed)
    home = np.array([datasets.city(c) for c in CITIES])  # (lon, lat)
    ent_city = rng.integers(0, len(CITIES), entities)
    start = home[ent_city] + rng.normal(0.0, 0.05, (entities, 2))
    who = rng.integers(0, entities, n)
    step = rng.normal(0.0, 0.002, (n, 2))
    order = np.argsort(who, kind="stable")
    walk = np.cumsum(step[order], axis=0)  # each entity's walk: the cumulative steps within its run
    first = np.searchsorted(who[order], np.arange(entities))
    walk -= np.repeat(walk[first] - step[order][first], np.diff(np.append(first, n)), axis=0)
    pos = np.empty((n, 2))
    pos[order] = start[who[order]] + walk
    ts = T0_MS + np.sort(rng.integers(0, DAY_MS, n))
    return {"entity_id": np.char.add("e", who.astype(str)), "lat": np.clip(pos[:, 1], -85.0, 85.0),
            "lon": np.clip(pos[:, 0], -180.0, 180.0), "ts": ts}


def write_files(ev: dict[str, np.ndarray], directory: Path) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    table = pa.table({"entity_id": ev["entity_id"], "ts": ev["ts"], "lat": np.round(ev["lat"], 6),
                      "lon": np.round(ev["lon"], 6)})
    csv, parquet = directory / "events.csv", directory / "events.parquet"
    pcsv.write_csv(table, csv)
    pq.write_table(table, parquet)
    return csv, parquet


def timed(cmd: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--seeds", default="1,2")
    args = ap.parse_args(argv)
    print(f"{args.events:,} events, one day, {len(CITIES)} cities; target <= {TARGET_S:g} s; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(f"{'seed':>4} {'format':<8} {'size MB':>8} {'command s':>10} {'read s':>8} {'ratio':>6} verdict")
    worst = 0.0
    for seed in (int(s) for s in args.seeds.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-counts-") as tmp:
            files = write_files(make_events(args.events, seed), Path(tmp))
            for f in files:
                out = Path(tmp) / f"out-{f.suffix[1:]}"
                cmd = [sys.executable, "-m", "partitioner", "counts", str(f), "--window-s", "300", "--zoom", "15",
                       "-o", str(out), "-q"]
                command = timed(cmd)
                base = timed([sys.executable, "-c", BASELINE, str(f)])
                worst = max(worst, command)
                verdict = "PASS" if command <= TARGET_S else "FAIL"
                print(f"{seed:>4} {f.suffix[1:]:<8} {f.stat().st_size / 1e6:>8.0f} {command:>10.2f} {base:>8.2f} "
                      f"{command / base:>6.2f} {verdict}", flush=True)
    print(f"worst {worst:.2f} s against the target {TARGET_S:g} s: {'PASS' if worst <= TARGET_S else 'FAIL'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
