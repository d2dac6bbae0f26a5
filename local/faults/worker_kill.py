"""``worker-kill``: ``kill -9`` of one live worker process while a swap is in flight.

The kill comes while the deploy status is ``waiting_green`` or ``draining``, after the first deployment finished;
if no swap starts within ``fallback_after_s`` of that, whenever a worker holds a lease. Nothing tells the system:
the fleet supervisor (:meth:`local.fleet.LocalFleet.poll`, ECS's service scheduler in AWS) sees the exit and starts
a replacement, the killed process's leases expire after ``lease_s`` and a live worker takes each of them over from
its checkpoint. The fault is

* *detected* when the supervisor recorded the exit, and
* *recovered* when every lease the killed process held is owned by another live owner or drained, at the time
  the lease item says that happened (its ``claimed_at`` or ``drained_at``, written by the worker that did it; the
  loop's own poll, seconds later on a loaded machine, is not the system's time),

and the first lease must be taken over within :data:`~local.faults.record.TAKEOVER_LEASES` (two) lease durations of
the kill: lease-based stream consumers such as Kinesis's KCL, with leases of about 10 s, reassign a dead worker's
shards within 10-30 s. A carry worker killed mid-swap also held its slot's lease of the next version; its new holder
claims that one only once it opened the slot again (spec, places, stream), so the last lease gets one lease duration
more (:data:`CARRIED_LEASES`): measured on a loaded 2-core machine, the carried lease followed its slot's by up to
4.5 s and the whole takeover took up to 18.1 s with 9 s leases. When the flip came between the kill and the
takeover, the new holder used to drain the old slot before it claimed the carried one (27.6 s in a CI run, the
active version's slot without a reader for the whole drain); it now claims it as the drain begins
(:meth:`geo_service.serving.carry.Carrier.follow_after_flip`). Events lost or doubled are the run's own invariants
(every event out, the lease safety checks of :mod:`local.observe`); the fault table (:meth:`~local.faults.record.FaultRecord.row`) says what the system did.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord
from geokernel.contracts.slot import SlotId
from local.faults.record import IN_SWAP, TAKEOVER_LEASES, FaultRecord, LiveSince

CARRIED_LEASES = 1.0  # lease durations more for the leases a killed carrier held beyond its slot's


@dataclass(frozen=True)
class Lease:
    """One lease item: ``key`` (``v<version>#<slot>``), ``owner`` (``host:pid:random``), expiry, drained, and when
    its current state began (``drained_at`` when drained, else ``claimed_at``; None when the item has none)."""

    key: str
    owner: str | None
    expires_at: float
    drained: bool
    since: float | None = None

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
    """Inject and follow one ``worker-kill`` fault; call :meth:`poll` every fraction of a second.

    ``hold()`` true keeps the kill back (the loop holds it while a lifecycle hook fault is open: a kill inside that
    fault's rollback would make the rolled-back swap's blue version wait for a takeover, and the hook fault's recovery
    would be dated by this fault's; CI saw ``hook-fail`` recover 0.1 s late that way)."""

    def __init__(self, processes: Callable[[], Sequence[Process]], leases: Callable[[], Sequence[Lease]],
                 deploy_status: Callable[[], str], live_since: LiveSince, *, lease_s: float, fallback_after_s: float,
                 kill: Callable[[int], None] = lambda pid: os.kill(pid, signal.SIGKILL),
                 hold: Callable[[], bool] = lambda: False, clock: Callable[[], float] = time.time) -> None:
        self.processes = processes
        self.leases = leases
        self.deploy_status = deploy_status
        self.kill = kill
        self.hold = hold
        self.clock = clock
        self.live_since = live_since
        self.fallback_after_s = fallback_after_s
        self.lease_s = lease_s
        self.record = FaultRecord("worker-kill", deadline_s=TAKEOVER_LEASES * lease_s)
        self._victim: Process | None = None
        self._owner = ""
        self._first_taken = False

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
        live = self.live_since()
        if live is None:
            return  # the first deployment is not a swap: wait until a spec is live
        mid_swap = self.deploy_status() in IN_SWAP
        if not mid_swap and now - live < self.fallback_after_s:
            return
        if self.hold():
            return  # another deploy fault is open: each fault's recovery is judged on its own
        held = [le for le in self.leases() if le.owner and le.expires_at > now and not le.drained]
        for p in self.processes():
            mine = [le for le in held if le.pid() == p.pid]
            if p.exited_at is None and mine:
                self._victim, self._owner = p, str(mine[0].owner)
                self.record.leases = tuple(sorted(le.key for le in mine))
                self.record.target = f"pid {p.pid} (slot {p.worker_id}, started for v{p.version})"
                self.record.mid_swap = mid_swap
                self.record.deadline_s = (TAKEOVER_LEASES + (CARRIED_LEASES if len(mine) > 1 else 0.0)) * self.lease_s
                self.record.outage = _last_of_a_version(mine, [le for le in held if le.pid() != p.pid])
                self.kill(p.pid)
                self.record.injected_at = now
                return

    def _check_takeover(self, now: float) -> None:
        current = {le.key: le for le in self.leases()}
        assert self.record.injected_at is not None
        pending, taken = 0, []
        for key in self.record.leases:
            le = current.get(key)
            if le is None:
                continue  # the version was retired: nothing left to take over
            if not le.drained and (le.owner in (self._owner, None) or le.expires_at <= now):
                pending += 1  # still the dead owner's, free, or held by an owner that did not renew it
                continue
            self.record.took_over_by[key] = "drained" if le.drained else str(le.owner)
            taken.append(le.since if le.since is not None and self.record.injected_at <= le.since <= now else now)
        if taken and not self._first_taken:
            self._first_taken = True
            took = min(taken) - self.record.injected_at
            if took > TAKEOVER_LEASES * self.lease_s and len(self.record.leases) > 1:  # one lease: the deadline
                self.record.problems.append(f"no lease of the killed process was taken over within {TAKEOVER_LEASES:g} "
                                            f"lease durations ({took:.1f} s > {TAKEOVER_LEASES * self.lease_s:g} s)")
        if not pending:
            self.record.recovered_at = max(taken, default=now)


def _last_of_a_version(mine: Sequence[Lease], others: Sequence[Lease]) -> bool:
    """True when no other process holds a live lease of a version one of ``mine`` belongs to: the kill leaves that
    version without a running worker until a takeover (a one-slot version), and if it is the active one, the span
    the router follows it without a worker is this fault's outage, judged against its deadline."""
    return bool(_versions(mine) - _versions(others))


def _versions(leases: Sequence[Lease]) -> set[int]:
    """The versions ``leases`` belong to (by their keys)."""
    return {slot.version for slot in map(SlotId.match, (le.key for le in leases)) if slot}


def leases_from_items(items: Sequence[dict[str, Any]]) -> list[Lease]:
    """Lease records from DynamoDB ``Scan`` items of the leases table (other items, such as a swap's handover
    summary, are skipped)."""
    leases = []
    for item in items:
        key = item.get(LEASE_KEY_ATTR, {}).get("S")
        if key is None or SlotId.match(key) is None:
            continue
        record = LeaseRecord.from_raw(item)  # the contract's decoder, as the workers read their leases
        leases.append(Lease(key=key, owner=record.owner, expires_at=record.expires_at, drained=record.drained,
                            since=record.drained_at if record.drained else record.claimed_at))
    return leases
