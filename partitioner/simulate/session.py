"""One simulation: every strategy through the same windows, the floor measured in the same run."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from partitioner.control.controller import ControlSettings
from partitioner.simulate import strategies as strat
from partitioner.simulate.fastpath import FastSettings
from partitioner.simulate.loop import Progress, StrategyRun, run
from partitioner.simulate.strategies import RunContext
from partitioner.simulate.summary import summarise
from partitioner.simulate.windows import SimulationError, WindowSeries

EPOCH0 = 1_782_000_000.0 - (1_782_000_000.0 % 86_400.0)  # a midnight UTC: window 0 starts at 00:00


@dataclass(frozen=True)
class SimSettings:
    """The run's settings (a scenario supplies defaults; the CLI may override each)."""

    max_load: float
    window_s: float
    latency_s: float
    swap_s: float
    swap_modes: tuple[str, ...] = ("whole", "carry")
    fast: FastSettings | None = None  # the fast path (None: the window path alone)

    def __post_init__(self) -> None:
        for name in ("max_load", "window_s"):
            if not getattr(self, name) > 0:
                raise SimulationError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("latency_s", "swap_s"):
            if not getattr(self, name) >= 0:
                raise SimulationError(f"{name} must be >= 0, got {getattr(self, name)!r}")


@dataclass
class Simulation:
    """The runs of every strategy and their summaries."""

    settings: SimSettings
    runs: dict[str, StrategyRun]
    summaries: dict[str, dict[str, Any]]
    wall_s: float

    def to_dict(self, scenario: str = "", description: str = "") -> dict[str, Any]:
        return {"scenario": scenario, "description": description,
                "settings": {**asdict(self.settings), "swap_modes": list(self.settings.swap_modes)},
                "wall_s": self.wall_s, "strategies": self.summaries}


def simulate(series: WindowSeries, settings: SimSettings, names: Sequence[str], control: ControlSettings,
             progress: Progress | None = None, epoch0: float | None = None) -> Simulation:
    """Run the strategies ``names`` (the floor is always measured, and reported when named).

    ``epoch0`` is window 0's start (epoch s; default :data:`EPOCH0`, a midnight UTC): what the windows' times, and
    so declared crowds' times, are measured from.
    """
    if len(series) == 0:
        raise SimulationError("no windows to simulate")
    fast = settings.fast
    ctx = RunContext(settings.max_load, settings.window_s, settings.latency_s, EPOCH0 if epoch0 is None else epoch0,
                     fast.deploy_s if fast is not None else 0.0, fast)
    began = time.perf_counter()
    floor = run(None, "floor", series, ctx, progress)
    floor_ww = float(sum(r.workers for r in floor.windows))
    if floor_ww <= 0:
        raise SimulationError(f"no load in the measured windows (the first {len(series) - len(floor.windows)} "
                              f"windows are never measured: latency {settings.latency_s:g} s)")
    runs: dict[str, StrategyRun] = {"floor": floor} if "floor" in names else {}
    for name in names:
        if name == "floor":
            continue
        strategy = strat.make(name, control)
        runs[name] = run(strategy, name, series, ctx, progress)
    order = [n for n in names if n in runs]
    summaries = {n: summarise(runs[n], floor_ww, settings.swap_modes, settings.swap_s, settings.window_s)
                 for n in order}
    return Simulation(settings, {n: runs[n] for n in order}, summaries, time.perf_counter() - began)
