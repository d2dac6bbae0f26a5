"""Carry-over: the process serving ``v<n>#w`` opens ``v<n+1>#w`` ahead while it keeps serving.

When the deploy plan keeps slot ``w`` (control ``pk="swap"``: a started ``carry`` swap from ``n``, and ``w`` still
in the new version's spec), the worker's :class:`Carrier` starts a :class:`CarryOver`. Its thread claims
``v<n+1>#w`` and opens it like any slot (:func:`~geo_service.serving.opening.open_slot`: the lease is heartbeated with the
current one from then on; it waits for the new version's geo stream, builds the transform for the slot's new region
from the current one, loading only the cells and buffer tiles the slot gains; then the new lease is marked ready).
The current slot goes on reading its shard all the while; after the flip the worker polls the prepared slot beside
it (behind the handover gate, :mod:`geo_service.swap.handover`) until the old one drained, then serves it alone.
A stateful transform's entity states (:mod:`geo_service.entity.store`) are shared by the two slots: the gate holds an
entity's records of the new version until the old version's records of its place are processed, so an entity that
stays in the slot sees its state in order; an entity that comes from another slot starts without state.
:meth:`CarryOver.cancel` drops it (the plan was rolled back, or the worker stops). A process that took ``v<n>#w``
over after its carrier died mid-swap finds the flip done already: it opens ``v<n+1>#w`` while it drains
``v<n>#w`` (:meth:`Carrier.follow_after_flip`), and at the drain's end waits for that opening rather than drop it.
"""

from __future__ import annotations

import logging

from geo_service.adapters.logs import log
from geo_service.adapters.timebase import Task
from geo_service.leases.lease import LeaseLost, LeaseManager
from geo_service.pipeline.consumer import Batch
from geo_service.runtime.lifecycle import OPENING_TRANSITIONS, OpeningState, check_transition
from geo_service.serving.context import WorkerContext
from geo_service.serving.opening import OpenWatch, open_slot
from geo_service.serving.runner import SlotRunner
from geo_service.serving.slots import Slot
from geo_service.swap.control import ControlView
from geokernel.contracts.plan import SwapMode
from geokernel.partition_spec.model import Spec


