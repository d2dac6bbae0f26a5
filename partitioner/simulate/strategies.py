"""The strategies a simulation compares, under one small interface.

A strategy sees each window once it has closed and may publish a spec (:meth:`Strategy.observe`);
it may also have a spec live from the start (:meth:`Strategy.start`). The loop
(:mod:`partitioner.simulate.loop`) puts published specs live ``latency_s`` later and measures them.

==============  ======================================================================================
``floor``       no spec: ``ceil(load / cap)`` workers each window, perfectly packed, no latency, no swaps
                (measured by the loop itself)
``static``      one spec built on every quadkey's maximum over the run, live all day
``rebuild``     a fresh build on every window (filled to 100 %), always published: the loop of the greedy
                baseline's article (:mod:`partitioner.builders.seed`), no policy
``reactive``    the controller in ``reactive`` mode (today's :class:`partitioner.control.policy.RebalancePolicy`)
``default``     the controller with the Lambda's settings (:class:`partitioner.control.controller.ControlSettings`)
``counts``      ``default`` balancing on event counts only (blind to the workers' cost reports)
==============  ======================================================================================

Every controller strategy sees what the partitioner Lambda sees: the window's events, weighted by
the cost rates the workers measured in *earlier* windows (:func:`partitioner.load.cost.apply_cost_rates`;
none when the scenario has no cost), except ``counts``. The controllers run
:func:`partitioner.control.controller.control_step`: the Lambda's code, not a copy.

A controller is also :class:`Relievable`: with a fast path the loop hands it the reliefs the partitioner would
publish between windows (:mod:`partitioner.simulate.fastpath`); the next window's decision builds on the relief and
sizes for its surges as for declared crowds, as the Lambda's window path does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from geokernel.partition_spec.model import Spec
from partitioner.builders import build_spec
from partitioner.control.controller import ControlSettings, ControlState, control_step
from partitioner.control.crowds import DeclaredCrowd
from partitioner.control.policy import Decision
from partitioner.control.relief import Relief, merge_surges
from partitioner.load.cost import apply_cost_rates, measured_rates
from partitioner.load.counts import Counts
from partitioner.simulate.fastpath import FastSettings
from partitioner.simulate.windows import SimulationError, Window, WindowSeries

DEFAULT_STRATEGIES = ("floor", "static", "rebuild", "reactive", "default")


@dataclass(frozen=True)
class RunContext:
    """What every strategy may know about the run (never a future window)."""

    max_load: float
    window_s: float
    latency_s: float
    epoch0: float  # start of window 0 (epoch s)
    deploy_s: float = 0.0  # a published spec goes live this long after (at most latency_s for a window's)
    fast: FastSettings | None = None  # the fast path's settings (None: no fast path)

    def window_end(self, t: int) -> float:
        return self.epoch0 + (t + 1) * self.window_s


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Strategy(Protocol):
    name: str

    def start(self, series: WindowSeries, ctx: RunContext) -> Spec | None:
        """A spec live from the start of the run, if the strategy has one."""

    def observe(self, t: int, window: Window, ctx: RunContext) -> Spec | None:
        """Window ``t`` has just closed: return a spec to publish, or None."""


@runtime_checkable
class Relievable(Protocol):
    """A strategy the fast path can relieve: it says what is published and takes a relief as published."""

    def desired(self) -> Spec | None:
        """The newest spec it published (what a relief builds on)."""

    def fill(self) -> float:
        """The share of the cap its last decision packed to (what a relief fills targets to)."""

    def relieved(self, relief: Relief, now: float) -> None:
        """Take ``relief`` as published at ``now``: it is the newest spec, and its surges are reserved from now on."""


@dataclass
class Static:
    """One spec sized on every quadkey's maximum over the run (the worst case, known in advance)."""

    name: str = "static"

    def start(self, series: WindowSeries, ctx: RunContext) -> Spec | None:
        return build_spec(series.peak(), ctx.max_load, version=1, created_at=iso(ctx.epoch0))

    def observe(self, t: int, window: Window, ctx: RunContext) -> Spec | None:
        return None


