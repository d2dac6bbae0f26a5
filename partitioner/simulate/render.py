"""Text output of a simulation: the comparison table, one quiet line per strategy, terminal progress."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO


def _pct(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{100.0 * v:.{digits}f}%"


def summary_line(name: str, s: Mapping[str, Any], modes: tuple[str, ...]) -> str:
    """One plain line: cost against the floor per swap mode, over-cap, worst, redeploys, speed."""
    cost = ", ".join(f"{s['cost_ratio'][m]:.2f}x ({m})" for m in modes)
    moved = f" (moved median {_pct(s['moved_median'], 1)}, max {_pct(s['moved_max'], 1)})" if s["redeploys"] else ""
    fast = s.get("fast_path")
    relief = f", {fast['reliefs']} by the fast path ({fast['signals']} signals)" if fast else ""
    return (f"{name}: cost {cost} vs the floor; {_pct(s['over_cap_share'], 2)} of worker-windows over cap "
            f"({s['over_cap_windows']:.1f}); worst {_pct(s['worst_utilisation'], 1)}, p99 {_pct(s['p99_utilisation'])}; "
            f"{s['redeploys']} redeploys{relief}{moved}; {s['seconds_per_window']:.3f} s/window")


def table(summaries: Mapping[str, Mapping[str, Any]], modes: tuple[str, ...]) -> str:
    """The strategies side by side (cost per swap mode, over cap, worst, p99, redeploys, moved, speed)."""
    cost_cols = "".join(f"{'cost ' + m:>12}" for m in modes)
    head = (f"{'strategy':<10}{'worker-win':>11}{cost_cols}{'over cap':>10}{'worst':>7}{'p99':>6}"
            f"{'redeploys':>10}{'moved med':>10}{'moved max':>10}{'spread':>8}{'s/window':>9}")
    lines = [head]
    for name, s in summaries.items():
        costs = "".join(f"{s['cost_ratio'][m]:>11.2f}x" for m in modes)
        lines.append(f"{name:<10}{s['worker_windows']:>11.0f}{costs}{_pct(s['over_cap_share'], 2):>10}"
                     f"{_pct(s['worst_utilisation']):>7}{_pct(s['p99_utilisation']):>6}{s['redeploys']:>10}"
                     f"{_pct(s['moved_median'], 1):>10}{_pct(s['moved_max'], 1):>10}{s['spread_p10_p95']:>7.1f}p"
                     f"{s['seconds_per_window']:>9.3f}")
    return "\n".join(lines)


class TerminalProgress:
    """Redraws one line per update on a terminal (at most every 0.2 s); silent when not a terminal."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.enabled = not quiet and self.stream.isatty()
        self.started = time.perf_counter()
        self._last = 0.0

    def __call__(self, name: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if done < total and now - self._last < 0.2:
            return
        self._last = now
        self.stream.write(f"\r\x1b[2Ksimulate: {name:<9} window {done}/{total}  {now - self.started:6.1f}s")
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