class CarryOver:
    """Opens the carried slot ``v<to_version>#<current.worker_id>`` in a background thread; see the module
    docstring. Its :attr:`state` follows :data:`~geo_service.runtime.lifecycle.OPENING_TRANSITIONS`."""

    def __init__(self, ctx: WorkerContext, current: Slot, to_version: int, *, manager: LeaseManager) -> None:
        self.ctx = ctx
        self.current = current
        self.to_version = to_version
        self.worker_id = current.worker_id
        self.manager = manager
        self.retry_s = ctx.config.heartbeat_s
        self._state = OpeningState.CLAIMING
        self.error: str | None = None
        self.slot: Slot | None = None
        self.started_at = ctx.timebase.time()
        self.ready_at: float | None = None
        self._warm_from = 0.0
        self._cancel = ctx.timebase.event()
        self._thread: Task | None = None
        self.log = ctx.log

    @property
    def state(self) -> OpeningState:
        return self._state

    @state.setter
    def state(self, new: OpeningState) -> None:
        self._state = check_transition(OPENING_TRANSITIONS, self._state, new)

    def start(self) -> CarryOver:
        self._thread = self.ctx.timebase.spawn(self._run, f"carry-v{self.to_version}")
        return self

    @property
    def ready(self) -> bool:
        return self.state == OpeningState.READY and self.slot is not None and not self.ctx.heartbeats.lost(self.manager)

    def cancel(self, release: bool = True) -> None:
        """Stop preparing; release the new lease unless told not to (a worker abandoning its leases)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.ctx.heartbeats.remove(self.manager)
        if release and self.manager.lease is not None:
            try:
                self.manager.release()
            except Exception as exc:  # the lease then expires on its own
                log(self.log, logging.WARNING, "carry_release_failed", error=f"{type(exc).__name__}: {exc}",
                    version=self.to_version, worker_id=self.worker_id)
        else:
            self.manager.forget()
        if self.state != OpeningState.READY:
            self.state = OpeningState.CANCELLED

    def _advance(self, state: OpeningState) -> None:
        """A state change of the opening thread; none after a cancellation (the carry-over is gone by then)."""
        if self.state != OpeningState.CANCELLED:
            self.state = state

    def _run(self) -> None:
        try:
            self._prepare()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self._advance(OpeningState.FAILED)
            log(self.log, logging.ERROR, "carry_failed", error=self.error, version=self.to_version,
                worker_id=self.worker_id, owner=self.manager.owner)

    def _prepare(self) -> None:
        while self.manager.claim(self.worker_id) is None:
            if self._cancel.wait(self.retry_s):
                return
        log(self.log, logging.INFO, "carry_claimed", version=self.to_version, worker_id=self.worker_id,
            owner=self.manager.owner, from_version=self.current.version)
        watch = OpenWatch(stop=self._cancel, retry_s=self.retry_s, on_state=self._opening,
                          go_on=lambda: not self._cancel.is_set() and self.manager.lease is not None)
        slot = open_slot(self.ctx, self.manager, watch, base=self.current.transform, carried=True)
        if slot is None:
            return
        if slot.states is not None and self.current.states is not None:
            slot.share_states(self.current.states)  # one store: the gates keep each entity's order across them
        self.slot = slot
        self.ready_at = self.ctx.timebase.time()
        self._advance(OpeningState.READY)
        log(self.log, logging.INFO, "carry_ready", version=self.to_version, worker_id=self.worker_id,
            owner=self.manager.owner, region_size=len(slot.region), places_gained=slot.places_gained,
            places_loaded=slot.places_loaded, warm_s=round(self.ctx.timebase.monotonic() - self._warm_from, 3),
            prepare_s=round(self.ready_at - self.started_at, 3))

    def _opening(self, state: OpeningState, spec: Spec) -> None:
        if state == OpeningState.WARMING:
            self._warm_from = self.ctx.timebase.monotonic()
        self._advance(state)


class Carrier:
    """The carry-over of the slot a worker serves: at most one :class:`CarryOver` at a time, started and dropped
    as the deploy plan says; the :class:`~geo_service.serving.runner.Companion` of the slot's runner."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.carry: CarryOver | None = None

    @property
    def opening(self) -> Slot | None:
        return self.carry.slot if self.carry is not None else None

    @property
    def prepared(self) -> Slot | None:
        carry = self.carry
        return carry.slot if carry is not None and carry.ready and carry.slot is not None else None

    def follow(self, slot: Slot, ctl: ControlView) -> None:
        """Start opening the slot's next version when the plan keeps it; drop an opening the plan dropped."""
        ctx, plan = self.ctx, ctl.plan
        keep = (ctx.config.swap_mode is SwapMode.CARRY and plan is not None and plan.started
                and plan.from_version == slot.version
                and plan.keeps(slot.version, slot.worker_id, ctx.ids_of(plan.to_version)))
        carry = self.carry
        if carry is not None and (not keep or plan is None or carry.to_version != plan.to_version):
            log(ctx.log, logging.INFO, "carry_dropped", next_version=carry.to_version, **ctx.ids())
            carry.cancel()
            self.carry = None
            ctx.set(next_version=None)
        if keep and self.carry is None and plan is not None:
            self.carry = CarryOver(ctx, slot, plan.to_version, manager=ctx.manager(plan.to_version)).start()
            ctx.set(next_version=plan.to_version)
            log(ctx.log, logging.INFO, "carry_started", next_version=plan.to_version, **ctx.ids())

    def follow_after_flip(self, slot: Slot, ctl: ControlView) -> None:
        """Once the active pointer moved past ``slot``'s version: start carrying the slot over if the plan keeps it
        and no carry-over runs yet. That is a process that took the old slot over after its carrier died mid-swap
        (rule 1 of :mod:`geo_service.serving.slots`: nobody else claims the kept slot before the old one drained); it opens
        the new slot while it drains the old one instead of after. It never drops a carry-over (a later plan may
        have started by now: a prepared slot is still taken when the old one drained)."""
        if self.carry is None:
            self.follow(slot, ctl)

    def step_ahead(self) -> Batch | None:
        """Poll the prepared slot beside the served one (same process) until the served one drained."""
        carry, nxt = self.carry, self.prepared
        if carry is None or nxt is None:
            return None
        runner = SlotRunner(self.ctx, nxt)
        try:
            batch = runner.process_records()
            runner.report()
            return batch
        except LeaseLost:
            log(self.ctx.log, logging.WARNING, "carry_lease_lost", next_version=carry.to_version, **self.ctx.ids())
            carry.cancel(release=False)
            self.carry = None
            self.ctx.set(next_version=None)
            return None

    def take(self) -> Slot | None:
        """The prepared next slot, if it is ready and still ours; else drop the preparation."""
        carry, self.carry = self.carry, None
        if carry is None:
            return None
        self._await_opening(carry)
        if carry.ready and carry.slot is not None and carry.manager.valid():
            return carry.slot
        log(self.ctx.log, logging.WARNING, "carry_not_ready", next_version=carry.to_version, state=carry.state,
            error=carry.error, **self.ctx.ids())
        carry.cancel()
        return None

    def _await_opening(self, carry: CarryOver) -> None:
        """Wait while ``carry`` holds its lease and is still opening, up to two lease durations: a carry-over
        started at the flip (:meth:`follow_after_flip`) may still be loading its region when the old slot drained,
        and dropping it would leave the slot to a later search."""
        ctx = self.ctx
        deadline = ctx.timebase.monotonic() + 2 * ctx.config.lease_s
        while (carry.state in (OpeningState.WAITING_STREAM, OpeningState.WARMING) and carry.manager.lease is not None
               and ctx.timebase.monotonic() < deadline):
            if ctx.stop.wait(ctx.config.poll_interval_s / 2):
                return

    def finish_ahead(self) -> None:
        """On a stop request: write what the slot opened ahead buffered, and its last cost report."""
        slot = self.opening
        if slot is not None and slot.tracker is not None:
            SlotRunner(self.ctx, slot).shutdown_requested()

    def cancel(self, release: bool) -> LeaseManager | None:
        """On stop or failure: stop the opening (releasing its lease unless ``release`` is false); return its lease
        manager (None without a carry-over)."""
        carry, self.carry = self.carry, None
        if carry is None:
            return None
        carry.cancel(release=release)
        return carry.manager
