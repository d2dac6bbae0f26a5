"""A worker's status (the ``/health`` body) and the ids it uses: see :mod:`geo_service.worker`."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from enum import StrEnum

from geo_service.errors import GeoServiceError


class WorkerState(StrEnum):
    """``WorkerStatus.state`` (the ``/health`` body's ``state``): see :mod:`geo_service.worker`."""

    STARTING = "starting"
    CLAIMING = "claiming"
    IDLE = "idle"
    WAITING_STREAM = "waiting_stream"
    WARMING = "warming"
    WAITING_PREVIOUS = "waiting_previous"
    READY = "ready"
    DRAINING = "draining"
    DRAINED = "drained"
    RELEASED = "released"
    RETIRED = "retired"
    ABANDONED = "abandoned"
    FAILED = "failed"


FINAL_STATES = frozenset({WorkerState.DRAINED, WorkerState.RELEASED, WorkerState.RETIRED, WorkerState.ABANDONED,
                          WorkerState.FAILED})


@dataclass(frozen=True)
class WorkerStatus:
    """A snapshot of a worker's progress (also the ``/health`` body)."""

    state: str
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


def default_owner() -> str:
    """A unique owner id for this process: ``<host>:<pid>:<random>``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
