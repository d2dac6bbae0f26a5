"""Opening a claimed slot: the one way a worker gets from a lease to a slot it can serve.

Both paths use :func:`open_slot`: the worker opening the slot it just claimed (:mod:`geo_service.worker`) and the
carry-over opening the slot's next version ahead while the current one is served (:mod:`geo_service.serving.carry`). The
steps (``docs/CONTRACTS.md``, "Worker lifecycle"):

1. heartbeat the lease from now on;
2. read the version's spec (cached per process);
3. ``waiting_stream``: wait until the version's geo stream manifest is published and find the slot's shard
   lineages in it (:func:`~geo_service.pipeline.consumer.shard_lineages`);
4. ``warming``: load the slot's region plus its buffer ring into a transform; a carried slot builds it from the
   transform it serves now and loads only what the slot gains (:func:`~geo_service.pipeline.transform.transform_for_region`);
5. a reader per owned shard, resuming from the lease's checkpoint;
6. mark the lease ``ready``.

What differs between the paths is what may interrupt the opening and who hears how it goes: an :class:`OpenWatch`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from geo_service.adapters.timebase import Flag
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.consumer import shard_lineages
from geo_service.pipeline.transform import GeoTransform, transform_for_region
from geo_service.runtime.lifecycle import OpeningState
from geo_service.serving.context import WorkerContext
from geo_service.serving.slots import Slot, region_of
from geokernel.partition_spec.model import Spec


def _never() -> bool:
    return False


def _always() -> bool:
    return True


def _nothing() -> None:
    return None


def _ignore(why: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class OpenWatch:
    """What may interrupt opening a slot, and who hears how it goes.

    Parameters
    ----------
    stop : Flag
        Set: give the opening up while waiting for the stream (the worker stops, or a carry-over is cancelled).
    retry_s : float
        How often the stream manifest is read while it is missing (doubling up to eight times that).
    on_state : callable
        Told ``(state, spec)`` when the opening enters ``waiting_stream`` and ``warming``.
    dropped : callable
        True when the version will never go live: give the opening up while waiting for the stream.
    on_wait : callable
        Told why after each read that found no manifest.
    check : callable
        Runs before each manifest read (the worker checks its lease there: raises LeaseLost).
    warmed : callable
        Runs once the transform is loaded, before the readers are built (the worker calibrates there once).
    go_on : callable
        The last say before the lease is marked ready: False gives the opening up (may raise LeaseLost).
    """

    stop: Flag
    retry_s: float
    on_state: Callable[[OpeningState, Spec], object]
    dropped: Callable[[], bool] = _never
    on_wait: Callable[[str], object] = _ignore
    check: Callable[[], object] = _nothing
    warmed: Callable[[], object] = _nothing
    go_on: Callable[[], bool] = _always


def open_slot(ctx: WorkerContext, manager: LeaseManager, watch: OpenWatch, *, base: GeoTransform | None = None,
              carried: bool = False) -> Slot | None:
    """Open the slot whose lease ``manager`` holds; None when ``watch`` gave the opening up.

    Parameters
    ----------
    ctx : WorkerContext
    manager : LeaseManager
        Holds the claimed lease; it is heartbeated from now on (the caller drops it when the opening is given up).
    watch : OpenWatch
    base : GeoTransform, optional
        The transform the process serves now: a carried slot builds its own from it.
    carried : bool
        The slot is the next version of one the process serves.

    Raises
    ------
    LeaseLost
        From ``watch.check`` or ``watch.go_on``.
    """
    lease = manager.lease
    assert lease is not None
    ctx.heartbeats.add(manager)
    spec = ctx.specs.get(lease.version)
    worker_id = lease.worker_id
    stream = ctx.stream_name(spec)
    watch.on_state(OpeningState.WAITING_STREAM, spec)
    lineages = shard_lineages(ctx.clients.s3, ctx.config.specs_bucket, spec, worker_id, stop=watch.stop,
                              dropped=watch.dropped, retry_s=watch.retry_s, on_wait=watch.on_wait, check=watch.check)
    if lineages is None:
        return None
    watch.on_state(OpeningState.WARMING, spec)
    region = region_of(spec, worker_id)
    transform, gained = transform_for_region(base, ctx.transform_factory, region, ctx.config.buffer_ring)
    watch.warmed()
    consumers = tuple(ctx.consumer(stream, shards, lease.checkpoint) for shards in lineages)
    if not watch.go_on():
        return None
    manager.mark_ready()
    slot = Slot(manager, spec, worker_id, stream, [s for lineage in lineages for s in lineage], consumers, transform,
                region, int(getattr(transform, "loaded", 0)), gained, carried=carried)
    ctx.output.restore_states(slot)  # a slot taken over goes on from its last holder's states
    return slot
