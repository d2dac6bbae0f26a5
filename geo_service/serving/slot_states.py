"""A stateful slot's side of the state handoff, between batches and at its flushes (:mod:`geo_service.entity.handoff`).

:class:`SlotStates` writes the states a slot hands over, fetches those its held entities wait for, gives up on those
held too long, restores a slot taken over from its last holder's snapshot and decides which checkpoints a flush may
move: for a stateful slot only together with a snapshot of its states. :class:`geo_service.serving.batches.BatchProcessor`
owns one per process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from geo_service.adapters.aws import Clients
from geo_service.adapters.logs import log
from geo_service.entity.handoff import HandoffStore
from geo_service.serving.slots import Slot

#: Seconds between two fetches of the states a slot's held entities wait for (one BatchGetItem per 100 entities).
FETCH_EVERY_S = 0.25
#: Seconds between two snapshots of a stateful slot's states, which its checkpoints move with (one PutObject each).
STATE_SNAPSHOT_S = 10.0
#: Least seconds between two ``state_calls`` log lines of a process (the local report times the handoff calls by them).
CALLS_LOG_EVERY_S = 1.0


class SlotStates:
    """The state handoff's steps for the slots of one process (module docstring).

    Parameters
    ----------
    clients : Clients
        The process's AWS clients.
    control_table, output_bucket : str
        Where handed-over states (control table) and slot snapshots (output bucket) are kept.
    owner : str
        The process's lease owner id (in its log lines).
    wall, monotonic : callable
        Epoch and monotonic seconds.
    logger : logging.Logger
        The worker's logger.
    """

    def __init__(self, clients: Clients, control_table: str, output_bucket: str, owner: str, *,
                 wall: Callable[[], float], monotonic: Callable[[], float], logger: logging.Logger) -> None:
        self.clients = clients
        self.control_table = control_table
        self.output_bucket = output_bucket
        self.owner = owner
        self.wall = wall
        self.monotonic = monotonic
        self.log = logger
        self._store: HandoffStore | None = None
        self._calls_logged: tuple[float, dict[str, int]] = (0.0, {})  # the last state_calls line: (when, calls)

    @property
    def store(self) -> HandoffStore:
        """The state handoff's AWS side (made on first use: only a stateful slot needs it)."""
        if self._store is None:
            self._store = HandoffStore(self.clients.dynamodb, self.control_table, self.clients.s3,
                                       self.output_bucket, wall=self.wall, clock=self.monotonic)
        return self._store

    def step(self, slot: Slot) -> None:
        """The slot's state handoff between batches: write states handed over, fetch states waited for, and give
        up on those held too long (:mod:`geo_service.entity.handoff`)."""
        gate = slot.gate
        if gate is None:
            return
        gate.recheck()
        now = self.monotonic()
        wants = gate.fetches()
        waited, crossed = len(gate.waits), gate.crossings
        if wants and now >= slot.next_fetch:
            slot.next_fetch = now + FETCH_EVERY_S
            gate.receive(self.store.get(wants))
        late = {e: gate.describe(e) for e, w in gate.wanted.items() if now - w.since > gate.wait_s}
        for e in gate.expire():
            log(self.log, logging.WARNING, "state_not_handed_over", entity_id=e, waited_s=gate.wait_s,
                gate=late.get(e), version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        handed = gate.outbox
        answered: list[float] = []
        if handed:
            self.store.put(handed)
            gate.outbox = []
            written = self.wall()
            answered = [round(max(0.0, written - h.asked_at), 3) for h in handed if h.asked_at]
        if handed or len(gate.waits) > waited:
            # one line per step that moved states: the local report's handoff latency and calls per event;
            # answered_s: per state written for a marker, seconds since the router put that marker (the old
            # slot's part of the new slot's wait)
            log(self.log, logging.INFO, "state_handoff", handed=len(handed),
                waits_s=[round(w, 3) for w in gate.waits[waited:]], answered_s=answered,
                crossings=gate.crossings - crossed,
                calls=dict(self.store.calls),
                version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        self._log_calls(now)
        if slot.output.rows and slot.output.since is None:
            slot.output.since = self.monotonic()

    def _log_calls(self, now: float) -> None:
        """A ``state_calls`` line (the handoff's calls so far, per API) at most every :data:`CALLS_LOG_EVERY_S` while
        they change: the local report splits the calls between steady state and swaps by these times."""
        calls = dict(self.store.calls)
        at, logged = self._calls_logged
        if calls != logged and now - at >= CALLS_LOG_EVERY_S:
            self._calls_logged = (now, calls)
            log(self.log, logging.INFO, "state_calls", calls=calls, owner=self.owner)

    def restore(self, slot: Slot) -> None:
        """A slot taken over starts from the states its last holder wrote with its checkpoints; a slot that has no
        checkpoint yet never had any (they move together), so it reads nothing."""
        lease = slot.leases.lease
        if slot.gate is None or slot.states is None or lease is None or not lease.checkpoint:
            return
        snap = self.store.latest(slot.version, slot.worker_id)
        if snap is not None:
            slot.states.restore(snap, f"s3://{self.output_bucket}/state/v{slot.version}/{slot.worker_id}")

    def save(self, slot: Slot, *, final: bool) -> None:
        """Write the slot's states (after its output, before its checkpoints; ``final`` when it drained)."""
        if slot.gate is not None and slot.states is not None and (final or slot.states.n or slot.states.gone):
            self.store.save(slot.version, slot.worker_id, slot.states.snapshot(), final=final)

    def checkpoints_due(self, slot: Slot, new: Mapping[str, str], final: bool) -> dict[str, str]:
        """The checkpoints a flush moves: all of them for a stateless slot; for a stateful one (a handoff gate) only
        together with a snapshot of its states, at most every :data:`STATE_SNAPSHOT_S` and on its last flush
        (``final``). A successor re-reads from the checkpoint onto the snapshot, whose event numbers make what it
        already includes copies; one snapshot per flush would cost a ``PutObject`` per flush."""
        if slot.gate is None:
            return dict(new)
        slot.pending_checkpoints.update(new)
        now = self.monotonic()
        if not slot.pending_checkpoints or (not final and now - slot.states_saved_at < STATE_SNAPSHOT_S):
            return {}
        self.save(slot, final=False)
        slot.states_saved_at = now
        due, slot.pending_checkpoints = slot.pending_checkpoints, {}
        return due
