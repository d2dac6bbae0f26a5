"""Serving one opened slot: a per-slot runner whose steps are named like the KCL record processor's.

A :class:`SlotRunner` serves one :class:`~geo_service.serving.slots.Slot` (its lease is held and ``ready``) in these steps:

* :meth:`~SlotRunner.initialize`: the slot's shard readers behind one **handover gate**
  (:mod:`geo_service.swap.handover`: a record of the new version is processed once every slot of the version before it
  processed what arrived before that record) and its cost tracker;
* :meth:`~SlotRunner.process_records`: one gated poll; what passed is decoded, located (strays are counted, logged
  and still processed) and transformed into the slot's output buffer (:mod:`geo_service.serving.batches`);
* :meth:`~SlotRunner.checkpoint`: write the buffer when it is due, then move the lease checkpoints (output is
  at-least-once);
* then one of: :meth:`~SlotRunner.shutdown_requested` (the worker stops: write what is buffered and the last cost
  report), :meth:`~SlotRunner.lease_lost` (taken over after expiry: stop touching it),
  :meth:`~SlotRunner.version_dropped` (the version was rolled back before it went live: release) or
  :meth:`~SlotRunner.shard_ended` (drained: once the active pointer moved past the version, no records for
  ``drain_quiet_s`` and ``MillisBehindLatest == 0``; ``drained=true``, release).

:meth:`~SlotRunner.serve` runs them in a loop. While it serves, the slot's next version may be opened ahead in the
same process (a carry-over): the runner asks its :class:`Companion` (:class:`geo_service.serving.carry.Carrier`) to follow
the deploy plan, polls the prepared slot beside its own, and hands it on when its own slot ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from geo_service.adapters.logs import log
from geo_service.leases.lease import LeaseLost
from geo_service.pipeline.consumer import Batch, KinesisRecord
from geo_service.pipeline.cost import CostTracker
from geo_service.runtime.lifecycle import WorkerState
from geo_service.runtime.status import Outcome
from geo_service.serving.context import WorkerContext
from geo_service.serving.slots import Slot, handover_reading, old_places
from geo_service.swap.control import ControlView, read_control
from geo_service.swap.handover import GatedReader, HandoverGate, Place, SlotReader
from geo_service.swap.handover_summary import Aggregator, SummaryStore
from geokernel.contracts.handoff import is_marker
from geokernel.contracts.plan import SwapHead

Classify = Callable[[tuple[KinesisRecord, ...]], list[Place]]


class Companion(Protocol):
    """The slot a runner's process opens ahead, beside the slot it serves (:class:`geo_service.serving.carry.Carrier`)."""

    @property
    def opening(self) -> Slot | None:
        """The slot opened ahead once it has one (it may not be served yet)."""

    @property
    def prepared(self) -> Slot | None:
        """The slot opened ahead if it is ready and its lease still held."""

    def follow(self, slot: Slot, ctl: ControlView) -> None:
        """Open ``slot``'s next version ahead when the plan keeps the slot; drop it when the plan drops it."""

    def follow_after_flip(self, slot: Slot, ctl: ControlView) -> None:
        """Open ``slot``'s next version while the slot drains, if the plan keeps it and nothing opens it yet."""

    def step_ahead(self) -> Batch | None:
        """Poll the prepared slot; None if there is none (or its lease was just lost)."""

    def take(self) -> Slot | None:
        """The prepared slot to serve next (None if there is none); the companion lets go of it."""

    def finish_ahead(self) -> None:
        """On a stop request: write what the prepared slot buffered."""


