"""Partitioner benchmark: the compact strategy against the seed strategy, measured in the same run.

Run ``.venv/bin/python bench/bench_partitioner.py [--quick] [--skip-speed]``. Sections:

1. **Shapes** per dataset (bench/datasets.py): workers vs the lower bound ceil(total/max_load),
   max worker utilisation, contiguity, median P^2/(4 pi A), boundary-load share, build time,
   for ``seed`` (the baseline) and ``compact``; then the partition shape targets as PASS/FAIL.
2. **Stability**: every weight moved by up to +/-10 % (three random draws), rebuilt with
   ``previous=spec``; share of load keeping its partition id and worker, worst draw (target >= 98 %).
3. **Day -> night shift** (+ a new hotspot where there was no load): the old spec's
   mismatch, the rebalance policy's decision and the load that moves (sticky rebuild vs
   rebuild from scratch).
4. **Speed**: compact build of 400k and 2M non-empty quadkeys, each in a fresh process pinned to one CPU
   (time and peak RSS of the build, input included); the seed strategy is timed on a
   smaller size in the same run and extrapolated linearly per quadkey (it is plain Python
   and would take minutes on 2M), and the ratio is printed. The whole command a user types
   is timed by ``bench/bench_cli.py``.
5. **Dense hot cells**: port ship traffic (``ports.py``: Singapore, Rotterdam; with and without
   finer rows) over several random draws: workers against the lower bound and the baseline
   measured in the same run (each hot cell split alone into full shares and one remainder,
   packed as whole items, as the packing did before the partitioner's scale work); target <= lower bound + 1, no worker over.

``--data-seed N`` draws every dataset again with seed ``N`` (same places and structure): the
targets should hold on any draw, not only the default one.

The seed strategy is run only on inputs of at most ``--seed-cap`` quadkeys (default
150k, ~20 s) so the whole benchmark stays within a few minutes; above it the row says
"skipped". Timings are wall-clock on this machine: compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import datasets  # noqa: E402
import shifts  # noqa: E402
from datasets import Dataset  # noqa: E402

from geokernel.partition_spec.model import Spec  # noqa: E402
from partitioner.builders import build_spec  # noqa: E402
from partitioner.control.policy import RebalancePolicy  # noqa: E402
from partitioner.output.compare import stability  # noqa: E402
from partitioner.output.metrics import SpecMetrics, evaluate  # noqa: E402

SEED_CAP = 150_000
TARGET_STABILITY = 0.98
TARGET_SECONDS = {400_000: 2.0, 2_000_000: 10.0}
TARGET_RSS_MB = 2048.0


@dataclass(frozen=True)
class Run:
    dataset: str
    strategy: str
    quadkeys: int
    seconds: float
    metrics: SpecMetrics | None  # None when skipped
    spec: Spec | None


def timed_build(ds: Dataset, strategy: str, **kw: object) -> tuple[Spec, float]:
    t0 = time.perf_counter()
    spec = build_spec(ds.counts, ds.max_load, strategy=strategy, created_at="2026-01-01T00:00:00Z",
                      **kw)  # type: ignore[arg-type]
    return spec, time.perf_counter() - t0


def run(ds: Dataset, strategy: str, seed_cap: int) -> Run:
    if strategy == "seed" and len(ds.counts) > seed_cap:
        return Run(ds.name, strategy, len(ds.counts), math.nan, None, None)
    spec, secs = timed_build(ds, strategy)
    return Run(ds.name, strategy, len(ds.counts), secs, evaluate(spec, ds.counts), spec)


def pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def shape_row(r: Run) -> str:
    m = r.metrics
    if m is None:
        return f"{r.dataset:<16}{r.strategy:<9}{r.quadkeys:>9}   skipped: input > --seed-cap"
    return (f"{r.dataset:<16}{r.strategy:<9}{r.quadkeys:>9}{m.worker_count:>8}{m.lower_bound:>6}"
            f"{m.waste_ratio:>8.2f}{pct(m.max_utilisation):>9}{'yes' if m.contiguous else 'NO':>7}"
            f"{m.median_compactness:>9.2f}{pct(m.boundary_load_share):>10}{r.seconds:>9.2f}")


SHAPE_HEADER = (f"{'dataset':<16}{'strategy':<9}{'quadkeys':>9}{'workers':>8}{'lb':>6}{'w/lb':>8}{'maxutil':>9}"
                f"{'contig':>7}{'P2/4piA':>9}{'boundary':>10}{'build s':>9}")


def verdicts(seed: Run, compact: Run) -> list[str]:
    """The partition shape targets for one dataset."""
    c = compact.metrics
    assert c is not None
    out = [
        f"workers {c.worker_count} <= lower bound + 1 = {c.lower_bound + 1}: "
        f"{'PASS' if c.worker_count <= c.lower_bound + 1 else 'FAIL'}",
        f"no worker over max_load (max {pct(c.max_utilisation)}): {'PASS' if c.max_utilisation <= 1 + 1e-9 else 'FAIL'}",
        f"every region 8-connected: {'PASS' if c.contiguous else 'FAIL ' + ','.join(c.non_contiguous[:5])}",
    ]
    s = seed.metrics
    if s is not None:
        out += [
            f"median P^2/(4piA) {c.median_compactness:.2f} <= seed {s.median_compactness:.2f}: "
            f"{'PASS' if c.median_compactness <= s.median_compactness + 1e-9 else 'FAIL'}",
            f"boundary-load share {pct(c.boundary_load_share)} <= seed {pct(s.boundary_load_share)}: "
            f"{'PASS' if c.boundary_load_share <= s.boundary_load_share + 1e-9 else 'FAIL'}",
            f"seed needs {s.worker_count / s.lower_bound:.2f}x the lower bound, compact {c.waste_ratio:.2f}x; "
            f"compact build {s_ratio(seed.seconds, compact.seconds)} the seed's time",
        ]
    return out


def s_ratio(base: float, new: float) -> str:
    if not (base > 0 and new > 0):
        return "n/a"
    return f"{base / new:.1f}x faster than" if base >= new else f"{new / base:.1f}x slower than"


def section_shapes(sets: list[Dataset], seed_cap: int) -> dict[str, Spec]:
    print("\n== 1. Shapes: seed (baseline) vs compact, same data, same run ==")
    print(SHAPE_HEADER)
    specs: dict[str, Spec] = {}
    notes: list[tuple[str, list[str]]] = []
    for ds in sets:
        seed = run(ds, "seed", seed_cap)
        print(shape_row(seed), flush=True)
        compact = run(ds, "compact", seed_cap)
        print(shape_row(compact), flush=True)
        assert compact.spec is not None
        specs[ds.name] = compact.spec
        notes.append((ds.name, verdicts(seed, compact)))
    print("\nTargets (partition shape):")
    for name, lines in notes:
        print(f"  {name}:")
        for line in lines:
            print(f"    - {line}")
    return specs


NOISE_SEEDS = (7, 8, 9)


def section_stability(sets: list[Dataset], specs: dict[str, Spec]) -> None:
    print(f"\n== 2. Stability: every weight x U(0.9, 1.1), rebuilt with previous=spec, noise draws "
          f"{', '.join(map(str, NOISE_SEEDS))}; the worst draw counts (target >= {pct(TARGET_STABILITY)}) ==")
    print("  (at most: the share no repair can beat, 1 - the overflow of the old spec's workers under the new load)")
    print(f"{'dataset':<19}{'kept (each draw)':>24}{'at most':>9}{'moved load':>13}{'workers':>9}{'lb':>5}"
          f"{'maxutil':>9}{'build s':>9}  verdict")
    for ds in sets:
        kept: list[float] = []
        worst = None
        for seed in NOISE_SEEDS:
            noisy = ds.with_counts(shifts.noise(ds.counts, 0.10, seed=seed), f"{ds.name}~noise{seed}")
            spec1, secs = timed_build(noisy, "compact", previous=specs[ds.name])
            s = stability(specs[ds.name], spec1, noisy.counts)
            kept.append(s.kept_share)
            if worst is None or s.kept_share < worst[0].kept_share:
                worst = (s, evaluate(spec1, noisy.counts), secs, _best_kept(specs[ds.name], noisy))
        assert worst is not None
        s, m, secs, best = worst
        ok = "PASS" if s.kept_share >= TARGET_STABILITY else "FAIL"
        each = " / ".join(pct(k) for k in kept)
        print(f"{ds.name:<19}{each:>24}{pct(best):>9}{s.moved_load:>13.0f}{m.worker_count:>9}{m.lower_bound:>5}"
              f"{pct(m.max_utilisation):>9}{secs:>9.2f}  {ok}", flush=True)


def _best_kept(old: Spec, noisy: Dataset) -> float:
    """The most load any rebuild can keep in place: every worker of ``old`` over the cap under the new load
    must shed at least its overflow."""
    m = evaluate(old, noisy.counts)
    over = sum(max(0.0, w.load - old.max_load) for w in m.workers)
    return 1.0 - over / m.total if m.total > 0 else 1.0


def section_shift(sets: list[Dataset]) -> None:
    print("\n== 3. Day -> night shift (+ a new hotspot at Black Rock Desert, no history) ==")
    policy = RebalancePolicy()
    now = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    for ds in sets:
        day, night = shifts.day_night(ds)
        day_spec, _ = timed_build(day, "compact")
        old = evaluate(day_spec, night.counts)
        sticky, secs = timed_build(night, "compact", previous=day_spec)
        fresh, _ = timed_build(night, "compact")
        fresh = fresh.replace(version=day_spec.version + 1)
        moved_fresh = stability(day_spec, fresh, night.counts).moved_share
        decision = policy.decide(day_spec, sticky, night.counts, now, now - timedelta(hours=1))
        print(f"{ds.name}: day total {day.total:.0f} -> night {night.total:.0f}; day spec under night load: "
              f"max worker {pct(old.max_utilisation)}, {old.worker_count} workers for lower bound {old.lower_bound}, "
              f"unlisted (catch-all) load {old.unlisted_load:.0f}")
        print(f"  sticky rebuild ({secs:.2f} s): {len(sticky.workers)} workers (night lower bound "
              f"{night.lower_bound}), moves {pct(decision.moved_share)} of load; rebuild from scratch "
              f"({len(fresh.workers)} workers) would move {pct(moved_fresh)}")
        for line in decision.render().splitlines():
            print(f"  {line}")


def _speed_child(n: int, strategy: str, conn: object) -> None:
    """Pin to one core, generate ``sized(n)``, reset the peak-RSS mark, build, report (seconds, peak MB, input MB)."""
    _one_core()
    ds = datasets.sized(n)
    rss_in = _status_mb("VmRSS")
    reset = _reset_peak()
    t0, c0 = time.perf_counter(), time.process_time()
    spec = build_spec(ds.counts, ds.max_load, strategy=strategy, created_at="2026-01-01T00:00:00Z")
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _status_mb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    conn.send((secs, peak, rss_in, reset, len(spec.workers), ds.lower_bound, cpu))  # type: ignore[attr-defined]
    conn.close()  # type: ignore[attr-defined]


def _one_core() -> bool:
    """Run this process (and any threads NumPy/SciPy start) on a single CPU, where the OS allows it."""
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return True
    except (AttributeError, OSError):
        return False


def _status_mb(field: str) -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux clear_refs 5) so VmHWM measures the build alone."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure(n: int, strategy: str) -> tuple[float, float, float, bool, int, int, float]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_speed_child, args=(n, strategy, child))
    proc.start()
    result = parent.recv()
    proc.join()
    return result  # type: ignore[no-any-return]


def section_speed(sizes: list[int], seed_size: int) -> None:
    print(f"\n== 4. Speed: fresh process per build, pinned to one CPU; seed timed at {seed_size} quadkeys and "
          f"extrapolated (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs) ==")
    seed_s = measure(seed_size, "seed")[0]
    comp_s = measure(seed_size, "compact")[0]
    per_qk = seed_s / seed_size
    print(f"baseline at {seed_size} quadkeys: seed {seed_s:.2f} s, compact {comp_s:.2f} s "
          f"({s_ratio(seed_s, comp_s)} the seed)")
    print(f"{'quadkeys':>10}{'compact s':>11}{'cpu s':>7}{'target s':>10}{'seed s (est.)':>15}{'ratio':>9}"
          f"{'peak RSS MB':>13}{'input MB':>10}{'workers':>9}{'lb':>5}  verdict")
    for n in sizes:
        secs, peak, rss_in, reset, workers, lb, cpu = measure(n, "compact")
        target = TARGET_SECONDS.get(n, 10.0 * n / 2_000_000)
        fits = peak <= TARGET_RSS_MB
        ok = "PASS" if secs <= target and fits else "PASS on CPU only (loaded machine)" if cpu <= target and fits \
            else "FAIL"
        est = per_qk * n
        note = "" if reset else " (peak incl. data generation)"
        print(f"{n:>10}{secs:>11.2f}{cpu:>7.2f}{target:>10.1f}{est:>15.1f}{est / secs:>8.1f}x{peak:>13.0f}"
              f"{rss_in:>10.0f}{workers:>9}{lb:>5}  {ok}{note}", flush=True)


def _per_cell_baseline(ds: Dataset) -> int:
    """Workers when each hot cell is split alone (full shares + a remainder) and packed whole: the old way."""
    from partitioner.builders.fresh import fresh_placement
    from partitioner.builders.hot import HotSplit, hash_split, split_hot_cells

    grid = ds.counts.grid()
    hot = split_hot_cells(ds.counts, grid, ds.max_load)
    shares = [r for q in hot.liquid for r in hash_split(q.quadkey, q.load, ds.max_load)]
    old = HotSplit(hot.regions + shares, hot.cells, [], hot.taken)
    return fresh_placement(grid, ds.max_load, old, ds.lower_bound).worker_count


def section_hot(draws: int) -> None:
    import ports

    print(f"\n== 5. Dense hot cells: port ship traffic, {draws} random draws each (target <= lower bound + 1) ==")
    print(f"{'dataset':<22}{'seed':>5}{'hot':>5}{'lb':>5}{'workers':>9}{'per-cell':>10}{'maxutil':>9}"
          f"{'boundary':>10}{'build s':>9}  verdict")
    for port in ("singapore", "rotterdam"):
        for refine in (None, 18):
            for seed in range(8, 8 + draws):
                ds = ports.dense_port(port, seed=seed, refine_to=refine)
                spec, secs = timed_build(ds, "compact")
                m = evaluate(spec, ds.counts)
                hot = int((ds.counts.grid().weight > ds.max_load).sum())
                ok = m.worker_count <= m.lower_bound + 1 and m.max_utilisation <= 1 + 1e-9
                print(f"{ds.name:<22}{seed:>5}{hot:>5}{m.lower_bound:>5}{m.worker_count:>9}"
                      f"{_per_cell_baseline(ds):>10}{pct(m.max_utilisation):>9}{pct(m.boundary_load_share):>10}"
                      f"{secs:>9.2f}  {'PASS' if ok else 'FAIL'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="smaller datasets and speed sizes (a minute or two)")
    ap.add_argument("--seed-cap", type=int, default=SEED_CAP, help=f"max quadkeys for the seed (default {SEED_CAP})")
    ap.add_argument("--skip-speed", action="store_true", help="skip section 4")
    ap.add_argument("--draws", type=int, default=5, help="random draws per port in section 5 (default 5)")
    ap.add_argument("--only", nargs="*", help="dataset names to run (default all)")
    ap.add_argument("--data-seed", type=int, default=None,
                    help="random seed for every dataset generator (default: each generator's own)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    sets = datasets.standard(args.quick, args.data_seed)
    if args.only:
        sets = [ds for ds in sets if ds.name in args.only]
    print("Datasets (bench/datasets.py):")
    for ds in sets:
        print(f"  {ds.name:<16} zoom {ds.zoom:>2}, {len(ds.counts):>7} quadkeys, total {ds.total:>11.0f}, "
              f"max_load {ds.max_load:>8.0f}, lower bound {ds.lower_bound:>3}: {ds.description}")
    specs = section_shapes(sets, args.seed_cap)
    section_stability(sets, specs)
    section_shift(sets)
    if not args.skip_speed:
        if args.quick:
            section_speed([100_000, 400_000], 20_000)
        else:
            section_speed([400_000, 2_000_000], 50_000)
    section_hot(2 if args.quick else args.draws)
    print(f"\nbenchmark wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
