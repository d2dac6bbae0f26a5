"""``worker-kill``: ``kill -9`` of one live worker process while a swap is in flight.

The kill comes while the deploy status is ``waiting_green`` or ``draining``, after the first deployment finished;
if no swap starts within ``fallback_after_s`` of that, whenever a worker holds a lease. Nothing tells the system:
the fleet supervisor (:meth:`local.fleet.LocalFleet.poll`, ECS's service scheduler in AWS) sees the exit and starts
a replacement, the killed process's leases expire after ``lease_s`` and a live worker takes each of them over from
its checkpoint. The fault is

* *detected* when the supervisor recorded the exit, and
* *recovered* when every lease the killed process held is owned by another live owner or drained,

and the takeover must finish within :data:`~local.faults.record.TAKEOVER_LEASES` (two) lease durations of the kill:
lease-based stream consumers such as Kinesis's KCL, with leases of about 10 s, reassign a dead worker's shards
within 10-30 s. Events lost or doubled are the run's own invariants (every event out, the lease safety checks of
:mod:`local.observe`); the fault table (:meth:`~local.faults.record.FaultRecord.row`) says what the system did.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from local.faults.record import IN_SWAP, TAKEOVER_LEASES, FaultRecord
from partitioner.contracts.lease import LEASE_KEY_ATTR, LeaseRecord, parse_lease_key


@dataclass(frozen=True)
class Lease:
    """One lease item: ``key`` (``v<version>#<slot>``), ``owner`` (``host:pid:random``), expiry, drained."""

    key: str
    owner: str | None
    expires_at: float
    drained: bool

    def pid(self) -> int | None:
        parts = (self.owner or "").split(":")
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


class Process(Protocol):
    """What the injector needs of a worker process (:class:`local.fleet.WorkerProcess`)."""

    @property
    def pid(self) -> int: ...

    exited_at: float | None
    worker_id: str
    version: int


class WorkerKill:
    """Inject and follow one ``worker-kill`` fault; call :meth:`poll` every fraction of a second."""

    def __init__(self, processes: Callable[[], Sequence[Process]], leases: Callable[[], Sequence[Lease]],
                 deploy_status: Callable[[], str], *, lease_s: float, fallback_after_s: float,
                 kill: Callable[[int], None] = lambda pid: os.kill(pid, signal.SIGKILL),
                 clock: Callable[[], float] = time.time) -> None:
        self.processes = processes
        self.leases = leases
        self.deploy_status = deploy_status
        self.kill = kill
        self.clock = clock
        self.live_since: float | None = None  # when the first deployment finished
        self.fallback_after_s = fallback_after_s
        self.record = FaultRecord("worker-kill", deadline_s=TAKEOVER_LEASES * lease_s)
        self._victim: Process | None = None
        self._owner = ""

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            self._maybe_inject(now)
        elif self.record.detected_at is None:
            if self._victim is not None and self._victim.exited_at is not None:
                self.record.detected_at = self._victim.exited_at
        elif self.record.recovered_at is None:
            self._check_takeover(now)

    def _maybe_inject(self, now: float) -> None:
        status = self.deploy_status()
        if self.live_since is None:
            if status != "done":
                return  # the first deployment is not a swap: wait until a spec is live
            self.live_since = now
        mid_swap = status in IN_SWAP
        if not mid_swap and now - self.live_since < self.fallback_after_s:
            return
        held = [le for le in self.leases() if le.owner and le.expires_at > now and not le.drained]
        for p in self.processes():
            mine = [le for le in held if le.pid() == p.pid]
            if p.exited_at is None and mine:
                self._victim, self._owner = p, str(mine[0].owner)
                self.record.leases = tuple(sorted(le.key for le in mine))
                self.record.target = f"pid {p.pid} (slot {p.worker_id}, started for v{p.version})"
                self.record.mid_swap = mid_swap
                self.kill(p.pid)
                self.record.injected_at = now
                return

    def _check_takeover(self, now: float) -> None:
        current = {le.key: le for le in self.leases()}
        for key in self.record.leases:
            le = current.get(key)
            if le is None:
                continue  # the version was retired: nothing left to take over
            if le.owner == self._owner and not le.drained:
                return
            if le.owner is None and not le.drained:
                return
            if le.owner != self._owner and not le.drained and le.expires_at <= now:
                return
            self.record.took_over_by[key] = "drained" if le.drained else str(le.owner)
        self.record.recovered_at = now


def leases_from_items(items: Sequence[dict[str, Any]]) -> list[Lease]:
    """Lease records from DynamoDB ``Scan`` items of the leases table (other items, such as a swap's handover
    summary, are skipped)."""
    leases = []
    for item in items:
        key = item.get(LEASE_KEY_ATTR, {}).get("S")
        if key is None or parse_lease_key(key) is None:
            continue
        record = LeaseRecord.from_raw(item)  # the contract's decoder, as the workers read their leases
        leases.append(Lease(key=key, owner=record.owner, expires_at=record.expires_at, drained=record.drained))
    return leases
