"""Per-strategy figures of a simulation (what ``--json`` writes and the table prints).

For each strategy, over the measured windows:

``worker_windows``      live workers summed over windows (time-weighted across flips)
``swap_worker_windows`` per swap mode, the overlap's extra workers x ``swap_s / window_s``, summed
``cost_ratio``          per swap mode, (worker_windows + swap_worker_windows) / the floor's worker_windows
``over_cap_windows``    worker-windows whose true load exceeds the cap; ``over_cap_share`` = that / worker_windows
``worst_utilisation``   the highest worker utilisation of any window; ``p99_utilisation`` the 99th percentile
                        over worker-windows
``redeploys``           flips; ``moved_median`` / ``moved_max`` the share of load changing partition or worker
                        at a flip (None without flips)
``seconds_per_window``  the strategy's own time (build + decide) per observed window; ``wall_s`` its whole run
``spread_p10_p95``      median over windows of the p95 - p10 worker utilisation, in points; ``max_over_median``
                        median over windows of max / median worker utilisation (how evenly the CPU is spread)
``series``              per window: live workers, floor, and max / p90 / median worker utilisation
``fast_path``           with a fast path: ``signals`` (the meter's), ``reliefs`` (specs it published), ``relieved``
                        (per relief: when, the cells moved, the reasons); None without
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from partitioner.simulate.loop import StrategyRun, WindowRecord

FloatArray = npt.NDArray[np.float64]


def weighted_quantile(values: FloatArray, weights: FloatArray, q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` with ``weights`` (the smallest value whose cumulative share reaches q)."""
    if len(values) == 0:
        return 0.0
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    k = int(np.searchsorted(cum, q * cum[-1] - 1e-12))
    return float(values[order][min(k, len(values) - 1)])


def _window_stats(r: WindowRecord) -> dict[str, float]:
    u, w = r.utilisation, r.weight
    med = weighted_quantile(u, w, 0.5)
    return {"max": float(u.max()) if len(u) else 0.0, "p90": weighted_quantile(u, w, 0.9), "median": med,
            "spread": 100.0 * (weighted_quantile(u, w, 0.95) - weighted_quantile(u, w, 0.10)),
            "max_over_median": float(u.max()) / med if len(u) and med > 0 else 0.0}


def summarise(run: StrategyRun, floor_worker_windows: float, modes: tuple[str, ...], swap_s: float,
              window_s: float) -> dict[str, Any]:
    """The figures of one strategy (see the module docstring); the floor passes its own run."""
    recs = run.windows
    ww = float(sum(r.workers for r in recs))
    swap = {m: float(sum(s.worker_windows(m, swap_s, window_s) for s in run.swaps)) for m in modes}
    over = float(sum(r.over_cap for r in recs))
    u = np.concatenate([r.utilisation for r in recs]) if recs else np.zeros(0)
    w = np.concatenate([r.weight for r in recs]) if recs else np.zeros(0)
    stats = [_window_stats(r) for r in recs]
    moved = [s.moved_share for s in run.swaps]
    return {
        "windows": len(recs),
        "worker_windows": ww,
        "swap_worker_windows": swap,
        "cost_ratio": {m: (ww + swap[m]) / floor_worker_windows if floor_worker_windows > 0 else 0.0 for m in modes},
        "over_cap_windows": over,
        "over_cap_share": over / ww if ww > 0 else 0.0,
        "worst_utilisation": float(u.max()) if len(u) else 0.0,
        "p99_utilisation": weighted_quantile(u, w, 0.99),
        "redeploys": len(run.swaps),
        "moved_median": float(np.median(moved)) if moved else None,
        "moved_max": float(np.max(moved)) if moved else None,
        "seconds_per_window": run.seconds / run.observed if run.observed else 0.0,
        "wall_s": run.wall_s,
        "spread_p10_p95": float(np.median([s["spread"] for s in stats])) if stats else 0.0,
        "max_over_median": float(np.median([s["max_over_median"] for s in stats])) if stats else 0.0,
        "series": {"t": [r.t for r in recs], "workers": [r.workers for r in recs], "floor": [r.floor for r in recs],
                   "max": [s["max"] for s in stats], "p90": [s["p90"] for s in stats],
                   "median": [s["median"] for s in stats]},
        "fast_path": _fast(run),
    }


def _fast(run: StrategyRun) -> dict[str, Any] | None:
    """The fast path's figures (None when it did not run)."""
    if run.fast is None:
        return None
    published = [(at, r) for at, r in run.fast.reliefs if r.spec is not None]
    return {"signals": len(run.fast.signals), "reliefs": len(published),
            "relieved": [{"at": at, "version": r.spec.version if r.spec else None,
                          "cells": [m.quadkey for m in r.moves], "new_workers": sum(m.new_workers for m in r.moves),
                          "reasons": list(r.reasons)} for at, r in run.fast.reliefs]}
