"""The closed loop: windows close, the strategy decides, specs go live later, the true load is applied.

Timeline (window ``t`` spans ``[t S, (t+1) S)``, ``S`` = ``window_s``):

* at ``(t+1) S`` the strategy sees window ``t`` (:meth:`Strategy.observe`) and may publish;
* a spec published then goes live at ``(t+1) S + latency_s``; specs go live in publish order;
* window ``t``'s **true** load (the cost when the scenario has one) is attributed to each spec live
  during it (:class:`partitioner.load.loads.SpecLoads`), load spread evenly over the window: a spec live
  for a fraction ``f`` of the window counts ``f`` worker-windows per worker, and each of its workers
  is at ``load / cap`` utilisation for that fraction;
* each flip is a :class:`~partitioner.simulate.swaps.Swap`, measured under the load of its window.

Only windows from ``ceil((S + latency_s) / S)`` on are measured, for every strategy and the
floor alike: before that no controller can have a spec live.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from partitioner.load.bound import lower_bound
from partitioner.load.loads import OVER, Cells, SpecLoads, cells_of, moves, spec_loads
from partitioner.simulate.strategies import RunContext, Strategy
from partitioner.simulate.swaps import Swap
from partitioner.simulate.windows import WindowSeries

FloatArray = npt.NDArray[np.float64]
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class WindowRecord:
    """One measured window of one strategy."""

    t: int
    total: float  # true load
    floor: int  # ceil(total / cap)
    workers: float  # live workers, time-weighted over the window
    utilisation: FloatArray  # every live worker's utilisation (one entry per worker per live spec)
    weight: FloatArray  # the fraction of the window each entry covers

    @property
    def over_cap(self) -> float:
        """Worker-windows above the cap."""
        return float(self.weight[self.utilisation > 1.0 + OVER].sum())


@dataclass
class StrategyRun:
    """Everything measured for one strategy."""

    name: str
    windows: list[WindowRecord] = field(default_factory=list)
    swaps: list[Swap] = field(default_factory=list)
    seconds: float = 0.0  # time the strategy itself took (build + decide)
    observed: int = 0  # windows it observed
    wall_s: float = 0.0  # the whole run of this strategy (windows drawn, decisions, accounting)


@dataclass
class _Live:
    at: float  # epoch s
    spec: SpecLoads


def first_measured(window_s: float, latency_s: float) -> int:
    """Index of the first window every strategy can have a spec live for all of."""
    return math.ceil((window_s + latency_s) / window_s - 1e-9)


def run(strategy: Strategy | None, name: str, series: WindowSeries, ctx: RunContext,
        progress: Progress | None = None) -> StrategyRun:
    """Run ``strategy`` (None: the floor) through every window of ``series``."""
    began_run = time.perf_counter()
    out = StrategyRun(name)
    schedule: list[_Live] = []
    if strategy is not None:
        initial = strategy.start(series, ctx)
        if initial is not None:
            schedule.append(_Live(-math.inf, spec_loads(initial)))
    start = first_measured(ctx.window_s, ctx.latency_s)
    n = len(series)
    for t in range(n):
        window = series.window(t)
        if t >= start:
            truth = cells_of(window.truth)
            out.windows.append(_floor_record(t, truth, ctx) if strategy is None else
                               _measure(t, truth, schedule, ctx, out.swaps))
        if strategy is not None:
            began = time.perf_counter()
            spec = strategy.observe(t, window, ctx)
            out.seconds += time.perf_counter() - began
            out.observed += 1
            if spec is not None:
                schedule.append(_Live(ctx.window_end(t) + ctx.latency_s, spec_loads(spec)))
        if progress is not None:
            progress(name, t + 1, n)
    out.wall_s = time.perf_counter() - began_run
    return out


def _floor_record(t: int, truth: Cells, ctx: RunContext) -> WindowRecord:
    n = lower_bound(truth.total, ctx.max_load)
    u = truth.total / (n * ctx.max_load)
    return WindowRecord(t, truth.total, n, float(n), np.full(n, u), np.ones(n))


def _measure(t: int, truth: Cells, schedule: list[_Live], ctx: RunContext, swaps: list[Swap]) -> WindowRecord:
    """Apply the window's true load to every spec live during it; record flips inside it as swaps."""
    lo, hi = ctx.epoch0 + t * ctx.window_s, ctx.epoch0 + (t + 1) * ctx.window_s
    live = [i for i, s in enumerate(schedule) if s.at < hi]
    current = max((i for i in live if schedule[i].at < lo), default=None)
    inside = [i for i in live if schedule[i].at >= lo]  # flips during this window (at its start included)
    segments: list[tuple[float, SpecLoads]] = []
    edges = [lo, *(schedule[i].at for i in inside), hi]
    owners = [current, *inside]
    for k, i in enumerate(owners):
        frac = (edges[k + 1] - edges[k]) / ctx.window_s
        if i is not None and frac > 0:
            segments.append((frac, schedule[i].spec))
    for prev, i in zip(owners, inside, strict=False):
        if prev is not None:
            swaps.append(_swap(t, schedule[prev].spec, schedule[i].spec, truth, ctx.max_load))
    utils: list[FloatArray] = []
    weights: list[FloatArray] = []
    workers = 0.0
    for frac, sl in segments:
        u = sl.worker_loads(truth) / ctx.max_load
        utils.append(u)
        weights.append(np.full(len(u), frac))
        workers += frac * len(u)
    u_all = np.concatenate(utils) if utils else np.zeros(0)
    w_all = np.concatenate(weights) if weights else np.zeros(0)
    return WindowRecord(t, truth.total, lower_bound(truth.total, ctx.max_load), workers, u_all, w_all)


def _swap(t: int, old: SpecLoads, new: SpecLoads, truth: Cells, cap: float) -> Swap:
    mv = moves(old, new, truth)
    new_slots = len(set(new.worker_ids) - set(old.worker_ids))
    return Swap(t, old.spec.version, new.spec.version, len(old.worker_ids), len(new.worker_ids), new_slots,
                mv.moved_share, mv.changed_worker / cap)
