"""The fast path in the simulator: the router's surge meter on every tick, the partitioner's relief on every signal.

The code that decides is the Lambdas': :class:`geokernel.surge.meter.SurgeMeter` (what each router environment runs on
the events it routes) and :func:`partitioner.control.relief.relieve` (what the partitioner Lambda runs on a signal).
The simulator feeds the meter each tick's events under the spec live at that moment, as one router environment that
routes every event would see them, and hands a signal to the relief ``signal_s`` later, on the newest published spec
(``desired``), as the partitioner would find it; the relief's spec then deploys like any other (the loop's
:class:`~partitioner.simulate.loop.Deploys`).

Timings (:class:`FastSettings`) are the model's, stated per run: ``signal_s`` from the meter's check to the relief
published (the router's conditional put, the S3 notification, the partitioner's relief and publish), ``deploy_s``
from a publish to the flip (stream created, new slots started and warm, carried slots loaded), ``drain_s`` from one
flip to the next deployment's start (the old version drains first). ``bench/README.md`` says why 15 + 75 s.

Notes
-----
One meter sees all events here; a deployed router environment sees its shards' share of them, so its counts are
noisier by that share (the meter reads shares, so the loads it estimates are the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geokernel.contracts.surge import SurgeSignal
from geokernel.partition_spec.model import Spec
from geokernel.surge.meter import SurgeMeter, SurgeSettings, interval
from geokernel.surge.view import SurgeView, surge_view
from partitioner.control.relief import Relief, relieve
from partitioner.load.counts import Counts
from partitioner.simulate.windows import SimulationError

SIGNAL_S = 15.0
DEPLOY_S = 75.0
DRAIN_S = 15.0


@dataclass(frozen=True)
class FastSettings:
    """The fast path's meter settings and the model's timings (seconds; see the module docstring)."""

    surge: SurgeSettings = field(default_factory=SurgeSettings)
    signal_s: float = SIGNAL_S
    deploy_s: float = DEPLOY_S
    drain_s: float = DRAIN_S

    def __post_init__(self) -> None:
        for name in ("signal_s", "deploy_s", "drain_s"):
            v = getattr(self, name)
            if not v >= 0:
                raise SimulationError(f"fast path {name} must be >= 0, got {v!r}")

    @property
    def latency_s(self) -> float:
        """From the meter's check to the relief live, without queueing behind another deployment."""
        return self.signal_s + self.deploy_s


@dataclass
class FastPath:
    """One run's meter and the reliefs it led to (the loop calls :meth:`tick`, then :meth:`relieve` on a signal)."""

    settings: FastSettings
    meter: SurgeMeter = field(init=False)
    signals: list[SurgeSignal] = field(default_factory=list)
    reliefs: list[tuple[float, Relief]] = field(default_factory=list)
    _spec: Spec | None = None
    _view_of_spec: SurgeView | None = None

    def __post_init__(self) -> None:
        self.meter = SurgeMeter(self.settings.surge)

    def tick(self, events: Counts, start: float, end: float, live: Spec | None) -> list[SurgeSignal]:
        """Count one tick's events and check them under the spec ``live`` then; the signals it gives."""
        view = self._view(live)
        if view is None or len(events) == 0:
            return []
        grid = events.grid()
        if grid.zoom < view.zoom:
            return []
        shift = grid.zoom - view.zoom
        codes = ((grid.x >> shift) << view.zoom) | (grid.y >> shift)
        self.meter.record(interval(start, end, codes, np.asarray(grid.weight, dtype=np.float64)), view.zoom)
        found = self.meter.check(view)
        self.signals += found
        return found

    def relieve(self, signal: SurgeSignal, desired: Spec, *, fill: float, reach_s: float, now: float,
                taken: tuple[str, ...] = ()) -> Relief:
        """The partitioner's relief of ``signal`` on ``desired`` at ``now`` (what it published, if anything)."""
        relief = relieve(desired, signal, fill=fill, reach_s=reach_s, hold_s=reach_s + signal.window_s, now=now,
                         taken=taken)
        self.reliefs.append((now, relief))
        return relief

    def _view(self, spec: Spec | None) -> SurgeView | None:
        """The meter's view of the live spec (made once per spec)."""
        if spec is not self._spec:
            self._spec, self._view_of_spec = spec, None if spec is None else surge_view(spec)
        return self._view_of_spec
