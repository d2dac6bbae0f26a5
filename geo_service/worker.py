"""The geo worker: holds worker-slot leases and serves them (an ECS task in AWS, a process or thread locally).

A slot is ``v<version>#<worker_id>``. :class:`GeoWorker` is the process shell: it starts the heartbeats and the
health endpoint, answers stop requests, and runs the process loop over its slots (``docs/CONTRACTS.md``, "Worker
lifecycle" and "Cheap swaps"):

1. **claim** a lease (:class:`~geo_service.serving.slots.SlotFinder`);
2. **open** the slot (:func:`~geo_service.serving.opening.open_slot`): find its shard of the version's geo stream (waits
   until the stream exists), load its region plus buffer ring into the transform, calibrate (once per process),
   ``ready=true``;
3. **serve** it (:class:`~geo_service.serving.runner.SlotRunner`): consume behind the handover gate, transform, write
   ``enriched/dt=<day>/hour=<HH>/...jsonl.gz`` (by event hour), checkpoint; once the active pointer has moved past the version,
   drain (no records for ``drain_quiet_s`` and ``MillisBehindLatest == 0``), ``drained=true``, release.

**Carry-over** (``SWAP_MODE=carry``, the default): while it serves ``v<n>#w``, a worker whose slot the deploy
plan keeps opens ``v<n+1>#w`` ahead, loading only what the slot gains (:mod:`geo_service.serving.carry`); after the flip
it reads the prepared slot's shard beside the old one (both behind the gate, so a cell that stays with it resumes
within a publish period plus ``HANDOVER_MARGIN_S``), and once ``v<n>#w`` drained it serves the new slot alone, in
the same process. With nothing to carry it claims again; a worker started for a slot or version (``WORKER_ID`` /
``SPEC_VERSION``) exits once nothing is left for it, a generic one (an ECS task in carry mode) waits for work with
its scale-in protection off. ``SWAP_MODE=whole``: the worker serves one slot of ``SPEC_VERSION``, drains and exits.

A stop request (SIGTERM) flushes costs and releases the leases gracefully; a lost lease (taken over after
expiry) stops processing it.

States (``WorkerStatus.state``, :class:`~geo_service.runtime.lifecycle.WorkerState`; every change is checked against
:data:`~geo_service.runtime.lifecycle.WORKER_TRANSITIONS`): ``starting``, ``claiming``, ``idle`` (a generic worker with
nothing to do), ``waiting_stream``, ``warming``, ``waiting_previous`` (the handover gate holds its first records),
``ready`` (consuming), ``draining``, then one final state: ``drained`` (its last slot drained, exit 0),
``released`` (stopped on request, exit 0), ``retired`` (nothing left for it, exit 0), ``abandoned``
(:meth:`GeoWorker.abandon`, leases left to expire), ``failed`` (exit 1).

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

As a process: ``python -m geo_service`` (see ``geo_service/__main__.py``: configuration and signals).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict

from geo_service.adapters.aws import Clients
from geo_service.adapters.logs import log
from geo_service.adapters.metrics import WorkerMetrics
from geo_service.adapters.timebase import SYSTEM, Task, Timebase
from geo_service.leases.lease import Clock, LeaseLost, LeaseManager
from geo_service.pipeline.cost import Calibration, calibrate
from geo_service.pipeline.transform import GeoTransform, load_transform
from geo_service.runtime.config import WorkerConfig
from geo_service.runtime.health import HealthServer
from geo_service.runtime.lifecycle import OpeningState, WorkerState
from geo_service.runtime.protection import ScaleInProtection
from geo_service.runtime.status import Outcome, StatusBoard, WorkerExited, WorkerStatus, default_owner
from geo_service.serving.carry import Carrier
from geo_service.serving.context import WorkerContext
from geo_service.serving.opening import OpenWatch, open_slot
from geo_service.serving.runner import SlotRunner
from geo_service.serving.slots import Slot, SlotFinder
from geokernel.contracts.plan import SwapMode
from geokernel.partition_spec.model import Spec

__all__ = ["GeoWorker"]


class GeoWorker:
    """One geo worker process; see the module docstring for the lifecycle and a usage example.

    Parameters
    ----------
    config : WorkerConfig
    clients : Clients
        boto3 clients (:func:`geo_service.adapters.aws.make_clients`).
    owner : str, optional
        Lease owner id (default host:pid:random).
    clock : callable, optional
        Epoch seconds for lease times (default ``timebase.time``).
    timebase : Timebase, optional
        Clocks, waits and background threads (:mod:`geo_service.adapters.timebase`; the scale simulation runs workers on a
        virtual one).
    transform_factory : callable, optional
        Builds a transform (default: ``load_transform(config.transform)``); a carried slot builds its transform
        from the current one when it can (:func:`~geo_service.pipeline.transform.transform_for_region`).
    calibration : Calibration, optional
        Skip the start-up calibration and use this one (tests); by default calibrated once per process.
    protection : ScaleInProtection, optional
        The task's scale-in protection (default: from ``config.agent_uri``).
    metrics : WorkerMetrics, optional
        Its CloudWatch metrics (default: an EMF line on stdout every ``config.metrics_interval_s``; tests give their
        own stream).
    """

    def __init__(self, config: WorkerConfig, clients: Clients, *, owner: str | None = None,
                 clock: Clock | None = None, timebase: Timebase = SYSTEM,
                 transform_factory: Callable[[], GeoTransform] | None = None,
                 calibration: Calibration | None = None, protection: ScaleInProtection | None = None,
                 metrics: WorkerMetrics | None = None) -> None:
        self.config = config
        self.clients = clients
        self.owner = owner or default_owner()
        self.timebase = timebase
        board = StatusBoard(WorkerStatus(state=WorkerState.STARTING, version=config.spec_version, owner=self.owner))
        self.ctx = WorkerContext(
            config, clients, owner=self.owner, clock=clock or timebase.time, timebase=timebase,
            transform_factory=transform_factory or (lambda: load_transform(config.transform)),
            calibration=calibration, board=board,
            protection=protection or ScaleInProtection(config.agent_uri, clock=timebase.monotonic), metrics=metrics)
        self.finder = SlotFinder(config, clients, self.owner, self.ctx.specs, self.ctx.clock, manager=self.ctx.manager)
        self.carrier = Carrier(self.ctx)
        self.log = self.ctx.log
        self.health: HealthServer | None = None
        self._thread: Task | None = None

    @property
    def leases(self) -> LeaseManager | None:
        """The lease of the slot being opened or served."""
        return self.ctx.leases

    @property
    def slot(self) -> Slot | None:
        """The slot being served (not the one carried over)."""
        return self.ctx.slot

    # ------------------------------------------------------------------ control API
    def start(self) -> GeoWorker:
        """Run the worker in a daemon thread; returns self."""
        if self._thread is not None:
            raise RuntimeError(f"worker {self.owner!r} already started")
        self._thread = self.timebase.spawn(self.run, f"geo-worker-{self.owner}")
        return self

    def request_stop(self) -> None:
        """Ask the worker to finish its batch, flush costs, release its leases and exit (SIGTERM)."""
        self.ctx.stop.set()

    def stop(self, timeout: float = 30.0) -> WorkerStatus:
        """Request a graceful stop and wait for the worker thread; returns the final status."""
        self.request_stop()
        self.join(timeout)
        return self.status()

    def abandon(self, timeout: float = 30.0) -> WorkerStatus:
        """Stop without releasing the leases, as if the process died (they expire; tests use this)."""
        self.ctx.abandon = True
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
        return self.ctx.status()

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

    # ------------------------------------------------------------------ the process loop
    def run(self) -> int:
        """Run to completion in the calling thread; return the process exit code (0 ok, 1 failed)."""
        ctx = self.ctx
        ctx.heartbeats.start()
        try:
            if self.config.health_port:
                self.health = HealthServer(lambda: asdict(self.status()), self.config.health_port)
            code = self._run()
        except Exception as exc:
            log(self.log, logging.ERROR, "worker_failed", error=f"{type(exc).__name__}: {exc}", **ctx.ids())
            self._let_go()
            ctx.set(state=WorkerState.FAILED, last_error=f"{type(exc).__name__}: {exc}", ready=False, exit_code=1)
            code = 1
        finally:
            ctx.heartbeats.stop()
            if self.health is not None:
                self.health.close()
            self._flush_metrics()
        return code

    def _flush_metrics(self) -> None:
        """The last EMF line of the process (what it did since the one before); a failure is logged, not raised."""
        try:
            self.ctx.metrics.flush()
        except Exception as exc:
            log(self.log, logging.WARNING, "metrics_flush_failed", error=f"{type(exc).__name__}: {exc}",
                **self.ctx.ids())

    def _run(self) -> int:
        """Claim, open and serve slots until stopped or nothing is left; set the final state."""
        ctx = self.ctx
        drained_any = False
        while not ctx.stop.is_set():
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
        if ctx.stop.is_set():
            self._let_go()
            final = WorkerState.ABANDONED if ctx.abandon else WorkerState.RELEASED
            ctx.set(state=final, ready=False, draining=False, exit_code=0)
            log(self.log, logging.INFO, "worker_stopped", final=final, **ctx.ids())
            return 0
        final = WorkerState.DRAINED if drained_any else WorkerState.RETIRED
        ctx.set(state=final, ready=False, draining=False, exit_code=0)
        log(self.log, logging.INFO, "worker_done", final=final, **ctx.ids())
        return 0

    def _claim(self) -> LeaseManager | None:
        """Claim the next slot, retrying every heartbeat period; None when stopping or nothing is left."""
        ctx = self.ctx
        ctx.set(state=WorkerState.CLAIMING, ready=False, draining=False, worker_id=None, partition_ids=(),
                next_version=None)
        pinned = self.config.worker_id is not None or self.config.spec_version is not None
        while not ctx.stop.is_set():
            search = self.finder.search(ctx.control())
            if search.claimed is not None:
                lease = search.claimed.lease
                assert lease is not None
                ctx.set(version=lease.version, worker_id=lease.worker_id,
                        leases_claimed=ctx.status().leases_claimed + 1)
                log(self.log, logging.INFO, "lease_claimed", claims=lease.claims, checkpoint=dict(lease.checkpoint),
                    **ctx.ids())
                return search.claimed
            if search.open_slots == 0 and pinned:
                return None
            if search.open_slots == 0 and ctx.status().state != WorkerState.IDLE:
                ctx.set(state=WorkerState.IDLE)
                log(self.log, logging.INFO, "idle", **ctx.ids())
            ctx.stop.wait(self.finder.next_pass_s())
        return None

    def _open(self, manager: LeaseManager) -> Slot | None:
        """Open the claimed slot (:func:`~geo_service.serving.opening.open_slot`); None if stopped, lost or dropped
        meanwhile (the lease is then released, or forgotten when lost)."""
        ctx = self.ctx
        lease = manager.lease
        assert lease is not None
        ctx.leases = manager

        def opening(state: OpeningState, spec: Spec) -> None:
            if state == OpeningState.WAITING_STREAM:
                log(self.log, logging.INFO, "spec_loaded", workers=len(spec.workers), partitions=len(spec.partitions),
                    stream=ctx.stream_name(spec), **ctx.ids())
                ctx.set(state=WorkerState.WAITING_STREAM)
            else:
                ctx.set(state=WorkerState.WARMING,
                        partition_ids=tuple(p.id for p in spec.partitions_of(lease.worker_id)))

        def still_held() -> bool:
            ctx.check_lease(manager)
            return True

        watch = OpenWatch(stop=ctx.stop, retry_s=self.config.active_poll_s, on_state=opening,
                          dropped=lambda: ctx.control().dropped(lease.version),
                          on_wait=lambda why: log(self.log, logging.INFO, "waiting_for_stream", reason=why,
                                                  **ctx.ids()),
                          check=lambda: ctx.check_lease(manager), warmed=self._calibrate, go_on=still_held)
        try:
            slot = open_slot(ctx, manager, watch)
        except LeaseLost:
            ctx.drop(manager, release=False)
            log(self.log, logging.WARNING, "lease_lost", **ctx.ids())
            return None
        if slot is None:
            ctx.drop(manager)
            return None
        assert ctx.calibration is not None
        log(self.log, logging.INFO, "worker_ready", shards=[s.shard_id for s in slot.shards],
            region=list(slot.region[:20]), region_size=len(slot.region), places_loaded=slot.places_loaded,
            calibration_s=ctx.calibration.seconds_per_unit, **ctx.ids())
        return slot

    def _calibrate(self) -> None:
        if self.ctx.calibration is None:
            self.ctx.calibration = calibrate()

    def _serve_chain(self, slot: Slot) -> Outcome:
        """Serve ``slot``, then every slot carried over from it; return the last outcome."""
        current: Slot | None = slot
        outcome = Outcome.STOPPED
        while current is not None:
            previous = current.version
            outcome, current = SlotRunner(self.ctx, current).serve(self.carrier)
            if current is not None:
                self.ctx.board.count(carried=1)
                log(self.log, logging.INFO, "carried_over", from_version=previous, version=current.version,
                    worker_id=current.worker_id, owner=self.owner, places_gained=current.places_gained,
                    places_loaded=current.places_loaded)
        return outcome

    def _let_go(self) -> None:
        """On stop or failure: release every lease held (or just forget them when abandoning)."""
        ctx = self.ctx
        release = not ctx.abandon
        leases = ctx.leases
        carried = self.carrier.cancel(release=release)
        for m in (leases, carried):
            if m is not None:
                ctx.drop(m, release=release)
