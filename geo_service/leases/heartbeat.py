"""One heartbeat thread for every lease a worker holds (its slot, and the slot it carries over to).

Every ``period_s`` it extends each registered :class:`~geo_service.leases.lease.LeaseManager`'s lease. A lease
another owner took over is marked lost (:meth:`Heartbeats.lost`) and dropped; a transient AWS error is
logged and retried at the next beat (the lease expires only if that goes on for a whole lease). After
each beat ``on_beat(holds_any)`` runs (the worker keeps its ECS task's scale-in protection with it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from geo_service.adapters.logs import get_logger, log
from geo_service.adapters.timebase import SYSTEM, Task, Timebase
from geo_service.leases.lease import LeaseLost, LeaseManager


class Heartbeats:
    """Heartbeats the registered leases in a daemon thread; see the module docstring."""

    def __init__(self, period_s: float, on_beat: Callable[[bool], object] = lambda held: None,
                 paused: Callable[[], bool] = lambda: False, timebase: Timebase = SYSTEM) -> None:
        self.period_s = period_s
        self.timebase = timebase
        self.on_beat = on_beat
        self.paused = paused  # True: skip beats (a worker abandoning its leases, as if it died)
        self._lock = threading.Lock()
        self._held: list[LeaseManager] = []
        self._lost: set[int] = set()
        self._stop = timebase.event()
        self._thread: Task | None = None
        self.log = get_logger()

    def start(self) -> Heartbeats:
        self._thread = self.timebase.spawn(self._run, "geo-heartbeat")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def add(self, manager: LeaseManager) -> None:
        with self._lock:
            self._lost.discard(id(manager))
            if manager not in self._held:
                self._held.append(manager)
        self.on_beat(True)

    def remove(self, manager: LeaseManager) -> None:
        with self._lock:
            if manager in self._held:
                self._held.remove(manager)
            held = bool(self._held)
        self.on_beat(held)

    def lost(self, manager: LeaseManager) -> bool:
        with self._lock:
            return id(manager) in self._lost

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            if self.paused():
                continue
            with self._lock:
                held = list(self._held)
            for m in held:
                self._beat(m)
            with self._lock:
                any_held = bool(self._held)
            self.on_beat(any_held)

    def _beat(self, m: LeaseManager) -> None:
        lease = m.lease
        if lease is None:
            return
        try:
            m.heartbeat()
        except LeaseLost as exc:
            log(self.log, logging.WARNING, "heartbeat_lost", error=str(exc), version=lease.version,
                worker_id=lease.worker_id, owner=m.owner)
            with self._lock:
                self._lost.add(id(m))
                if m in self._held:
                    self._held.remove(m)
        except Exception as exc:  # transient AWS errors: keep trying until the lease expires
            log(self.log, logging.WARNING, "heartbeat_failed", error=f"{type(exc).__name__}: {exc}",
                version=lease.version, worker_id=lease.worker_id, owner=m.owner)
