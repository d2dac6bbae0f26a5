"""The run's own figure: utilisation measured at the workers over time (PNG, matplotlib Agg).

Partition maps come from :mod:`partitioner.output.plot`; this module only draws what is specific
to a run (:class:`local.report.worker_load.WorkerLoad`). It stays readable with many workers: per
window a bar from the least to the most loaded counted worker, the max, p90 and median as
lines, each worker-window as a small dot (red when over the cap), partial windows as
hollow rings (a triangle near the top when off the scale, as the warm-up backlog is); the
cap and the 110 % limit as lines, and the windows outside the measured span shaded. A
thin middle panel shows when the scenario moves the load and when the flips happened; the
bottom panel the measured cost (the worker's whole-path CPU per worker-window: its reads, decode,
transform and rows; from the workers' cost reports).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from local.config import RunConfig
from local.dataset import HOTSPOT, SHIFT, Scenario
from local.report.worker_load import MAX_UTILISATION, WorkerLoad
from local.state import RunState


def plot_utilisation(load: WorkerLoad, flips: Sequence[tuple[int, float]], path: Path, t0: float, title: str,
                     phases: Sequence[tuple[str, float, float]] = ()) -> Path:
    """Write the utilisation figure to ``path``.

    Parameters
    ----------
    load
        Events and CPU per worker per window (:func:`local.report.worker_load.measure`).
    flips
        ``(new_version, epoch_s)`` of each flip, drawn as vertical lines.
    path
        Output PNG path (parent folders are created).
    t0
        Epoch seconds of the run's start: the x axis is run time, as in the report's timeline.
    title
        Figure title.
    phases
        ``(name, start, end)`` (epoch s) of the scenario's movements of the load.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax_when, ax_cpu) = plt.subplots(3, 1, figsize=(11, 8), dpi=110, sharex=True,
                                              gridspec_kw={"height_ratios": [3, 0.55, 1.1]})
    w = load.window_s
    x = np.array([load.window_start(i) - t0 + w / 2 for i in range(load.n_windows)])
    _events_panel(ax, load, x)
    _when_panel(ax_when, flips, phases, t0)
    _cpu_panel(ax_cpu, load, x)
    for a in (ax, ax_when, ax_cpu):
        for _, at in flips:
            a.axvline(at - t0, color="grey", ls=":", lw=1)
        a.axvspan(x[0] - w / 2, load.measured.start_s - t0, color="0.9", zorder=0)
        a.axvspan(load.measured.end_s - t0, x[-1] + w / 2, color="0.9", zorder=0)
        a.set_xlim(x[0] - w / 2, x[-1] + w / 2)
    ax_cpu.set_xlabel(f"run time, s (windows of {w:g} s; grey: outside the measured span)")
    oc = load.over_cap()
    worst = f", worst {100 * oc.worst.utilisation:.0f}% ({oc.worst.key})" if oc.worst else ""
    ax.set_title(f"{title}\n{oc.over} of {oc.worker_windows} worker-windows over the cap "
                 f"({100 * oc.share:.1f}%){worst}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _events_panel(ax: Any, load: WorkerLoad, x: np.ndarray) -> None:
    stats = [load.window_stats(i) for i in range(load.n_windows)]
    lo = np.array([min((load.received[k][i] / load.cap for k in load.received if load.counted[k][i]),
                       default=np.nan) for i in range(load.n_windows)])
    hi, p90, med = (np.array([getattr(s, f) if s else np.nan for s in stats]) for f in ("max", "p90", "median"))
    ax.bar(x, 100 * (hi - lo), bottom=100 * lo, width=0.8 * load.window_s, color="tab:blue", alpha=0.13, lw=0,
           label="least to most loaded worker")
    ax.plot(x, 100 * hi, color="tab:blue", lw=1.6, marker="o", ms=4, label="max")
    ax.plot(x, 100 * p90, color="tab:blue", lw=1.1, ls="--", marker="_", ms=9, label="p90")
    ax.plot(x, 100 * med, color="tab:green", lw=1.4, marker="_", ms=9, label="median")
    top = max(130.0, 115.0 * float(np.nanmax(hi, initial=0.0)))
    jitter = np.linspace(-0.3, 0.3, max(2, len(load.received))) * load.window_s
    for j, key in enumerate(sorted(load.received)):
        u = 100 * np.array(load.received[key]) / load.cap
        counted = np.array(load.counted[key])
        xs = x + jitter[j]
        over = counted & (u > 100)
        ax.scatter(xs[counted & ~over], u[counted & ~over], s=7, color="0.3", alpha=0.6, lw=0, zorder=3)
        ax.scatter(xs[over], u[over], s=16, color="crimson", zorder=4)
        partial = ~counted & (u > 0)
        clipped = partial & (u > top)
        ax.scatter(xs[partial & ~clipped], u[partial & ~clipped], s=12, facecolors="none", edgecolors="0.65", lw=0.7,
                   zorder=2)
        ax.scatter(xs[clipped], np.full(int(clipped.sum()), 0.95 * top), s=16, marker="^", color="0.65", zorder=2)
    ax.scatter([], [], s=7, color="0.3", label="a worker-window")
    ax.scatter([], [], s=16, color="crimson", label="over the cap")
    ax.scatter([], [], s=12, facecolors="none", edgecolors="0.65", label="partial window\n(not counted)")
    ax.scatter([], [], s=16, marker="^", color="0.65", label="partial, off the scale\n(e.g. warm-up backlog)")
    ax.axhline(100, color="crimson", ls="--", lw=1, label="cap")
    ax.axhline(100 * MAX_UTILISATION, color="crimson", ls=":", lw=1, label=f"limit {100 * MAX_UTILISATION:.0f}%")
    ax.set_ylabel("events received, % of the cap")
    ax.set_ylim(0, top)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _when_panel(ax: Any, flips: Sequence[tuple[int, float]], phases: Sequence[tuple[str, float, float]],
                t0: float) -> None:
    for row, (name, start, end) in enumerate(phases):
        ax.barh(row, end - start, left=start - t0, height=0.6, color=f"C{row + 3}", alpha=0.5)
        ax.text(start - t0, row, f" {name}", va="center", fontsize=7)
    for version, at in flips:
        ax.text(at - t0, len(phases) - 0.45, f"flip v{version} ", ha="right", va="center", fontsize=7, color="dimgrey")
    ax.set_ylim(-0.6, max(1, len(phases)) - 0.2)
    ax.set_yticks([])
    ax.set_ylabel("load moves,\nflips", fontsize=8)


def _cpu_panel(ax: Any, load: WorkerLoad, x: np.ndarray) -> None:
    ms = {k: 1e3 * np.array(v) for k, v in load.cpu_s.items()}
    rows = [[ms[k][i] for k in ms if load.counted[k][i] and load.cpu_known[k][i]] for i in range(load.n_windows)]
    hi = np.array([max(r) if r else np.nan for r in rows])
    med = np.array([float(np.median(r)) if r else np.nan for r in rows])
    ax.plot(x, hi, color="tab:purple", lw=1.4, marker="o", ms=3, label="max")
    ax.plot(x, med, color="tab:green", lw=1.2, marker="_", ms=9, label="median")
    if not np.nansum(hi):
        ax.text(0.5, 0.5, "no cost report covers a counted worker-window", transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color="dimgrey")
    ax.set_ylabel(f"worker CPU (whole path), ms\nper {load.window_s:g}s window")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _source(cfg: RunConfig) -> str:
    """What the run replayed, for a figure's title: the built-in data set's seed, or the recorded log's file name
    (a whole path does not fit the title)."""
    return f"seed {cfg.seed}" if cfg.events is None else f"recorded log {Path(cfg.events.path).name!r}"


def utilisation_figure(state: RunState, load: WorkerLoad, flips: list[tuple[int, float]]) -> list[Path]:
    """Write ``utilisation.png``: utilisation at the workers per window, the scenario's phases, ``flips``."""
    if not load.received:
        return []
    cfg, r = state.config, state.replayer
    phases = []
    if r is not None and r.started_at is not None and isinstance(state.scenario, Scenario):  # a recorded log has none
        phases = [(name, r.started_at + lo * cfg.duration_s, r.started_at + hi * cfg.duration_s)
                  for name, (lo, hi) in (("day/night shift", SHIFT), ("hotspot ramp", HOTSPOT))]
    path = plot_utilisation(load, flips, cfg.out / "utilisation.png", state.started_at,
                            f"Utilisation measured at the workers: events received per {cfg.window_s:g}s window "
                            f"(cap {cfg.cap:g}), {_source(cfg)}", phases)
    return [path]
