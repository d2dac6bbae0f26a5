"""The router's half of the fast path: count what it routes per grid cell, and signal a worker heading past its cap.

Each execution environment keeps one :class:`SurgeWatch` (the handler's runtime): every invocation hands it the points
it routed by the active spec, grouped into the meter's intervals by the wall clock
(:class:`geokernel.surge.buckets.Buckets`); at each interval's close the meter
(:class:`geokernel.surge.meter.SurgeMeter`, the code the simulator runs) judges it under the active spec. A signal is
put to the specs bucket once per key with ``If-None-Match: *`` (:class:`lambdas.runtime.s3.SurgeStore`): every
environment that sees the same surge tries, the first one's object is the signal, and the partitioner's S3
notification takes it from there (``lambdas.partitioner.surge``).

Cost: one tile computation per routed point (NumPy, the router already locates each point) and, per interval, a
search of the interval's busy cells; an AWS call only when a worker signals (at most one put per version, worker and
environment). Counts live in the environment: an environment that is recycled starts over (the meter waits for
``min_baseline`` intervals before it judges), and one that routes few batches sees a thin share of the events (the
meter reads shares, so only its noise grows).

Notes
-----
A batch routed as a backlog (paced: :mod:`lambdas.runtime.pacing`) is not counted: its events were sent long before
and would read as a surge of the interval they are routed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from geokernel.contracts.surge import SurgeSignal
from geokernel.geo.tiles import tiles_xy
from geokernel.surge.buckets import Buckets
from geokernel.surge.meter import SurgeMeter, SurgeSettings
from geokernel.surge.view import SurgeView, surge_view
from lambdas.router.routing import RoutingTable

Clock = Callable[[], float]


class SurgeWatch:
    """One execution environment's surge meter (see the module docstring)."""

    def __init__(self, settings: SurgeSettings, clock: Clock = time.time) -> None:
        self.settings = settings
        self.meter = SurgeMeter(settings)
        self._clock = clock
        self._buckets: Buckets | None = None
        self._view: SurgeView | None = None
        self._version: int | None = None

    def observe(self, table: RoutingTable, lon: npt.NDArray[np.float64], lat: npt.NDArray[np.float64]
                ) -> list[SurgeSignal]:
        """Count the points routed by ``table`` now; the signals of the intervals this closes."""
        view = self._view_of(table)
        if view is None:
            return []
        bucket_s = self.settings.bucket_s(view.window_s)
        if self._buckets is None or self._buckets.bucket_s != bucket_s:
            self._buckets = Buckets(bucket_s, int(self.settings.baseline_buckets + self.settings.recent_buckets))
        x, y = tiles_xy(lon, lat, view.zoom)
        signals: list[SurgeSignal] = []
        for closed in self._buckets.add((x << view.zoom) | y, self._clock()):
            self.meter.record(closed, view.zoom)
            signals += self.meter.check(view)
        return signals

    def _view_of(self, table: RoutingTable) -> SurgeView | None:
        """The meter's view of the table's spec (made once per version)."""
        if table.version != self._version:
            self._version, self._view = table.version, surge_view(table.spec, table.index)
        return self._view
