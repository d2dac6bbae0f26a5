"""Measured CPU cost per quadkey, normalised by a start-up calibration.

Summing ``time.process_time()`` per partition and dividing by wall time times CPU count (the
obvious measure) mixes in every thread of the process (heartbeats, HTTP, boto3) and gives a
utilisation fraction that depends on the hardware. Here:

* each read batch's **whole path** is timed with :func:`time.thread_time` (CPU time of the calling thread only:
  the GetRecords call and its parse, decode, locate, transform, rows) and attributed to its events' quadkeys at
  ``grid_zoom`` (:mod:`geo_service.serving.rows`: a per-event transform call to its event's cell, the rest of the
  batch split over its events); before issue #60 only the transform call was timed;
* at start-up :func:`calibrate` times a fixed reference workload (the median of a few
  runs), giving ``seconds_per_unit`` on this machine;
* a report gives, per quadkey, the **cost per event in calibration units**
  (``cpu_seconds / events / seconds_per_unit``), which is comparable across hardware and
  across workers, plus the event counts it was measured on.

Reports go to ``costs/v<version>/<worker_id>/<epoch_s>.json`` as :class:`geokernel.contracts.cost.CostReportRecord`
(``docs/CONTRACTS.md``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from geo_service.errors import GeoServiceError
from geokernel.contracts.cost import CostReportRecord

Timer = Callable[[], float]
T = TypeVar("T")

REFERENCE_POINTS = 2000


class CostError(GeoServiceError, ValueError):
    """A calibration or cost measurement is unusable (names the value)."""


def reference_workload(points: int = REFERENCE_POINTS) -> float:
    """The fixed calibration workload: great-circle distances over a deterministic point set.

    Pure Python float math plus a sort, the same kind of work a per-event transform does.
    Returns a checksum so the work cannot be optimised away.
    """
    state = 12345
    total = 0.0
    dists: list[float] = []
    lat0, lon0 = math.radians(48.8566), math.radians(2.3522)
    for _ in range(points):
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        lat = math.radians((state % 170000) / 1000.0 - 85.0)
        state = (1103515245 * state + 12345) & 0x7FFFFFFF
        lon = math.radians((state % 360000) / 1000.0 - 180.0)
        a = math.sin((lat - lat0) / 2) ** 2 + math.cos(lat0) * math.cos(lat) * math.sin((lon - lon0) / 2) ** 2
        d = 2.0 * 6371.0088 * math.asin(min(1.0, math.sqrt(a)))
        dists.append(d)
        total += d
    dists.sort()
    return total + dists[len(dists) // 2]


@dataclass(frozen=True)
class Calibration:
    """CPU seconds one reference workload takes on this machine (``seconds_per_unit``)."""

    seconds_per_unit: float
    samples: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds_per_unit) and self.seconds_per_unit > 0):
            raise CostError(f"calibration seconds_per_unit must be a positive number, got {self.seconds_per_unit!r}")

    def units(self, cpu_seconds: float) -> float:
        """Convert CPU seconds on this machine to calibration units."""
        return cpu_seconds / self.seconds_per_unit


def calibrate(repeats: int = 5, workload: Callable[[], object] = reference_workload,
              timer: Timer = time.thread_time) -> Calibration:
    """Time ``workload`` ``repeats`` times with ``timer`` (thread CPU time) and keep the median."""
    if repeats < 1:
        raise CostError(f"calibration repeats must be >= 1, got {repeats!r}")
    workload()  # warm-up: imports, caches
    samples = []
    for _ in range(repeats):
        t0 = timer()
        workload()
        samples.append(timer() - t0)
    median = statistics.median(samples)
    if median <= 0:
        raise CostError(f"calibration timer measured no CPU time (samples {samples!r}); timer {timer!r} too coarse")
    return Calibration(seconds_per_unit=median, samples=tuple(samples))


@dataclass(frozen=True)
class CostReport:
    """One interval's measurements."""

    started_at: float
    ended_at: float
    grid_zoom: int
    calibration: Calibration
    cpu_seconds: Mapping[str, float] = field(default_factory=dict)
    events: Mapping[str, int] = field(default_factory=dict)

    @property
    def interval_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def rates(self) -> dict[str, float]:
        """Cost per event in calibration units, per quadkey."""
        return {q: self.calibration.units(self.cpu_seconds[q]) / n for q, n in self.events.items() if n > 0}

    def to_record(self, version: int, worker_id: str, partition_ids: Sequence[str]) -> CostReportRecord:
        """The stored report of this interval for slot ``worker_id`` of ``version`` (the contract record)."""
        return CostReportRecord(version=version, worker=worker_id, partition_ids=tuple(partition_ids),
                                interval_s=round(self.interval_s, 3), calibration=self.calibration.seconds_per_unit,
                                quadkey_zoom=self.grid_zoom, rates=self.rates, events=dict(self.events),
                                reported_at=round(self.ended_at, 3))

    def to_dict(self, version: int, worker_id: str, partition_ids: Sequence[str]) -> dict[str, Any]:
        """The JSON body of :func:`~geokernel.contracts.cost.cost_key`: :meth:`to_record` as stored."""
        return self.to_record(version, worker_id, partition_ids).to_dict()


class CostTracker:
    """Accumulates CPU time and events per quadkey between reports.

    Parameters
    ----------
    calibration : Calibration
    grid_zoom : int
        Zoom of the quadkeys the caller attributes work to (reported as ``quadkey_zoom``).
    interval_s : float
        Report period; :meth:`due` says when one is due.
    clock : callable
        Wall clock, epoch seconds (injectable for tests).
    cpu_timer : callable
        CPU timer of the calling thread (``time.thread_time``; injectable for tests).
    """

    def __init__(self, calibration: Calibration, grid_zoom: int, interval_s: float,
                 clock: Timer = time.time, cpu_timer: Timer = time.thread_time) -> None:
        if not (math.isfinite(interval_s) and interval_s > 0):
            raise CostError(f"cost report interval must be positive, got {interval_s!r}")
        self.calibration = calibration
        self.grid_zoom = grid_zoom
        self.interval_s = interval_s
        self.clock = clock
        self.cpu_timer = cpu_timer
        self._started = clock()
        self._cpu: dict[str, float] = defaultdict(float)
        self._events: dict[str, int] = defaultdict(int)

    def measure(self, quadkey: str, fn: Callable[[], T]) -> T:
        """Run ``fn()`` and charge its thread CPU time and one event to ``quadkey`` (also when it raises)."""
        t0 = self.cpu_timer()
        try:
            return fn()
        finally:
            self.record(quadkey, self.cpu_timer() - t0)

    def record(self, quadkey: str, cpu_seconds: float, events: int = 1) -> None:
        """Charge ``cpu_seconds`` and ``events`` to ``quadkey``."""
        if cpu_seconds < 0 or events < 0:
            raise CostError(f"negative cost for quadkey {quadkey!r}: cpu_seconds={cpu_seconds!r} events={events!r}")
        self._cpu[quadkey] += cpu_seconds
        self._events[quadkey] += events

    @property
    def pending_events(self) -> int:
        return sum(self._events.values())

    def due(self) -> bool:
        """True when a full interval has passed since the last report."""
        return self.clock() - self._started >= self.interval_s

    def take(self) -> CostReport:
        """Return the interval's report and start a new interval."""
        now = self.clock()
        report = CostReport(started_at=self._started, ended_at=now, grid_zoom=self.grid_zoom,
                            calibration=self.calibration, cpu_seconds=dict(self._cpu), events=dict(self._events))
        self._started = now
        self._cpu = defaultdict(float)
        self._events = defaultdict(int)
        return report