@dataclass
class Rebuild:
    """A fresh build on every window, published at once (no stickiness, no policy)."""

    name: str = "rebuild"
    rates: dict[str, float] = field(default_factory=dict)
    version: int = 0

    def start(self, series: WindowSeries, ctx: RunContext) -> Spec | None:
        return None

    def observe(self, t: int, window: Window, ctx: RunContext) -> Spec | None:
        counts = apply_cost_rates(window.events, self.rates, window.events.grid_zoom)
        learn(self.rates, window)
        self.version += 1
        end = iso(ctx.window_end(t))
        spec = build_spec(counts, ctx.max_load, version=self.version, created_at=end)
        return replace(spec, source={**spec.source, "window_end": end})


@dataclass
class Controlled:
    """The partitioner Lambda's controller (:func:`partitioner.control.controller.control_step`), step by step."""

    name: str
    settings: ControlSettings
    use_cost: bool = True
    state: ControlState = field(default_factory=ControlState)
    current: Spec | None = None
    rates: dict[str, float] = field(default_factory=dict)
    decisions: list[tuple[int, Decision]] = field(default_factory=list)
    surges: tuple[DeclaredCrowd, ...] = ()  # the fast path's, reserved like declared crowds until they end

    def start(self, series: WindowSeries, ctx: RunContext) -> Spec | None:
        return None

    def desired(self) -> Spec | None:
        return self.current

    def fill(self) -> float:
        for _, decision in reversed(self.decisions):
            if "fill" in decision.details:
                return float(decision.details["fill"])
        p = self.settings.predictive
        return 1.0 / (1.0 + p.default_headroom)

    def relieved(self, relief: Relief, now: float) -> None:
        if relief.spec is not None:
            self.current = relief.spec
        self.surges = merge_surges(self.surges, relief.surges, now)

    def observe(self, t: int, window: Window, ctx: RunContext) -> Spec | None:
        counts = window.events
        if self.use_cost:
            counts = apply_cost_rates(counts, self.rates, counts.grid_zoom)
            learn(self.rates, window)
        end = ctx.window_end(t)
        version = (self.current.version if self.current else 0) + 1
        previous = self.current

        def build(c: Counts, fill: float) -> Spec:
            spec = build_spec(c, ctx.max_load, previous=previous, version=version, created_at=iso(end), fill=fill)
            return replace(spec, source={**spec.source, "window_end": iso(end), "window_s": ctx.window_s})

        self.surges = tuple(c for c in self.surges if c.end > end)
        settings = replace(self.settings, crowds=(*self.settings.crowds, *self.surges)) if self.surges else \
            self.settings
        # the deployed controller forecasts for the snapshot-to-live latency the deploy controller measured
        # (lambdas/partitioner/logic.py): here that latency is known, so the policy is given it
        step = control_step(settings, self.state, counts, window_end=end, window_s=ctx.window_s, now=end,
                            current=self.current, max_load=ctx.max_load, build=build, events=window.events,
                            latency_s=ctx.latency_s)
        self.state = step.state
        self.decisions.append((t, step.decision))
        if step.candidate is None:
            return None
        self.current = step.candidate
        self.state = self.state.published(end)
        return step.candidate


def learn(rates: dict[str, float], window: Window) -> None:
    """Record the cost rates the workers measured in this window (newest wins), for later windows."""
    if window.cost is not None:
        rates.update(measured_rates(window.events, window.cost, window.events.grid_zoom))


#: Each strategy by name, made from the controller's settings (``floor`` is None: the loop measures it itself).
MAKERS: Mapping[str, Callable[[ControlSettings], Strategy | None]] = MappingProxyType({
    "floor": lambda settings: None,
    "static": lambda settings: Static(),
    "rebuild": lambda settings: Rebuild(),
    "reactive": lambda settings: Controlled("reactive", replace(settings, mode="reactive")),
    "default": lambda settings: Controlled("default", settings),
    "counts": lambda settings: Controlled("counts", settings, use_cost=False),
})
STRATEGIES = tuple(MAKERS)


def make(name: str, settings: ControlSettings) -> Strategy | None:
    """Return the strategy ``name`` (None for ``floor``, which the loop measures itself)."""
    if name not in MAKERS:
        raise SimulationError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}")
    return MAKERS[name](settings)


def parse_strategies(text: str) -> tuple[str, ...]:
    """Parse ``a,b,...`` into strategy names (order kept, duplicates dropped); raise naming an unknown one."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise SimulationError(f"--strategies {text!r} names no strategy; choose from {', '.join(STRATEGIES)}")
    for n in names:
        if n not in STRATEGIES:
            raise SimulationError(f"--strategies: unknown strategy {n!r}; choose from {', '.join(STRATEGIES)}")
    return names
