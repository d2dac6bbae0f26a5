"""The simulation figure (PNG): per strategy, live workers against the floor and worker utilisation.

One row per strategy (the floor is drawn in every row, not in a row of its own):

* left, live workers per window against the floor ``ceil(load / cap)``, the gap shaded;
* right, the max, p90 and median worker utilisation per window against the cap (100 %), with
  over-cap windows marked.

matplotlib is imported here only (Agg backend); the CLI imports this module lazily.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

MAX_SHOWN = 250.0  # utilisation axis limit, %: higher values are drawn at the top and named

def plot_simulation(summaries: Mapping[str, Mapping[str, Any]], window_s: float, path: str | Path, *,
                    title: str = "", modes: tuple[str, ...] = ("whole", "carry")) -> None:
    """Draw the figure for ``summaries`` (:func:`partitioner.simulate.summary.summarise` output) to ``path``."""
    names = [n for n in summaries if n != "floor"] or list(summaries)
    span_s = max((len(summaries[n]["series"]["t"]) for n in names), default=0) * window_s
    unit, unit_name = (3600.0, "hour of the day (UTC)") if span_s >= 3 * 3600 else (60.0, "minutes from the start")
    rows = len(names)
    fig, axes = plt.subplots(rows, 2, figsize=(13, 2.3 * rows + 0.9), squeeze=False, sharex=True,
                             gridspec_kw={"width_ratios": [1, 1]})
    top = max(max(summaries[n]["series"]["workers"], default=0) for n in names)
    for row, name in enumerate(names):
        s = summaries[name]
        ser = s["series"]
        hours = np.asarray(ser["t"], dtype=np.float64) * window_s / unit
        ax = axes[row][0]
        workers, floor = np.asarray(ser["workers"]), np.asarray(ser["floor"])
        ax.fill_between(hours, floor, workers, where=workers >= floor, color="tab:orange", alpha=0.25, lw=0,
                        step="mid")
        ax.step(hours, floor, where="mid", color="0.3", lw=1.2, label="floor ceil(load/cap)")
        ax.step(hours, workers, where="mid", color="tab:blue", lw=1.4, label="live workers")
        ax.set_ylim(0, top * 1.08 + 1)
        ax.set_ylabel("workers")
        cost = ", ".join(f"{s['cost_ratio'][m]:.2f}x {m}" for m in modes if m in s["cost_ratio"])
        ax.set_title(f"{name}: cost {cost} (swaps counted), {s['redeploys']} redeploys", fontsize=10, loc="left")
        ax.grid(alpha=0.3)
        ax2 = axes[row][1]
        top_pct = min(MAX_SHOWN, max(130.0, 100 * float(np.max(ser["max"], initial=0)) + 5))
        peak = 100 * np.asarray(ser["max"])
        ax2.plot(hours, np.minimum(peak, top_pct), color="tab:red", lw=1.2, label="max")
        ax2.plot(hours, np.minimum(100 * np.asarray(ser["p90"]), top_pct), color="tab:purple", lw=1.0, label="p90")
        ax2.plot(hours, np.minimum(100 * np.asarray(ser["median"]), top_pct), color="tab:green", lw=1.0,
                 label="median")
        ax2.axhline(100, color="k", lw=1.0, ls="--", label="cap")
        over = peak > 100.0 + 1e-7
        if over.any():
            ax2.scatter(hours[over], np.minimum(peak[over], top_pct), color="tab:red", s=14, zorder=3,
                        label="over cap")
        if peak.max(initial=0) > top_pct:
            ax2.annotate(f"off scale: up to {peak.max():.0f}%", xy=(0.99, 0.97), xycoords="axes fraction",
                         ha="right", va="top", fontsize=8, color="tab:red")
        ax2.set_ylim(0, top_pct)
        ax2.set_ylabel("worker utilisation %")
        ax2.set_title(f"{100 * s['over_cap_share']:.2f}% of worker-windows over cap, worst "
                      f"{100 * s['worst_utilisation']:.0f}%, p99 {100 * s['p99_utilisation']:.0f}%", fontsize=10,
                      loc="left")
        ax2.grid(alpha=0.3)
        if row == 0:
            ax.legend(loc="lower right", fontsize=8, ncol=2)
            ax2.legend(loc="lower right", fontsize=8, ncol=5)
    for ax in axes[-1]:
        ax.set_xlabel(unit_name)
    if title:
        fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
