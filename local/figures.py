"""The run's own figure: utilisation per worker over time (PNG, matplotlib Agg).

Partition maps come from :mod:`partitioner.plot`; this module only draws what is specific
to a run: each worker's share of the cap per snapshot window, one line per
``v<version>/<worker>``, with the cap (100 %) and the flips marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from local.output import UtilSeries


def plot_utilisation(series: UtilSeries, flips: Sequence[tuple[int, float]], path: Path, title: str) -> Path:
    """Write a line chart of utilisation per worker over run time to ``path``.

    Parameters
    ----------
    series
        Events per worker per window (:func:`local.output.utilisation`).
    flips
        ``(new_version, epoch_s)`` of each flip, drawn as vertical lines.
    path
        Output PNG path (parent folders are created).
    title
        Figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=110)
    cmap = plt.get_cmap("tab20")
    for i, key in enumerate(sorted(series.counts)):
        util = series.utilisation(key)
        xs = [(j + 0.5) * series.window_s for j in range(len(util))]
        pts = [(x, 100 * u) for x, u in zip(xs, util, strict=True) if u > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.4, color=cmap(i % 20),
                    label=key)
    ax.axhline(100, color="crimson", ls="--", lw=1, label="cap (max load)")
    for version, at in flips:
        x = at - series.t0_s
        ax.axvline(x, color="grey", ls=":", lw=1)
        ax.text(x, ax.get_ylim()[1] * 0.97, f" flip v{version}", rotation=90, va="top", fontsize=8, color="grey")
    ax.set_xlabel(f"run time of the events, s (windows of {series.window_s:g} s)")
    ax.set_ylabel("utilisation, % of the cap")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