class SlotRunner:
    """Serves one slot of this process; see the module docstring."""

    def __init__(self, ctx: WorkerContext, slot: Slot) -> None:
        self.ctx = ctx
        self.slot = slot
        self._draining_since: float | None = None
        self._last_record = self._next_check = self._next_publish = 0.0

    # ------------------------------------------------------------------ steps
    def initialize(self) -> SlotReader:
        """The slot's shard readers (one per owned shard) behind one handover gate, and its cost tracker.

        Whether a gate is needed is read strongly consistent (once per slot): a stale view of the swap would open
        the gate of a slot whose previous version is still being read."""
        slot, ctx = self.slot, self.ctx
        if slot.reader is not None:
            return slot.reader
        cfg = ctx.config
        plan = read_control(ctx.clients.dynamodb, cfg.control_table, consistent=True).plan
        if plan is None or plan.to_version != slot.version or plan.from_version is None:
            # not a swap into this version (a first deploy, or a later plan: the one before it finished long ago)
            gate, classify = HandoverGate.opened(), None
        else:
            gate, classify = self._gate(plan)
        slot.reader = SlotReader([GatedReader(c, gate, classify, own=slot.worker_id, wall=ctx.timebase.time)
                                  for c in slot.consumers])
        if slot.tracker is None:
            assert ctx.calibration is not None
            slot.tracker = CostTracker(ctx.calibration, cfg.grid_zoom, cfg.cost_report_interval_s,
                                       clock=ctx.timebase.time)
        return slot.reader

    def _gate(self, plan: SwapHead) -> tuple[HandoverGate, Classify]:
        """The gate of a slot a swap deploys: it reads the old version's handover summary (the new version's first
        slot aggregates it)."""
        slot, ctx, cfg = self.slot, self.ctx, self.ctx.config
        assert plan.from_version is not None
        old_version = plan.from_version
        old_spec = ctx.specs.get(old_version)
        classify = old_places(old_spec, cfg.event_fields)
        store = SummaryStore(ctx.clients.dynamodb, cfg.leases_table, slot.version, old_version,
                             [w.id for w in old_spec.workers])
        if slot.spec.workers[0].id == slot.worker_id:  # the new version's first slot aggregates
            slot.aggregator = Aggregator(store, ctx.owner, cfg.poll_interval_s, ctx.timebase.time,
                                         ctx.timebase.monotonic)

        def own_old() -> tuple[str | None, float]:
            old = ctx.slot  # this process's own slot of the old version, if it carries: fresher than its lease
            if old is not None and old is not slot and old.version == old_version:
                return old.worker_id, old.caught_up_at
            return None, 0.0

        gate = HandoverGate(handover_reading(store, own_old, slot.aggregator), margin_s=cfg.handover_margin_s,
                            refresh_s=cfg.poll_interval_s, timeout_s=cfg.barrier_timeout_s,
                            clock=ctx.timebase.monotonic)
        return gate, classify

    def process_records(self) -> Batch:
        """One gated poll of the slot's shards: transform what passed into the slot's output buffer, then
        :meth:`checkpoint` (the buffer is written when due; then the checkpoints and caught-up times move)."""
        slot, ctx = self.slot, self.ctx
        reader = self.initialize()
        assert slot.tracker is not None
        if slot.aggregator is not None:
            slot.aggregator.step()
        batch = reader.poll()
        if batch.records:
            if not slot.serving:
                slot.serving = True
                slot.leases.mark_serving()
                log(ctx.log, logging.INFO, "serving", version=slot.version, worker_id=slot.worker_id,
                    owner=ctx.owner, carried=slot.carried)
            result = ctx.output.process(batch, slot, slot.tracker)
            ctx.board.count(records_read=result.records, strays=result.strays, batches=1)
            reader.buffered()
        else:
            reader.processed()
        ctx.output.step_handoff(slot)
        self.checkpoint()
        if reader.gate.timed_out and not slot.timeout_logged:
            slot.timeout_logged = True
            log(ctx.log, logging.WARNING, "handover_timeout", waited_s=ctx.config.barrier_timeout_s,
                version=slot.version, worker_id=slot.worker_id, owner=ctx.owner)
        return batch

    def checkpoint(self, force: bool = False) -> None:
        """Write the slot's output buffer when it is due (sooner while a swap's handover waits on this slot), then
        move its checkpoints (:meth:`~geo_service.serving.batches.BatchProcessor.flush`)."""
        slot, ctx = self.slot, self.ctx
        if not (force or slot.output.due(ctx.timebase.monotonic(), flush_s(ctx, slot), ctx.config.output_flush_bytes)):
            return
        written = ctx.output.flush(slot, final=force)
        if slot.reader is not None:
            slot.reader.flushed()
        if written is not None:
            ctx.board.count(events_out=written.rows, quarantined=written.quarantined)

    def report(self, force: bool = False) -> None:
        """Write a cost report when one is due (or ``force``) and the interval had events."""
        assert self.slot.tracker is not None
        if self.ctx.output.report_costs(self.slot.tracker, self.slot, force):
            self.ctx.board.count(cost_reports=1)

    def shutdown_requested(self) -> None:
        """On a stop request: write what is buffered and the last cost report (a failure is logged: the leases
        must still be released, and a successor re-reads from the last checkpoint)."""
        gate = self.slot.gate
        if gate is not None and gate.wanted:  # entities still waiting for their state: a successor re-reads them
            log(self.ctx.log, logging.WARNING, "state_held_at_stop",
                entities={e: gate.describe(e) for e in list(gate.wanted)[:20]}, **self.ctx.ids())
        try:
            self.checkpoint(force=True)
            self.report(force=True)
        except Exception as exc:
            log(self.ctx.log, logging.WARNING, "final_flush_failed", error=f"{type(exc).__name__}: {exc}",
                **self.ctx.ids())

    def lease_lost(self) -> None:
        """The lease was taken over (or expired): stop heartbeating it and forget it, without touching it."""
        log(self.ctx.log, logging.WARNING, "lease_lost", **self.ctx.ids())
        self.ctx.heartbeats.remove(self.slot.leases)
        self.slot.leases.forget()

    def version_dropped(self) -> Outcome:
        """The slot's version will never go live (its plan was rolled back): release the lease."""
        log(self.ctx.log, logging.INFO, "version_dropped", **self.ctx.ids())
        self.ctx.drop(self.slot.leases)
        return Outcome.DROPPED

    def shard_ended(self) -> Outcome:
        """The slot drained: write the rest and the last cost report, mark the lease drained and release it."""
        slot, ctx = self.slot, self.ctx
        self.checkpoint(force=True)
        ctx.output.save_states(slot, final=True)  # answers the markers that come after it stopped reading
        self.report(force=True)
        slot.leases.mark_drained()
        ctx.heartbeats.remove(slot.leases)
        slot.leases.release()
        log(ctx.log, logging.INFO, "drained", **ctx.ids())
        return Outcome.DRAINED

    # ------------------------------------------------------------------ the loop
    def serve(self, companion: Companion) -> tuple[Outcome, Slot | None]:
        """Serve the slot until it drains, is lost or dropped, or the worker stops; return how it ended and the
        slot to serve next (the one carried over from it, if any)."""
        slot, ctx = self.slot, self.ctx
        ctx.slot, ctx.leases = slot, slot.leases
        ctx.set(state=WorkerState.READY, ready=True, draining=False, version=slot.version, worker_id=slot.worker_id,
                partition_ids=tuple(sorted(slot.partition_ids)), places_loaded=slot.places_loaded,
                places_gained=slot.places_gained, slots_served=ctx.status().slots_served + 1, next_version=None)
        try:
            if ctx.control().dropped(slot.version):
                return self.version_dropped(), None
            self.initialize()
            return self._consume(companion)
        except LeaseLost:
            self.lease_lost()
            return Outcome.LOST, companion.take()

    def _consume(self, companion: Companion) -> tuple[Outcome, Slot | None]:
        slot, ctx = self.slot, self.ctx
        clock = ctx.timebase.monotonic
        self._last_record = clock()
        while True:
            if ctx.stop.is_set():
                if not ctx.abandon:
                    self.shutdown_requested()
                    companion.finish_ahead()
                return Outcome.STOPPED, None
            ctx.check_lease(slot.leases)
            batch = self.process_records()
            if has_events(batch):
                self._last_record = clock()
            if self._draining_since is None:
                self._note_waiting()
            self.report()
            ctx.metrics.tick()
            now = clock()
            if self._draining_since is None and now >= self._next_check:
                self._next_check = now + ctx.config.active_poll_s
                if self._watch_control(now, companion):
                    return self.version_dropped(), None
            if slot.publishing and now >= self._next_publish:
                self._next_publish = now + ctx.config.poll_interval_s
                slot.leases.publish_caught_up(slot.caught_up_at)
            ahead = companion.step_ahead()  # the prepared carried slot: nothing reaches its shard before the flip
            if self._draining_since is not None and self._drained(batch, now):
                return self.shard_ended(), companion.take()
            if not batch.records and not (ahead is not None and ahead.records):
                ctx.stop.wait(self._idle_wait(batch, companion))

    def _watch_control(self, now: float, companion: Companion) -> bool:
        """Act on the control view: publish while a swap from this version runs, drain once the active pointer
        moved past it, follow the plan with the carry-over. True when the version was dropped."""
        slot, ctx = self.slot, self.ctx
        ctl = ctx.control()
        plan = ctl.plan
        slot.publishing = slot.publishing or (plan is not None and plan.started and plan.from_version == slot.version)
        if ctl.active is not None and ctl.active > slot.version:
            self._draining_since, slot.publishing = now, True
            ctx.set(state=WorkerState.DRAINING, draining=True)
            log(ctx.log, logging.INFO, "draining", active_version=ctl.active, **ctx.ids())
            companion.follow_after_flip(slot, ctl)  # this process took the slot over after its carrier died
        elif ctl.dropped(slot.version):
            return True
        else:
            companion.follow(slot, ctl)
        return False

    def _drained(self, batch: Batch, now: float) -> bool:
        assert self._draining_since is not None
        gate = self.slot.gate
        if gate is not None and gate.holding:
            return False  # held entities wait for their state: their events are still to be processed here
        if batch.at_end:
            return True
        quiet_since = max(self._draining_since, self._last_record)
        return (not has_events(batch) and batch.millis_behind_latest == 0
                and now - quiet_since >= self.ctx.config.drain_quiet_s)

    def _note_waiting(self) -> None:
        """``waiting_previous`` while the gate holds the slot's first records, ``ready`` otherwise."""
        reader = self.slot.reader
        state = WorkerState.WAITING_PREVIOUS if reader is not None and reader.holding and not self.slot.serving \
            else WorkerState.READY
        if self.ctx.status().state != state:
            self.ctx.set(state=state)

    def _idle_wait(self, batch: Batch, companion: Companion) -> float:
        """How long to pause after a step that read nothing: the poll interval (half of it while a gate holds
        records), but no longer than until the call spacing lets a shard be read again when that is what stopped
        the read, until an output buffer is due, or until the next fetch of states that held entities wait for."""
        cfg = self.ctx.config
        wait = cfg.poll_interval_s / 2 if self._holding(companion) else cfg.poll_interval_s
        prepared = companion.prepared
        now = self.ctx.timebase.monotonic()
        for s in [self.slot] if prepared is None else [self.slot, prepared]:
            wait = min(wait, s.output.due_in(now, flush_s(self.ctx, s)))
            if s.reader is not None and batch.spaced:
                wait = min(wait, s.reader.ready_in())
            if s.gate is not None and s.gate.wanted:
                # entities held for a state from another slot: fetch it every slot_states.FETCH_EVERY_S, not every poll
                wait = min(wait, s.next_fetch - now)
        return max(wait, 0.001)

    def _holding(self, companion: Companion) -> bool:
        """True while a gate holds records of this slot or of the carried one (they pass within a publish period)."""
        opening = companion.opening
        slots = [self.slot] if opening is None else [self.slot, opening]
        return any(s.reader is not None and s.reader.holding > 0 for s in slots)


def has_events(batch: Batch) -> bool:
    """True if the batch read an event: handoff markers (:mod:`geo_service.entity.handoff`) keep coming to an old version's
    shards after the flip, as entities first show up in the new one; they do not keep it from draining (once it
    drained, its final states answer them)."""
    return any(not is_marker(r.data) for r in batch.records)


def flush_s(ctx: WorkerContext, slot: Slot) -> float:
    """How old a slot's buffered output may get: ``output_flush_s``, or the poll interval while it publishes."""
    cfg = ctx.config
    return min(cfg.output_flush_s, cfg.poll_interval_s) if slot.publishing else cfg.output_flush_s
