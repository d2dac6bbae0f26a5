"""A worker's status (the ``/health`` body), the board that holds it, and the ids it uses.

The status is an immutable snapshot; :class:`StatusBoard` replaces it under a lock and checks every change of
``state`` against the worker's transition table (:data:`~geo_service.runtime.lifecycle.WORKER_TRANSITIONS`).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from geo_service.errors import GeoServiceError
from geo_service.runtime.lifecycle import FINAL_STATES, WORKER_TRANSITIONS, WorkerState, check_transition


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A snapshot of a worker's progress (also the ``/health`` body)."""

    state: WorkerState
    version: int | None
    owner: str
    worker_id: str | None = None
    partition_ids: tuple[str, ...] = ()
    ready: bool = False
    draining: bool = False
    records_read: int = 0
    events_out: int = 0
    strays: int = 0
    quarantined: int = 0
    batches: int = 0
    cost_reports: int = 0
    places_loaded: int = 0
    places_gained: int = 0
    leases_claimed: int = 0
    slots_served: int = 0
    carried: int = 0
    next_version: int | None = None
    last_error: str | None = None
    exit_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


class WorkerExited(GeoServiceError, RuntimeError):
    """The worker finished before the awaited condition held (carries its final status)."""

    def __init__(self, status: WorkerStatus) -> None:
        super().__init__(f"worker finished in state {status.state!r} (exit {status.exit_code!r}, "
                         f"last error {status.last_error!r})")
        self.status = status


class Outcome(StrEnum):
    """How a worker left a slot (logged and reported)."""

    DRAINED = "drained"
    STOPPED = "stopped"
    LOST = "lost"
    DROPPED = "dropped"  # the slot's version was rolled back before it went live


class StatusBoard:
    """The worker's current :class:`WorkerStatus`, replaced under a lock (the ``/health`` thread reads it).

    Raises
    ------
    IllegalTransition
        From :meth:`set` when ``state`` changes in a way :data:`~geo_service.runtime.lifecycle.WORKER_TRANSITIONS` does
        not allow.
    """

    def __init__(self, status: WorkerStatus) -> None:
        self._lock = threading.Lock()
        self._status = status

    def get(self) -> WorkerStatus:
        """The current snapshot."""
        with self._lock:
            return self._status

    def set(self, **changes: Any) -> None:
        """Replace fields; a new ``state`` must be a legal transition from the current one."""
        with self._lock:
            if "state" in changes:
                changes["state"] = check_transition(WORKER_TRANSITIONS, self._status.state,
                                                    WorkerState(changes["state"]))
            self._status = dataclasses.replace(self._status, **changes)

    def count(self, **increments: int) -> None:
        """Add to counters (``records_read``, ``events_out``, ...) in one replacement."""
        with self._lock:
            st = self._status
            self._status = dataclasses.replace(st, **{k: getattr(st, k) + n for k, n in increments.items()})


def default_owner() -> str:
    """A unique owner id for this process: ``<host>:<pid>:<random>``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
