"""The closed loop: windows close, the strategy decides, specs go live later, the true load is applied.

Timeline (window ``t`` spans ``[t S, (t+1) S)``, ``S`` = ``window_s``; ``L`` = ``latency_s``, ``D`` = ``deploy_s``):

* window ``t`` closes at ``(t+1) S``; the strategy decides on it (:meth:`Strategy.observe`) and publishes at
  ``(t+1) S + L - min(D, L)``, when the snapshot, the build and the decision are done, with what it knows of window
  ``t`` alone but on the newest published spec (which a relief may have changed since the window closed);
* a published spec goes live ``min(D, L)`` later (a relief ``D`` later), one deployment at a time in publish order
  (:class:`Deploys`): a deployment starts no sooner than ``drain_s`` after the previous flip, and a spec published
  while the one before it waits to start replaces it. Without reliefs a window's spec is live at ``(t+1) S + L``;
* with a fast path (:mod:`partitioner.simulate.fastpath`) every tick of a window (the router's interval) is counted
  under the spec live during it, and a signal is relieved ``signal_s`` later;
* window ``t``'s **true** load (the cost when the scenario has one) is attributed to each spec live during it
  (:class:`partitioner.load.loads.SpecLoads`): one spec for all of it gives each of its workers ``load / cap``; when
  a flip falls inside the window each spec carries the ticks it was live for (a tick split evenly at a flip), and
  each worker (its id, across specs: a carried slot) is at the load it carried over ``cap`` times the share of the
  window it was live, that share its weight. A spec live for a share ``f`` of the window counts ``f`` worker-windows
  per worker;
* each flip is a :class:`~partitioner.simulate.swaps.Swap`, measured under the load of its window.

Only windows from ``ceil((S + latency_s) / S)`` on are measured, for every strategy and the
floor alike: before that no controller can have a spec live.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.partition_spec.model import Spec
from partitioner.load.bound import lower_bound
from partitioner.load.loads import OVER, Cells, SpecLoads, cells_of, moves, spec_loads
from partitioner.simulate.fastpath import FastPath
from partitioner.simulate.strategies import Relievable, RunContext, Strategy
from partitioner.simulate.swaps import Swap
from partitioner.simulate.windows import Window, WindowSeries, ticks_of

FloatArray = npt.NDArray[np.float64]
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class WindowRecord:
    """One measured window of one strategy."""

    t: int
    total: float  # true load
    floor: int  # ceil(total / cap)
    workers: float  # live workers, time-weighted over the window
    utilisation: FloatArray  # every live worker's utilisation (one entry per worker id)
    weight: FloatArray  # the share of the window each entry covers

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
    fast: FastPath | None = None  # the fast path's meter and reliefs, when it ran


@dataclass
class _Live:
    at: float  # epoch s
    spec: SpecLoads
    start: float = -math.inf  # its deployment's start


class Deploys:
    """Published specs and when each goes live: one deployment at a time, in publish order (module docstring)."""

    def __init__(self, drain_s: float) -> None:
        self.drain_s = drain_s
        self.schedule: list[_Live] = []

    def publish(self, spec: Spec, at: float, deploy_s: float) -> float:
        """Deploy ``spec`` published at ``at`` (taking ``deploy_s``); the time it goes live."""
        if self.schedule and self.schedule[-1].start > at:  # the one before has not started: superseded
            begin = self.schedule.pop().start
        else:
            begin = max(at, self.schedule[-1].at + self.drain_s) if self.schedule else at
        self.schedule.append(_Live(begin + deploy_s, spec_loads(spec), begin))
        return begin + deploy_s

    def live(self, when: float) -> Spec | None:
        """The spec live just before ``when``."""
        for s in reversed(self.schedule):
            if s.at < when:
                return s.spec.spec
        return None


def first_measured(window_s: float, latency_s: float) -> int:
    """Index of the first window every strategy can have a spec live for all of."""
    return math.ceil((window_s + latency_s) / window_s - 1e-9)


@dataclass
class _Timeline:
    """What happens between windows: ticks counted, window decisions and reliefs published, in time order."""

    strategy: Strategy | None
    ctx: RunContext
    deploys: Deploys
    fast: FastPath | None
    out: StrategyRun
    events: list[tuple[float, int, int, Any]] = field(default_factory=list)
    seq: int = 0

    DECIDE, RELIEF, TICK = 0, 1, 2

    def push(self, at: float, kind: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, payload))

    def run_until(self, until: float) -> None:
        while self.events and self.events[0][0] <= until:
            at, kind, _, payload = heapq.heappop(self.events)
            if kind == self.DECIDE:
                self._decide(at, *payload)
            elif kind == self.RELIEF:
                self._relieve(at, payload)
            else:
                self._tick(at, *payload)

    def _decide(self, at: float, t: int, window: Window) -> None:
        assert self.strategy is not None
        began = time.perf_counter()
        spec = self.strategy.observe(t, window, self.ctx)
        self.out.seconds += time.perf_counter() - began
        self.out.observed += 1
        if spec is not None:
            self.deploys.publish(spec, at, min(self.ctx.deploy_s, self.ctx.latency_s))

    def _tick(self, at: float, start: float, tick: Window) -> None:
        assert self.fast is not None
        for signal in self.fast.tick(tick.events, start, at, self.deploys.live(at)):
            self.push(at + self.fast.settings.signal_s, self.RELIEF, signal)

    def _relieve(self, at: float, signal: Any) -> None:
        assert self.fast is not None and isinstance(self.strategy, Relievable)
        desired = self.strategy.desired()
        if desired is None:
            return
        live = self.deploys.live(at)
        began = time.perf_counter()
        relief = self.fast.relieve(signal, desired, fill=self.strategy.fill(), now=at,
                                   reach_s=self.ctx.latency_s + self.ctx.window_s,
                                   taken=tuple(w.id for w in live.workers) if live is not None else ())
        self.out.seconds += time.perf_counter() - began
        if relief.spec is not None:
            self.strategy.relieved(relief, at)
            self.deploys.publish(relief.spec, at, self.fast.settings.deploy_s)


def run(strategy: Strategy | None, name: str, series: WindowSeries, ctx: RunContext,
        progress: Progress | None = None) -> StrategyRun:
    """Run ``strategy`` (None: the floor) through every window of ``series``."""
    began_run = time.perf_counter()
    out = StrategyRun(name)
    deploys = Deploys(ctx.fast.drain_s if ctx.fast is not None else 0.0)
    if strategy is not None:
        initial = strategy.start(series, ctx)
        if initial is not None:
            deploys.schedule.append(_Live(-math.inf, spec_loads(initial)))
    fast = FastPath(ctx.fast) if ctx.fast is not None and isinstance(strategy, Relievable) else None
    out.fast = fast
    line = _Timeline(strategy, ctx, deploys, fast, out)
    start = first_measured(ctx.window_s, ctx.latency_s)
    n = len(series)
    for t in range(n):
        window = series.window(t)
        lo, hi = ctx.epoch0 + t * ctx.window_s, ctx.epoch0 + (t + 1) * ctx.window_s
        ticks = ticks_of(series, t) if fast is not None or strategy is not None else (window,)
        if fast is not None:
            step = ctx.window_s / len(ticks)
            for j, tick in enumerate(ticks):
                line.push(lo + (j + 1) * step, line.TICK, (lo + j * step, tick))
        if strategy is not None:
            line.push(hi + ctx.latency_s - min(ctx.deploy_s, ctx.latency_s), line.DECIDE, (t, window))
        line.run_until(hi)
        if t >= start:
            truth = cells_of(window.truth)
            out.windows.append(_floor_record(t, truth, ctx) if strategy is None else
                               _measure(t, truth, ticks, deploys.schedule, ctx, out.swaps))
        if progress is not None:
            progress(name, t + 1, n)
    line.run_until(math.inf)  # the last windows' decisions (they change no measured window; the strategy sees all)
    out.wall_s = time.perf_counter() - began_run
    return out


def _floor_record(t: int, truth: Cells, ctx: RunContext) -> WindowRecord:
    n = lower_bound(truth.total, ctx.max_load)
    u = truth.total / (n * ctx.max_load)
    return WindowRecord(t, truth.total, n, float(n), np.full(n, u), np.ones(n))


def _measure(t: int, truth: Cells, ticks: tuple[Window, ...], schedule: list[_Live], ctx: RunContext,
             swaps: list[Swap]) -> WindowRecord:
    """Apply the window's true load to every spec live during it; record flips inside it as swaps."""
    lo, hi = ctx.epoch0 + t * ctx.window_s, ctx.epoch0 + (t + 1) * ctx.window_s
    live = [i for i, s in enumerate(schedule) if s.at < hi]
    current = max((i for i in live if schedule[i].at < lo), default=None)
    inside = [i for i in live if schedule[i].at >= lo]  # flips during this window (at its start included)
    edges = [lo, *(schedule[i].at for i in inside), hi]
    owners = [current, *inside]
    segments = [(edges[k], edges[k + 1], schedule[i].spec) for k, i in enumerate(owners)
                if i is not None and edges[k + 1] > edges[k]]
    for prev, i in zip(owners, inside, strict=False):
        if prev is not None:
            swaps.append(_swap(t, schedule[prev].spec, schedule[i].spec, truth, ctx.max_load))
    workers = sum((b - a) / ctx.window_s * len(sl.worker_ids) for a, b, sl in segments)
    if len(segments) == 1 and segments[0][1] - segments[0][0] >= ctx.window_s:
        u = segments[0][2].worker_loads(truth) / ctx.max_load
        return WindowRecord(t, truth.total, lower_bound(truth.total, ctx.max_load), workers, u, np.ones(len(u)))
    load: dict[str, float] = {}
    share: dict[str, float] = {}
    step = ctx.window_s / len(ticks)
    tick_cells = [cells_of(tick.truth) for tick in ticks] if len(ticks) > 1 else [truth]
    for a, b, sl in segments:
        carried = np.zeros(len(sl.worker_ids))
        for j, cells in enumerate(tick_cells):
            overlap = min(b, lo + (j + 1) * step) - max(a, lo + j * step)
            if overlap > 0:
                carried += overlap / step * sl.worker_loads(cells)
        for wid, v in zip(sl.worker_ids, carried.tolist(), strict=True):
            load[wid] = load.get(wid, 0.0) + v
            share[wid] = share.get(wid, 0.0) + (b - a) / ctx.window_s
    ids = list(load)
    w_all = np.array([share[w] for w in ids])
    u_all = np.array([load[w] for w in ids]) / (ctx.max_load * np.maximum(w_all, 1e-12))
    return WindowRecord(t, truth.total, lower_bound(truth.total, ctx.max_load), workers, u_all, w_all)


def _swap(t: int, old: SpecLoads, new: SpecLoads, truth: Cells, cap: float) -> Swap:
    mv = moves(old, new, truth)
    new_slots = len(set(new.worker_ids) - set(old.worker_ids))
    return Swap(t, old.spec.version, new.spec.version, len(old.worker_ids), len(new.worker_ids), new_slots,
                mv.moved_share, mv.changed_worker / cap)
