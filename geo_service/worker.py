"""The geo worker: holds worker-slot leases and serves them (an ECS task in AWS, a process or thread locally).

A slot is ``v<version>#<worker_id>``. Serving one (``docs/CONTRACTS.md``, "Worker lifecycle" and "Cheap
swaps"): claim its lease (:class:`~geo_service.slots.SlotFinder`) -> find its shard of the version's geo
stream (waits until the stream exists) -> load its region plus buffer ring into the transform -> calibrate
(once per process) -> ``ready=true`` -> consume behind the **handover gate**
(:mod:`geo_service.handover`: a record of the new version is processed once every slot of the version before
it processed what arrived before that record, so each entity's order holds across the swap without waiting
for the old version to drain): decode, locate (strays are counted, logged and still processed), transform
(CPU time per quadkey), write ``enriched/v<v>/<worker>/<epoch_ms>.jsonl``, then
checkpoint (output is at-least-once) -> once the active pointer has moved past the version, drain: no
records for ``drain_quiet_s`` and ``MillisBehindLatest == 0`` -> ``drained=true``, release.

**Carry-over** (``SWAP_MODE=carry``, the default): while it serves ``v<n>#w``, a worker whose slot the
deploy plan keeps (control ``pk="plan"``) claims ``v<n+1>#w`` itself and prepares it in the background,
loading only what the slot gains (:mod:`geo_service.carry`); after the flip it reads the prepared slot's
shard beside the old one (both behind the gate, so a cell that stays with it resumes within a publish period
plus ``HANDOVER_MARGIN_S``), and once ``v<n>#w`` drained it serves the new slot alone, in the same process.
With nothing to carry it looks for other work; a worker started for a slot or version (``WORKER_ID`` /
``SPEC_VERSION``) exits once nothing is left for it, a generic one (an
ECS task in carry mode) waits for work with its scale-in protection off. ``SWAP_MODE=whole``: the worker
serves one slot of ``SPEC_VERSION``, drains and exits.

A stop request (SIGTERM) flushes costs and releases the leases gracefully; a lost lease (taken over after
expiry) stops processing it.

Usage in-process (tests, the local loop)::

    cfg = WorkerConfig(spec_version=2, control_table="t-control", leases_table="t-leases",
                       specs_bucket="t-specs", costs_bucket="t-costs", output_bucket="t-out",
                       lease_s=3, drain_quiet_s=1, cost_report_interval_s=1, poll_interval_s=0.1,
                       active_poll_s=0.2)               # or WorkerConfig.from_env()
    worker = GeoWorker(cfg, make_clients(endpoint_url="http://127.0.0.1:5000"))
    worker.start()                                     # runs in a daemon thread
    worker.wait_ready(timeout=30)                      # lease held and ready=true
    status = worker.run_until(lambda s: s.finished, timeout=60)
    worker.stop()                                      # graceful release (no-op once finished)

As a process: ``python -m geo_service`` (see ``geo_service/__main__.py``).

States (``WorkerStatus.state``): ``starting``, ``claiming``, ``idle`` (a generic worker with nothing to
do), ``waiting_stream``, ``warming``, ``waiting_previous`` (the handover gate holds its first records), ``ready`` (consuming),
``draining``, then one final state: ``drained`` (its last slot drained, exit 0), ``released`` (stopped on
request, exit 0), ``retired`` (nothing left for it, exit 0), ``abandoned`` (:meth:`GeoWorker.abandon`, leases
left to expire), ``failed`` (exit 1).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from geo_service.aws import Clients
from geo_service.carry import CarryOver
from geo_service.config import WorkerConfig
from geo_service.consumer import Batch, CallSpacing, ShardConsumer, ShardInfo, shard_lineages
from geo_service.control import ControlView, read_control
from geo_service.cost import Calibration, CostTracker, calibrate
from geo_service.handover import GatedReader, HandoverGate, SlotReader
from geo_service.handover_summary import Aggregator, SummaryStore
from geo_service.health import HealthServer
from geo_service.heartbeat import Heartbeats
from geo_service.lease import Clock, LeaseLost, LeaseManager
from geo_service.logs import get_logger, log
from geo_service.process import BatchProcessor, BatchResult
from geo_service.protection import ScaleInProtection
from geo_service.slots import Slot, SlotFinder, SpecCache, handover_reading, old_places, region_of
from geo_service.status import FINAL_STATES, Outcome, WorkerExited, WorkerState, WorkerStatus, default_owner
from geo_service.timebase import SYSTEM, Task, Timebase
from geo_service.transform import GeoTransform, load_transform, transform_for_region
from partitioner.contracts.plan import SwapMode
from partitioner.contracts.stream import geo_stream_name
from partitioner.spec import Spec

__all__ = ["FINAL_STATES", "GeoWorker", "WorkerExited", "WorkerStatus", "default_owner"]

class GeoWorker:
    """One geo worker process; see the module docstring for the lifecycle and a usage example.

    Parameters
    ----------
    config : WorkerConfig
    clients : Clients
        boto3 clients (:func:`geo_service.aws.make_clients`).
    owner : str, optional
        Lease owner id (default host:pid:random).
    clock : callable, optional
        Epoch seconds for lease times (default ``timebase.time``).
    timebase : Timebase, optional
        Clocks, waits and background threads (:mod:`geo_service.timebase`; the scale simulation runs workers on a
        virtual one).
    transform_factory : callable, optional
        Builds a transform (default: ``load_transform(config.transform)``); a carried slot builds its transform
        from the current one when it can (:func:`~geo_service.transform.transform_for_region`).
    calibration : Calibration, optional
        Skip the start-up calibration and use this one (tests); by default calibrated once per process.
    protection : ScaleInProtection, optional
        The task's scale-in protection (default: from ``config.agent_uri``).
    """

    def __init__(self, config: WorkerConfig, clients: Clients, *, owner: str | None = None,
                 clock: Clock | None = None, timebase: Timebase = SYSTEM,
                 transform_factory: Callable[[], GeoTransform] | None = None,
                 calibration: Calibration | None = None, protection: ScaleInProtection | None = None) -> None:
        self.config = config
        self.clients = clients
        self.owner = owner or default_owner()
        self.timebase = timebase
        self._get_records_at = CallSpacing()  # GetRecords spacing per shard, shared by the process's consumers
        self.clock = clock or timebase.time
        self._transform_factory = transform_factory or (lambda: load_transform(config.transform))
        self._calibration = calibration
        self.specs = SpecCache(clients, config.specs_bucket)
        self.finder = SlotFinder(config, clients, self.owner, self.specs, self.clock, manager=self._manager)
        self.protection = protection or ScaleInProtection(config.agent_uri, clock=timebase.monotonic)
        self._abandon = False
        self.heartbeats = Heartbeats(config.heartbeat_s, on_beat=self._protect, paused=lambda: self._abandon,
                                     timebase=timebase)
        self.output = BatchProcessor(clients, config.output_bucket, config.quarantine_bucket, config.costs_bucket,
                                     config.grid_zoom, self.owner, wall=timebase.time, monotonic=timebase.monotonic)
        self.log = get_logger()
        self._stop = timebase.event()
        self._lock = threading.Lock()
        self._status = WorkerStatus(state=WorkerState.STARTING, version=config.spec_version, owner=self.owner)
        self._thread: Task | None = None
        self.leases: LeaseManager | None = None  # the lease of the slot being opened or served
        self.slot: Slot | None = None
        self._carry: CarryOver | None = None
        self._seen: ControlView | None = None
        self.health: HealthServer | None = None

    # ------------------------------------------------------------------ control API
    def start(self) -> GeoWorker:
        """Run the worker in a daemon thread; returns self."""
        if self._thread is not None:
            raise RuntimeError(f"worker {self.owner!r} already started")
        self._thread = self.timebase.spawn(self.run, f"geo-worker-{self.owner}")
        return self

    def request_stop(self) -> None:
        """Ask the worker to finish its batch, flush costs, release its leases and exit (SIGTERM)."""
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> WorkerStatus:
        """Request a graceful stop and wait for the worker thread; returns the final status."""
        self.request_stop()
        self.join(timeout)
        return self.status()

    def abandon(self, timeout: float = 30.0) -> WorkerStatus:
        """Stop without releasing the leases, as if the process died (they expire; tests use this)."""
        self._abandon = True
        return self.stop(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker thread to finish (raises TimeoutError if it does not)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"worker {self.owner!r} still running after {timeout!r}s "
                                   f"(state {self.status().state!r})")

    def status(self) -> WorkerStatus:
        """The current status snapshot."""
        with self._lock:
            return self._status

    def run_until(self, predicate: Callable[[WorkerStatus], bool], timeout: float = 60.0,
                  poll_s: float = 0.05) -> WorkerStatus:
        """Start the worker if needed and wait until ``predicate(status)`` holds; return that status.

        Raises
        ------
        TimeoutError
            If the predicate does not hold within ``timeout`` seconds (names the state).
        WorkerExited
            If the worker finishes without the predicate holding.
        """
        if self._thread is None:
            self.start()
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if predicate(st):
                return st
            if st.finished and not (self._thread and self._thread.is_alive()):
                raise WorkerExited(st)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"worker {self.owner!r} (v{st.version}, slot {st.worker_id!r}) did not reach the "
                                   f"awaited condition in {timeout!r}s; state {st.state!r}, error {st.last_error!r}")
            time.sleep(poll_s)

    def wait_ready(self, timeout: float = 60.0) -> WorkerStatus:
        """Start if needed and wait until the worker holds a lease with ``ready=true``."""
        return self.run_until(lambda s: s.ready, timeout)

    # ------------------------------------------------------------------ main loop
    def run(self) -> int:
        """Run to completion in the calling thread; return the process exit code (0 ok, 1 failed)."""
        self.heartbeats.start()
        try:
            if self.config.health_port:
                self.health = HealthServer(lambda: asdict(self.status()), self.config.health_port)
            code = self._run()
        except Exception as exc:
            log(self.log, logging.ERROR, "worker_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())
            self._let_go()
            self._set(state=WorkerState.FAILED, last_error=f"{type(exc).__name__}: {exc}", ready=False, exit_code=1)
            code = 1
        finally:
            self.heartbeats.stop()
            if self.health is not None:
                self.health.close()
        return code

    def _run(self) -> int:
        drained_any = False
        while not self._stop.is_set():
            manager = self._claim()
            if manager is None:
                break
            slot = self._open(manager)
            if slot is None:
                continue
            outcome = self._serve_chain(slot)
            drained_any = drained_any or outcome == Outcome.DRAINED
            if outcome == Outcome.STOPPED or (outcome == Outcome.DRAINED
                                                 and self.config.swap_mode is SwapMode.WHOLE):
                break
        if self._stop.is_set():
            self._let_go()
            final = WorkerState.ABANDONED if self._abandon else WorkerState.RELEASED
            self._set(state=final, ready=False, draining=False, exit_code=0)
            log(self.log, logging.INFO, "worker_stopped", final=final, **self._ids())
            return 0
        final = WorkerState.DRAINED if drained_any else WorkerState.RETIRED
        self._set(state=final, ready=False, draining=False, exit_code=0)
        log(self.log, logging.INFO, "worker_done", final=final, **self._ids())
        return 0

    def _manager(self, version: int) -> LeaseManager:
        return LeaseManager(self.clients.dynamodb, self.config.leases_table, version, self.owner,
                            self.config.lease_s, clock=self.clock)

    # ------------------------------------------------------------------ claiming
    def _claim(self) -> LeaseManager | None:
        """Claim the next slot, retrying every heartbeat period; None when stopping or nothing is left."""
        self._set(state=WorkerState.CLAIMING, ready=False, draining=False, worker_id=None, partition_ids=(), next_version=None)
        pinned = self.config.worker_id is not None or self.config.spec_version is not None
        while not self._stop.is_set():
            search = self.finder.search(self._control())
            if search.claimed is not None:
                lease = search.claimed.lease
                assert lease is not None
                with self._lock:
                    claimed = self._status.leases_claimed + 1
                self._set(version=lease.version, worker_id=lease.worker_id, leases_claimed=claimed)
                log(self.log, logging.INFO, "lease_claimed", claims=lease.claims, checkpoint=dict(lease.checkpoint),
                    **self._ids())
                return search.claimed
            if search.open_slots == 0 and pinned:
                return None
            if search.open_slots == 0 and self.status().state != "idle":
                self._set(state=WorkerState.IDLE)
                log(self.log, logging.INFO, "idle", **self._ids())
            self._stop.wait(self.finder.next_pass_s())
        return None

    # ------------------------------------------------------------------ opening a claimed slot
    def _open(self, manager: LeaseManager) -> Slot | None:
        """Find the shard, warm the transform and mark the lease ready; None if stopped, lost or dropped meanwhile."""
        lease = manager.lease
        assert lease is not None
        self.leases = manager
        self.heartbeats.add(manager)
        try:
            spec = self.specs.get(lease.version)
            log(self.log, logging.INFO, "spec_loaded", workers=len(spec.workers), partitions=len(spec.partitions),
                stream=self._stream_name(spec), **self._ids())
            lineages = self._wait_stream(manager, spec, lease.worker_id)
            if lineages is None:
                self._drop(manager)
                return None
            self._set(state=WorkerState.WARMING, partition_ids=tuple(p.id for p in spec.partitions_of(lease.worker_id)))
            region = region_of(spec, lease.worker_id)
            transform, gained = transform_for_region(None, self._transform_factory, region, self.config.buffer_ring)
            if self._calibration is None:
                self._calibration = calibrate()
            stream = self._stream_name(spec)
            consumers = tuple(self._consumer(stream, shards, lease.checkpoint) for shards in lineages)
            self._check_lease(manager)
            manager.mark_ready()
        except LeaseLost:
            self._drop(manager, release=False)
            log(self.log, logging.WARNING, "lease_lost", **self._ids())
            return None
        shards = [s for lineage in lineages for s in lineage]
        slot = Slot(manager, spec, lease.worker_id, stream, shards, consumers, transform, region,
                    int(getattr(transform, "loaded", 0)), gained)
        log(self.log, logging.INFO, "worker_ready", shards=[s.shard_id for s in shards], region=list(region[:20]),
            region_size=len(region), places_loaded=slot.places_loaded,
            calibration_s=self._calibration.seconds_per_unit, **self._ids())
        return slot

    def _wait_stream(self, manager: LeaseManager, spec: Spec, worker_id: str) -> list[list[ShardInfo]] | None:
        """One shard lineage per shard the worker owns, once the stream's manifest is published; None if stopped
        or dropped meanwhile (:func:`shard_lineages`)."""
        self._set(state=WorkerState.WAITING_STREAM)
        return shard_lineages(self.clients.s3, self.config.specs_bucket, spec, worker_id, stop=self._stop,
                              dropped=lambda: self._control().dropped(spec.version),
                              retry_s=self.config.active_poll_s, on_wait=lambda why: log(
                                  self.log, logging.INFO, "waiting_for_stream", reason=why, **self._ids()),
                              check=lambda: self._check_lease(manager))

    def _consumer(self, stream: str, shards: list[ShardInfo], checkpoint: Mapping[str, str]) -> ShardConsumer:
        return ShardConsumer(self.clients.kinesis, stream, shards, checkpoint,
                             min_interval_s=self.config.get_records_interval_s, clock=self.timebase.monotonic,
                             spacing=self._get_records_at)

    # ------------------------------------------------------------------ serving
    def _serve_chain(self, slot: Slot) -> str:
        """Serve ``slot``, then every slot carried over from it; return the last outcome."""
        current: Slot | None = slot
        outcome: str = Outcome.STOPPED
        while current is not None:
            previous = current.version
            outcome, current = self._serve(current)
            if current is not None:
                with self._lock:
                    carried = self._status.carried + 1
                self._set(carried=carried)
                log(self.log, logging.INFO, "carried_over", from_version=previous, version=current.version,
                    worker_id=current.worker_id, owner=self.owner, places_gained=current.places_gained,
                    places_loaded=current.places_loaded)
        return outcome

    def _serve(self, slot: Slot) -> tuple[str, Slot | None]:
        """Serve one slot until it drains, is lost, dropped or the worker stops; return what comes next."""
        self.slot, self.leases = slot, slot.leases
        with self._lock:
            served = self._status.slots_served + 1
        self._set(state=WorkerState.READY, ready=True, draining=False, version=slot.version, worker_id=slot.worker_id,
                  partition_ids=tuple(sorted(slot.partition_ids)), places_loaded=slot.places_loaded,
                  places_gained=slot.places_gained, slots_served=served, next_version=None)
        try:
            ctl = self._control()
            if ctl.dropped(slot.version):
                return self._leave(slot, Outcome.DROPPED)
            self._reader(slot, ctl)
            return self._consume(slot)
        except LeaseLost:
            log(self.log, logging.WARNING, "lease_lost", **self._ids())
            self.heartbeats.remove(slot.leases)
            slot.leases.forget()
            return Outcome.LOST, self._take_carry()

    def _leave(self, slot: Slot, why: str) -> tuple[str, Slot | None]:
        if why == Outcome.DROPPED:
            log(self.log, logging.INFO, "version_dropped", **self._ids())
            self._drop(slot.leases)
        return why, None

    def _reader(self, slot: Slot, ctl: ControlView | None = None) -> SlotReader:
        """The slot's shard readers (one per owned shard) behind one handover gate (:mod:`geo_service.handover`).

        Whether a gate is needed is read strongly consistent (once per slot): a stale view of the swap would open
        the gate of a slot whose previous version is still being read."""
        if slot.reader is not None:
            return slot.reader
        cfg = self.config
        ctl = read_control(self.clients.dynamodb, cfg.control_table, consistent=True)
        plan = ctl.plan
        classify = None
        if plan is None or plan.to_version != slot.version or plan.from_version is None:
            # not a swap into this version (a first deploy, or a later plan: the one before it finished long ago)
            gate = HandoverGate.opened()
        else:
            old_spec = self.specs.get(plan.from_version)
            classify = old_places(old_spec)
            old_ids = [w.id for w in old_spec.workers]
            store = SummaryStore(self.clients.dynamodb, cfg.leases_table, slot.version, plan.from_version, old_ids)
            if slot.spec.workers[0].id == slot.worker_id:  # the new version's first slot aggregates
                slot.aggregator = Aggregator(store, self.owner, cfg.poll_interval_s, self.timebase.time,
                                             self.timebase.monotonic)

            def own_old() -> tuple[str | None, float]:
                old = self.slot  # this process's own slot of the old version, if it carries: fresher than its lease
                if old is not None and old is not slot and old.version == plan.from_version:
                    return old.worker_id, old.caught_up_at
                return None, 0.0

            gate = HandoverGate(handover_reading(store, own_old, slot.aggregator), margin_s=cfg.handover_margin_s,
                                refresh_s=cfg.poll_interval_s, timeout_s=cfg.barrier_timeout_s,
                                clock=self.timebase.monotonic)
        slot.reader = SlotReader([GatedReader(c, gate, classify, own=slot.worker_id, wall=self.timebase.time)
                                  for c in slot.consumers])
        if slot.tracker is None:
            assert self._calibration is not None
            slot.tracker = CostTracker(self._calibration, cfg.grid_zoom, cfg.cost_report_interval_s,
                                       clock=self.timebase.time)
        return slot.reader

    def _step(self, slot: Slot) -> Batch:
        """One gated poll of ``slot``'s shards: transform what passed into the slot's output buffer, write the
        buffer when it is due (then the checkpoints and caught-up times move)."""
        reader = self._reader(slot)
        assert slot.tracker is not None
        if slot.aggregator is not None:
            slot.aggregator.step()
        batch = reader.poll()
        if batch.records:
            if not slot.serving:
                slot.serving = True
                slot.leases.mark_serving()
                log(self.log, logging.INFO, "serving", version=slot.version, worker_id=slot.worker_id,
                    owner=self.owner, carried=slot.carried)
            self._count(self.output.process(batch, slot, slot.tracker))
            reader.buffered()
        else:
            reader.processed()
        self._flush(slot)
        if reader.gate.timed_out and not slot.timeout_logged:
            slot.timeout_logged = True
            log(self.log, logging.WARNING, "handover_timeout", waited_s=self.config.barrier_timeout_s,
                version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        return batch

    def _flush(self, slot: Slot, force: bool = False) -> None:
        """Write the slot's output buffer when it is due (sooner while a swap's handover waits on this slot)."""
        cfg = self.config
        flush_s = min(cfg.output_flush_s, cfg.poll_interval_s) if slot.publishing else cfg.output_flush_s
        if not (force or slot.output.due(self.timebase.monotonic(), flush_s, cfg.output_flush_bytes)):
            return
        written = self.output.flush(slot)
        if slot.reader is not None:
            slot.reader.flushed()
        if written is not None:
            with self._lock:
                st = self._status
                self._status = dataclasses.replace(st, events_out=st.events_out + written.rows,
                                                   quarantined=st.quarantined + written.quarantined)

    def _consume(self, slot: Slot) -> tuple[str, Slot | None]:
        cfg = self.config
        tracker = slot.tracker
        assert tracker is not None
        clock = self.timebase.monotonic
        draining_since: float | None = None
        last_record = clock()
        next_check = next_publish = 0.0
        while True:
            if self._stop.is_set():
                if not self._abandon:
                    self._finish(slot)
                    self._flush_ahead()
                return Outcome.STOPPED, None
            self._check_lease(slot.leases)
            batch = self._step(slot)
            if batch.records:
                last_record = clock()
            if draining_since is None:
                self._note_waiting(slot)
            self._report(tracker, slot, force=False)
            now = clock()
            if draining_since is None and now >= next_check:
                next_check = now + cfg.active_poll_s
                ctl = self._control()
                plan = ctl.plan
                slot.publishing = slot.publishing or (plan is not None and plan.started
                                                      and plan.from_version == slot.version)
                if ctl.active is not None and ctl.active > slot.version:
                    draining_since, slot.publishing = now, True
                    self._set(state=WorkerState.DRAINING, draining=True)
                    log(self.log, logging.INFO, "draining", active_version=ctl.active, **self._ids())
                elif ctl.dropped(slot.version):
                    return self._leave(slot, Outcome.DROPPED)
                else:
                    self._carry_step(slot, ctl)
            if slot.publishing and now >= next_publish:
                next_publish = now + cfg.poll_interval_s
                slot.leases.publish_caught_up(slot.caught_up_at)
            ahead = self._ahead()  # the prepared carried slot: nothing reaches its shard before the flip
            if draining_since is not None and self._drained(batch, now, max(draining_since, last_record)):
                self._flush(slot, force=True)
                self._report(tracker, slot, force=True)
                slot.leases.mark_drained()
                self.heartbeats.remove(slot.leases)
                slot.leases.release()
                log(self.log, logging.INFO, "drained", **self._ids())
                return Outcome.DRAINED, self._take_carry()
            if not batch.records and not (ahead is not None and ahead.records):
                self._stop.wait(self._idle_wait(slot, batch))

    def _finish(self, slot: Slot) -> None:
        """On a stop request: write what is buffered and the last cost report (a failure is logged: the leases
        must still be released, and a successor re-reads from the last checkpoint)."""
        try:
            self._flush(slot, force=True)
            assert slot.tracker is not None
            self._report(slot.tracker, slot, force=True)
        except Exception as exc:
            log(self.log, logging.WARNING, "final_flush_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())

    def _idle_wait(self, slot: Slot, batch: Batch) -> float:
        """How long to pause after a step that read nothing: the poll interval (half of it while a gate holds
        records), but no longer than until the call spacing lets a shard be read again when that is what stopped
        the read, or until an output buffer is due."""
        cfg = self.config
        wait = cfg.poll_interval_s / 2 if self._holding(slot) else cfg.poll_interval_s
        carry = self._carry
        slots = [slot, carry.slot] if carry is not None and carry.ready and carry.slot is not None else [slot]
        now = self.timebase.monotonic()
        for s in slots:
            flush_s = min(cfg.output_flush_s, cfg.poll_interval_s) if s.publishing else cfg.output_flush_s
            wait = min(wait, s.output.due_in(now, flush_s))
            if s.reader is not None and batch.spaced:
                wait = min(wait, s.reader.ready_in())
        return max(wait, 0.001)

    def _holding(self, slot: Slot) -> bool:
        """True while a gate holds records of this slot or of the carried one (they pass within a publish period)."""
        carry = self._carry
        slots = [slot, carry.slot] if carry is not None and carry.slot is not None else [slot]
        return any(s.reader is not None and s.reader.holding > 0 for s in slots)

    def _note_waiting(self, slot: Slot) -> None:
        """``waiting_previous`` while the gate holds the slot's first records, ``ready`` otherwise."""
        reader = slot.reader
        state = WorkerState.WAITING_PREVIOUS if reader is not None and reader.holding and not slot.serving \
            else WorkerState.READY
        if self.status().state != state:
            self._set(state=state)

    def _ahead(self) -> Batch | None:
        """Serve the prepared carried slot beside the old one (same process) until the old one drained."""
        carry = self._carry
        if carry is None or not carry.ready or carry.slot is None:
            return None
        nxt = carry.slot
        try:
            batch = self._step(nxt)
            assert nxt.tracker is not None
            self._report(nxt.tracker, nxt, force=False)
            return batch
        except LeaseLost:
            log(self.log, logging.WARNING, "carry_lease_lost", next_version=carry.to_version, **self._ids())
            carry.cancel(release=False)
            self._carry = None
            self._set(next_version=None)
            return None

    def _flush_ahead(self) -> None:
        carry = self._carry
        if carry is not None and carry.slot is not None and carry.slot.tracker is not None:
            self._finish(carry.slot)

    def _drained(self, batch: Batch, now: float, quiet_since: float) -> bool:
        if batch.at_end:
            return True
        return not batch.records and batch.millis_behind_latest == 0 and now - quiet_since >= self.config.drain_quiet_s

    # ------------------------------------------------------------------ carry-over
    def _carry_step(self, slot: Slot, ctl: ControlView) -> None:
        """Start preparing the slot's next version when the plan keeps it; drop a preparation the plan dropped."""
        plan = ctl.plan
        keep = (self.config.swap_mode is SwapMode.CARRY and plan is not None and plan.started
                and plan.from_version == slot.version
                and plan.keeps(slot.version, slot.worker_id, self._ids_of(plan.to_version)))
        carry = self._carry
        if carry is not None and (not keep or plan is None or carry.to_version != plan.to_version):
            log(self.log, logging.INFO, "carry_dropped", next_version=carry.to_version, **self._ids())
            carry.cancel()
            self._carry = None
            self._set(next_version=None)
        if keep and self._carry is None and plan is not None:
            self._carry = CarryOver(slot, plan.to_version, manager=self._manager(plan.to_version), specs=self.specs,
                                    clients=self.clients, specs_bucket=self.config.specs_bucket,
                                    heartbeats=self.heartbeats, transform_factory=self._transform_factory,
                                    buffer_ring=self.config.buffer_ring, retry_s=self.config.heartbeat_s,
                                    stream_name=self._version_stream, consumer=self._consumer,
                                    timebase=self.timebase).start()
            self._set(next_version=plan.to_version)
            log(self.log, logging.INFO, "carry_started", next_version=plan.to_version, **self._ids())

    def _take_carry(self) -> Slot | None:
        """The prepared next slot, if it is ready and still ours; else drop the preparation."""
        carry, self._carry = self._carry, None
        if carry is None:
            return None
        if carry.ready and carry.slot is not None and carry.manager.valid():
            return carry.slot
        log(self.log, logging.WARNING, "carry_not_ready", next_version=carry.to_version, state=carry.state,
            error=carry.error, **self._ids())
        carry.cancel()
        return None

    # ------------------------------------------------------------------ helpers
    def _control(self) -> ControlView:
        """The control view, never older than one this process already saw (eventually consistent reads can
        return an older value than an earlier read: a drain or a carry-over must not be undone by one)."""
        ctl = read_control(self.clients.dynamodb, self.config.control_table)
        seen = self._seen
        if seen is not None:
            active = max((v for v in (ctl.active, seen.active) if v is not None), default=None)
            plan = ctl.plan
            if seen.plan is not None and (plan is None or (plan.to_version, plan.updated_at)
                                          < (seen.plan.to_version, seen.plan.updated_at)):
                plan = seen.plan
            ctl = ControlView(active=active, plan=plan)
        self._seen = ctl
        return ctl

    def _ids_of(self, version: int) -> frozenset[str]:
        return frozenset(w.id for w in self.specs.get(version).workers)

    def _report(self, tracker: CostTracker, slot: Slot, force: bool) -> None:
        if self.output.report_costs(tracker, slot, force):
            with self._lock:
                self._status = dataclasses.replace(self._status, cost_reports=self._status.cost_reports + 1)

    def _count(self, result: BatchResult) -> None:
        """Count a processed batch (its rows and quarantined records count once written: :meth:`_flush`)."""
        with self._lock:
            st = self._status
            self._status = dataclasses.replace(st, records_read=st.records_read + result.records,
                                               strays=st.strays + result.strays, batches=st.batches + 1)

    def _protect(self, holds_any: bool) -> None:
        if not self._abandon:
            self.protection.hold(holds_any)

    def _check_lease(self, manager: LeaseManager) -> None:
        if self.heartbeats.lost(manager) or not manager.valid():
            manager.forget()
            raise LeaseLost(f"lease of {self.owner!r} lost or expired")

    def _drop(self, manager: LeaseManager, release: bool = True) -> None:
        self.heartbeats.remove(manager)
        if release:
            self._safe_release(manager)
        else:
            manager.forget()

    def _let_go(self) -> None:
        """On stop or failure: release every lease held (or just forget them when abandoning)."""
        managers = [m for m in (self.leases, self._carry.manager if self._carry else None) if m is not None]
        if self._carry is not None:
            self._carry.cancel(release=not self._abandon)
            self._carry = None
        for m in managers:
            self._drop(m, release=not self._abandon)

    def _safe_release(self, manager: LeaseManager) -> None:
        try:
            if manager.release():
                log(self.log, logging.INFO, "lease_released", **self._ids())
        except Exception as exc:
            log(self.log, logging.WARNING, "release_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())

    def _stream_name(self, spec: Spec) -> str:
        return spec.stream_name or self._version_stream(spec.version)

    def _version_stream(self, version: int) -> str:
        return geo_stream_name(self.config.prefix, version)

    def _ids(self) -> dict[str, Any]:
        st = self.status()
        return {"version": st.version, "worker_id": st.worker_id, "owner": self.owner}

    def _set(self, **changes: Any) -> None:
        with self._lock:
            self._status = dataclasses.replace(self._status, **changes)
