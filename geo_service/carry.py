"""Carry-over: the process serving ``v<n>#w`` prepares ``v<n+1>#w`` in the background while it keeps serving.

When the deploy plan keeps slot ``w`` (``pk="plan"``, status ``started``, ``w`` in ``kept``), the worker
starts a :class:`CarryOver`. Its thread claims ``v<n+1>#w`` (the lease is heartbeated with the current
one from then on), waits for the new version's geo stream and finds the slot's shard, builds the transform
for the slot's new region from the current one (:func:`~geo_service.transform.transform_for_region`:
only the cells and buffer tiles the slot gains are loaded), and marks the new lease ready. The current
slot goes on reading its shard all the while; after the flip the worker serves the prepared slot beside it
(behind the handover gate, :mod:`geo_service.handover`) until the old one drained, then alone.
:meth:`CarryOver.cancel` drops it (the plan was rolled back, or the worker stops).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from geo_service.aws import Clients
from geo_service.consumer import ShardConsumer, ShardInfo, shard_lineages
from geo_service.heartbeat import Heartbeats
from geo_service.lease import LeaseManager
from geo_service.logs import get_logger, log
from geo_service.slots import Slot, SpecCache, region_of
from geo_service.timebase import SYSTEM, Task, Timebase
from geo_service.transform import GeoTransform, transform_for_region

CLAIMING, WAITING_STREAM, WARMING, READY, FAILED, CANCELLED = (
    "claiming", "waiting_stream", "warming", "ready", "failed", "cancelled")


class CarryOver:
    """Prepares the carried slot ``v<to_version>#<current.worker_id>``; see the module docstring."""

    def __init__(self, current: Slot, to_version: int, *, manager: LeaseManager, specs: SpecCache, clients: Clients,
                 specs_bucket: str, heartbeats: Heartbeats, transform_factory: Callable[[], GeoTransform],
                 buffer_ring: int, retry_s: float, stream_name: Callable[[int], str],
                 consumer: Callable[[str, list[ShardInfo], Mapping[str, str]], ShardConsumer],
                 timebase: Timebase = SYSTEM) -> None:
        self.current = current
        self.to_version = to_version
        self.worker_id = current.worker_id
        self.manager = manager
        self.specs = specs
        self.clients = clients
        self.specs_bucket = specs_bucket
        self.heartbeats = heartbeats
        self.transform_factory = transform_factory
        self.buffer_ring = buffer_ring
        self.retry_s = retry_s
        self.stream_name = stream_name
        self.consumer = consumer
        self.timebase = timebase
        self.state = CLAIMING
        self.error: str | None = None
        self.slot: Slot | None = None
        self.started_at = timebase.time()
        self.ready_at: float | None = None
        self._cancel = timebase.event()
        self._thread: Task | None = None
        self.log = get_logger()

    def start(self) -> CarryOver:
        self._thread = self.timebase.spawn(self._run, f"carry-v{self.to_version}")
        return self

    @property
    def ready(self) -> bool:
        return self.state == READY and self.slot is not None and not self.heartbeats.lost(self.manager)

    def cancel(self, release: bool = True) -> None:
        """Stop preparing; release the new lease unless told not to (a worker abandoning its leases)."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.heartbeats.remove(self.manager)
        if release and self.manager.lease is not None:
            try:
                self.manager.release()
            except Exception as exc:  # the lease then expires on its own
                log(self.log, logging.WARNING, "carry_release_failed", error=f"{type(exc).__name__}: {exc}",
                    version=self.to_version, worker_id=self.worker_id)
        else:
            self.manager.forget()
        if self.state != READY:
            self.state = CANCELLED

    def _run(self) -> None:
        try:
            self._prepare()
        except Exception as exc:
            self.state, self.error = FAILED, f"{type(exc).__name__}: {exc}"
            log(self.log, logging.ERROR, "carry_failed", error=self.error, version=self.to_version,
                worker_id=self.worker_id, owner=self.manager.owner)

    def _prepare(self) -> None:
        while self.manager.claim(self.worker_id) is None:
            if self._cancel.wait(self.retry_s):
                return
        self.heartbeats.add(self.manager)
        log(self.log, logging.INFO, "carry_claimed", version=self.to_version, worker_id=self.worker_id,
            owner=self.manager.owner, from_version=self.current.version)
        spec = self.specs.get(self.to_version)
        stream = spec.stream_name or self.stream_name(self.to_version)
        self.state = WAITING_STREAM
        lineages = shard_lineages(self.clients.s3, self.specs_bucket, spec, self.worker_id, stop=self._cancel,
                                  retry_s=self.retry_s)
        if lineages is None:
            return
        self.state = WARMING
        region = region_of(spec, self.worker_id)
        started = self.timebase.monotonic()
        transform, gained = transform_for_region(self.current.transform, self.transform_factory, region,
                                                 self.buffer_ring)
        lease = self.manager.lease
        if self._cancel.is_set() or lease is None:
            return
        consumers = tuple(self.consumer(stream, shards, lease.checkpoint) for shards in lineages)
        self.manager.mark_ready()
        self.slot = Slot(self.manager, spec, self.worker_id, stream, [s for lin in lineages for s in lin], consumers,
                         transform, region, int(getattr(transform, "loaded", 0)), gained, carried=True)
        self.ready_at = self.timebase.time()
        self.state = READY
        log(self.log, logging.INFO, "carry_ready", version=self.to_version, worker_id=self.worker_id,
            owner=self.manager.owner, region_size=len(region), places_gained=gained,
            places_loaded=self.slot.places_loaded, warm_s=round(self.timebase.monotonic() - started, 3),
            prepare_s=round(self.ready_at - self.started_at, 3))
