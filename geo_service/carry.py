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
import threading
import time
from collections.abc import Callable

from geo_service.consumer import ShardConsumer, StreamNotReady, worker_shards
from geo_service.heartbeat import Heartbeats
from geo_service.lease import LeaseManager
from geo_service.logs import get_logger, log
from geo_service.slots import Slot, SpecCache, region_of
from geo_service.transform import GeoTransform, transform_for_region

CLAIMING, WAITING_STREAM, WARMING, READY, FAILED, CANCELLED = (
    "claiming", "waiting_stream", "warming", "ready", "failed", "cancelled")


class CarryOver:
    """Prepares the carried slot ``v<to_version>#<current.worker_id>``; see the module docstring."""

    def __init__(self, current: Slot, to_version: int, *, manager: LeaseManager, specs: SpecCache, kinesis: object,
                 heartbeats: Heartbeats, transform_factory: Callable[[], GeoTransform], buffer_ring: int,
                 retry_s: float, stream_name: Callable[[int], str]) -> None:
        self.current = current
        self.to_version = to_version
        self.worker_id = current.worker_id
        self.manager = manager
        self.specs = specs
        self.kinesis = kinesis
        self.heartbeats = heartbeats
        self.transform_factory = transform_factory
        self.buffer_ring = buffer_ring
        self.retry_s = retry_s
        self.stream_name = stream_name
        self.state = CLAIMING
        self.error: str | None = None
        self.slot: Slot | None = None
        self.started_at = time.time()
        self.ready_at: float | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"carry-v{to_version}", daemon=True)
        self.log = get_logger()

    def start(self) -> CarryOver:
        self._thread.start()
        return self

    @property
    def ready(self) -> bool:
        return self.state == READY and self.slot is not None and not self.heartbeats.lost(self.manager)

    def cancel(self, release: bool = True) -> None:
        """Stop preparing; release the new lease unless told not to (a worker abandoning its leases)."""
        self._cancel.set()
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
        lineages = None
        while lineages is None:
            try:
                lineages = worker_shards(self.kinesis, stream, spec.worker(self.worker_id).shard_keys)
            except StreamNotReady:
                if self._cancel.wait(self.retry_s):
                    return
        self.state = WARMING
        region = region_of(spec, self.worker_id)
        started = time.monotonic()
        transform, gained = transform_for_region(self.current.transform, self.transform_factory, region,
                                                 self.buffer_ring)
        lease = self.manager.lease
        if self._cancel.is_set() or lease is None:
            return
        consumers = tuple(ShardConsumer(self.kinesis, stream, shards, lease.checkpoint) for shards in lineages)
        self.manager.mark_ready()
        self.slot = Slot(self.manager, spec, self.worker_id, stream, [s for lin in lineages for s in lin], consumers,
                         transform, region, int(getattr(transform, "loaded", 0)), gained, carried=True)
        self.ready_at = time.time()
        self.state = READY
        log(self.log, logging.INFO, "carry_ready", version=self.to_version, worker_id=self.worker_id,
            owner=self.manager.owner, region_size=len(region), places_gained=gained,
            places_loaded=self.slot.places_loaded, warm_s=round(time.monotonic() - started, 3),
            prepare_s=round(self.ready_at - self.started_at, 3))
