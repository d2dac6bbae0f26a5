"""The report's lead section, UTILISATION AT THE WORKERS, and its ``report.json`` ``utilisation`` field.

What is measured and counted is :mod:`local.report.worker_load`'s; this module only lays it out: the over-cap
target, a table of worker-windows (% of the cap) per worker, the max / p90 / median per window and the CPU the
workers' cost reports measured.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from local.report.worker_load import MAX_OVER_CAP_SHARE, MAX_UTILISATION, WorkerLoad
from local.state import RunState


def as_percent(u: float | None) -> str:
    """A utilisation as a whole percentage (``-`` when unknown)."""
    return "-" if u is None else f"{100 * u:.0f}%"


def utilisation_section(state: RunState, load: WorkerLoad) -> list[str]:
    """The report's lead: the over-cap target, per-window max/p90/median, CPU, and a table per worker."""
    cfg = state.config
    oc = load.over_cap()
    lines = [f"UTILISATION AT THE WORKERS (events each worker process received per {cfg.window_s:g}s window: sent in "
             f"the window, processed by that process; % of the cap {cfg.cap:g})"]
    if not load.received:
        return [*lines, "  (no output)"]
    t = state.started_at
    worst = (f"worst {as_percent(oc.worst.utilisation)} ({oc.worst.key}, window at {oc.worst.start_s - t:.0f}s)"
             if oc.worst else "no worker-window measured")
    lines += [f"  {'OK' if oc.ok else 'OVER TARGET'}: {oc.over} of {oc.worker_windows} worker-windows over the cap "
              f"({100 * oc.share:.1f}%, target <= {100 * MAX_OVER_CAP_SHARE:g}%), {oc.above_limit} above "
              f"{100 * MAX_UTILISATION:.0f}%; {worst}",
              f"  a worker-window: a window in which the worker's version was active throughout, inside the measured "
              f"span {load.measured.start_s - t:.0f}s-{load.measured.end_s - t:.0f}s (after the warm-up backlog, "
              "before the replay stopped); (n) = partial window, shown but not counted",
              f"  {_coverage(load)}",
              f"  {_write_time_view(load)}"]
    cpu = [(k, c, load.processed[k][i]) for k, s in load.cpu_s.items() for i, c in enumerate(s)
           if load.counted[k][i] and load.cpu_known[k][i]]
    if cpu and sum(n for *_, n in cpu):
        busiest = max(cpu, key=lambda x: x[1])
        lines.append(f"  measured cost (workers' cost reports, whole-path CPU): {1e6 * sum(c for _, c, _ in cpu) / sum(n for *_, n in cpu):.0f} "
                     f"us per event; busiest worker-window {1e3 * busiest[1]:.0f} ms CPU ({busiest[0]}, "
                     f"{100 * busiest[1] / load.window_s:.1f}% of one core)")
    header = "  " + f"{'window at (run s)':<18}" + "".join(f"{load.window_start(i) - t:>6.0f}" for i in range(load.n_windows))
    lines.append(header)
    for key in sorted(load.received, key=_version_order):
        cells = []
        for n, counted in zip(load.received[key], load.counted[key], strict=True):
            pct = round(100 * n / load.cap)
            cells.append(f"{pct:>6}" if counted else f"{f'({pct})':>6}" if n else f"{'.':>6}")
        lines.append("  " + f"{key:<18}" + "".join(cells))
    stats = [load.window_stats(i) for i in range(load.n_windows)]
    for name in ("max", "p90", "median"):
        lines.append("  " + f"{name + ' (counted)':<18}" + "".join(
            f"{round(100 * getattr(s, name)):>6}" if s else f"{'-':>6}" for s in stats))
    cpu_row = [max((load.cpu_s[k][i] for k in load.cpu_s if load.counted[k][i] and load.cpu_known[k][i]), default=None)
               for i in range(load.n_windows)]
    lines.append("  " + f"{'max CPU ms':<18}" + "".join(f"{1e3 * c:>6.0f}" if c is not None else f"{'-':>6}"
                                                         for c in cpu_row))
    return lines


def _write_time_view(load: WorkerLoad) -> str:
    """The same records by the write time of the output, and the lag that separates the two views."""
    oc = load.over_cap(load.processed)
    worst = f", worst {as_percent(oc.worst.utilisation)} ({oc.worst.key})" if oc.worst else ""
    lag = load.lag
    lag_text = (f"lag from send to output: p50 {lag.p50_s:.1f}s, p99 {lag.p99_s:.1f}s, max {lag.max_s:.1f}s "
                f"({lag.worst_key})" if lag else "lag: no record in the measured span")
    return (f"by write time (catch-up after a pause counts where it was written): {oc.over} of {oc.worker_windows} "
            f"over the cap{worst}; {lag_text}")


def _coverage(load: WorkerLoad) -> str:
    """How many windows of the measured span were counted, and why the others were not."""
    span = [i for i in range(load.n_windows)
            if load.measured.covers(load.window_start(i), load.window_start(i) + load.window_s)]
    counted = [i for i in span if any(c[i] for c in load.counted.values())]
    return (f"windows counted: {len(counted)} of the {len(span)} whole windows in the measured span (the others "
            "had no worker active throughout, e.g. a flip inside)")


def _version_order(key: str) -> tuple[int, str]:
    head, _, rest = key.partition("/")
    return (int(head[1:]), rest) if head[1:].isdigit() else (0, key)


def utilisation_json(load: WorkerLoad) -> dict[str, Any]:
    """``report.json`` ``utilisation``: ``cap`` and ``events`` (counted worker-windows, 0 elsewhere) and the rest."""
    oc = load.over_cap()
    by_write = load.over_cap(load.processed)
    return {"source": "workers' enriched records: events per worker process by send time (received) and by "
                      "output write time (processed); cost reports", "cap": load.cap,
            "window_s": load.window_s, "window_starts": [load.window_start(i) for i in range(load.n_windows)],
            "events": load.counted_events(), "received": {k: list(v) for k, v in load.received.items()},
            "processed": {k: list(v) for k, v in load.processed.items()},
            "processed_over_cap": {"over_cap": by_write.over, "above_limit": by_write.above_limit,
                                   "worst": asdict(by_write.worst) if by_write.worst else None},
            "lag_s": asdict(load.lag) if load.lag else None,
            "counted": {k: list(v) for k, v in load.counted.items()},
            "cpu_s": {k: [round(c, 6) for c in v] for k, v in load.cpu_s.items()},
            "cpu_known": {k: list(v) for k, v in load.cpu_known.items()},
            "measured_span": [load.measured.start_s, load.measured.end_s],
            "worker_windows": oc.worker_windows, "over_cap": oc.over, "over_cap_share": oc.share,
            "above_limit": oc.above_limit, "worst": asdict(oc.worst) if oc.worst else None,
            "limits": {"over_cap_share": MAX_OVER_CAP_SHARE, "utilisation": MAX_UTILISATION}}
