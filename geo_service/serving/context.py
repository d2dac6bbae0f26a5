"""What one worker process shares between the slots it opens and serves.

A :class:`WorkerContext` is built once per process by the shell (:class:`geo_service.worker.GeoWorker`) and handed
to the parts that work on slots: :func:`~geo_service.serving.opening.open_slot`, the per-slot runner
(:mod:`geo_service.serving.runner`) and the carry-over (:mod:`geo_service.serving.carry`). It holds the configuration,
the AWS clients, the clocks, the spec cache, the heartbeats, the output writer, the metrics, the status board and the
stop flag, plus the few things that change while the process runs: the calibration (measured once), the slot being
served and its lease, and the newest control view seen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from geo_service.adapters.aws import Clients
from geo_service.adapters.logs import get_logger, log
from geo_service.adapters.metrics import WorkerMetrics
from geo_service.adapters.timebase import Timebase
from geo_service.leases.heartbeat import Heartbeats
from geo_service.leases.lease import Clock, LeaseLost, LeaseManager
from geo_service.pipeline.consumer import CallSpacing, ShardConsumer, ShardInfo
from geo_service.pipeline.cost import Calibration
from geo_service.pipeline.geofence_events import GeofenceSink
from geo_service.pipeline.transform import GeoTransform
from geo_service.runtime.config import WorkerConfig
from geo_service.runtime.protection import ScaleInProtection
from geo_service.runtime.status import StatusBoard, WorkerStatus
from geo_service.serving.batches import BatchProcessor
from geo_service.serving.slots import Slot, SpecCache
from geo_service.swap.control import ControlView, read_control
from geokernel.contracts.stream import geo_stream_name
from geokernel.partition_spec.model import Spec


class WorkerContext:
    """The shared parts of one worker process; see the module docstring.

    Parameters
    ----------
    config : WorkerConfig
    clients : Clients
    owner : str
        The lease owner id of this process.
    clock : callable
        Epoch seconds for lease times.
    timebase : Timebase
    transform_factory : callable
        Builds a transform for a slot opened from nothing.
    calibration : Calibration or None
        The CPU calibration, None until the first slot is opened (:meth:`calibration` is then measured).
    protection : ScaleInProtection
        Held while the process holds a lease (after every heartbeat), unless it abandons its leases.
    board : StatusBoard
    metrics : WorkerMetrics, optional
        The process's CloudWatch metrics (default: EMF lines on stdout every ``metrics_interval_s``, deployment
        ``prefix``); each line carries :meth:`ids`.
    """

    def __init__(self, config: WorkerConfig, clients: Clients, *, owner: str, clock: Clock, timebase: Timebase,
                 transform_factory: Callable[[], GeoTransform], calibration: Calibration | None,
                 protection: ScaleInProtection, board: StatusBoard, metrics: WorkerMetrics | None = None) -> None:
        self.config = config
        self.clients = clients
        self.owner = owner
        self.clock = clock
        self.timebase = timebase
        self.transform_factory = transform_factory
        self.calibration = calibration
        self.protection = protection
        self.board = board
        self.log = get_logger()
        self.stop = timebase.event()
        #: True once the process abandons its leases (as if it died): no heartbeat, no release, no protection.
        self.abandon = False
        self.metrics = metrics or WorkerMetrics(config.prefix, interval_s=config.metrics_interval_s,
                                                clock=timebase.monotonic)
        self.metrics.context = self.ids
        self.specs = SpecCache(clients, config.specs_bucket)
        self.heartbeats = Heartbeats(config.heartbeat_s, on_beat=self._protect, paused=lambda: self.abandon,
                                     timebase=timebase)
        bus = config.geofence_event_bus
        self.output = BatchProcessor(clients, config.output_bucket, config.quarantine_bucket, config.costs_bucket,
                                     config.grid_zoom, owner, wall=timebase.time, monotonic=timebase.monotonic,
                                     event_fields=config.event_fields, control_table=config.control_table,
                                     metrics=self.metrics,
                                     sink=GeofenceSink(clients.events, bus) if bus else None)
        self.spacing = CallSpacing()  # GetRecords spacing per shard, shared by the process's consumers
        #: The lease of the slot being opened or served, and the slot being served (not the one carried over).
        self.leases: LeaseManager | None = None
        self.slot: Slot | None = None
        self._seen: ControlView | None = None

    # ------------------------------------------------------------------ status
    def status(self) -> WorkerStatus:
        return self.board.get()

    def set(self, **changes: Any) -> None:
        """Change the status (a new ``state`` must be a legal transition)."""
        self.board.set(**changes)

    def ids(self) -> dict[str, Any]:
        """The ids every log line of the process carries: version and slot served, owner."""
        st = self.board.get()
        return {"version": st.version, "worker_id": st.worker_id, "owner": self.owner}

    # ------------------------------------------------------------------ reads
    def control(self) -> ControlView:
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

    def ids_of(self, version: int) -> frozenset[str]:
        """The slot ids of ``version``'s spec."""
        return frozenset(w.id for w in self.specs.get(version).workers)

    def stream_name(self, spec: Spec) -> str:
        """The geo stream of ``spec``'s version (named in the spec, else derived from the prefix)."""
        return spec.stream_name or geo_stream_name(self.config.prefix, spec.version)

    # ------------------------------------------------------------------ factories
    def manager(self, version: int) -> LeaseManager:
        """A lease manager of ``version`` for this process."""
        return LeaseManager(self.clients.dynamodb, self.config.leases_table, version, self.owner,
                            self.config.lease_s, clock=self.clock)

    def consumer(self, stream: str, shards: list[ShardInfo], checkpoint: Mapping[str, str]) -> ShardConsumer:
        """A reader of one shard lineage, spaced with every other reader of the process."""
        return ShardConsumer(self.clients.kinesis, stream, shards, checkpoint,
                             min_interval_s=self.config.get_records_interval_s, clock=self.timebase.monotonic,
                             spacing=self.spacing, reads=self.clients.kinesis_reads, observe=self.metrics.read)

    # ------------------------------------------------------------------ leases
    def check_lease(self, manager: LeaseManager) -> None:
        """Raise LeaseLost (and forget the lease) if a heartbeat found it taken over, or it expired and another
        owner claimed it since.

        Notes
        -----
        A lease past its expiry that no one claimed is still this process's in the table: it is renewed (a write
        conditional on the owner, as every heartbeat is) and the slot goes on. Giving it up instead left the slot's
        records to no one when the heartbeat thread was starved for a lease (a loaded machine, a carry preparing a
        large region beside it): no other process claims a slot of a version being retired, the next version's
        handover gate timed out, and the records were never read (a quick run lost 308 events so).
        """
        if self.heartbeats.lost(manager):
            manager.forget()
            raise LeaseLost(f"lease of {self.owner!r} lost")
        if not manager.valid():
            if self.abandon:  # as if dead: no write of any kind
                manager.forget()
                raise LeaseLost(f"lease of {self.owner!r} expired (leases abandoned)")
            try:
                manager.heartbeat()  # LeaseLost (and forgotten) when another owner claimed it after it expired
            except LeaseLost as exc:
                raise LeaseLost(f"lease of {self.owner!r} expired and is no longer its own: {exc}") from None
            except Exception as exc:  # not renewed (AWS error): unknown whether it is still ours, so it is not
                manager.forget()
                raise LeaseLost(f"lease of {self.owner!r} expired and could not be renewed: {exc}") from exc
            log(self.log, logging.WARNING, "lease_renewed_late", **self.ids())

    def drop(self, manager: LeaseManager, release: bool = True) -> None:
        """Stop heartbeating ``manager``'s lease; release it (a failure is logged) or just forget it."""
        self.heartbeats.remove(manager)
        if release:
            self._safe_release(manager)
        else:
            manager.forget()

    def _safe_release(self, manager: LeaseManager) -> None:
        try:
            if manager.release():
                log(self.log, logging.INFO, "lease_released", **self.ids())
        except Exception as exc:
            log(self.log, logging.WARNING, "release_failed", error=f"{type(exc).__name__}: {exc}", **self.ids())

    def _protect(self, holds_any: bool) -> None:
        if not self.abandon:
            self.protection.hold(holds_any)
