"""Processing a slot's batches: decode, locate, transform into an output buffer; flush it; then checkpoint.

A batch's enriched rows (and quarantine rows) go to the slot's :class:`OutputBuffer`; :meth:`BatchProcessor.flush`
writes the buffer as **one** S3 object (``enriched/v<v>/<worker>/<epoch_ms>.jsonl``, plus one quarantine object
when there are bad records) and only then moves the lease checkpoint of every shard the buffer covers (one
``UpdateItem``), so a successor resuming from the checkpoint re-processes at most what was buffered
(at-least-once; consumers dedupe by ``event_id``), and a checkpoint never passes a record that was not written.

Why buffer: one object and one checkpoint per GetRecords batch is about one S3 PUT a second per worker
(``$0.005`` per 1,000 PUTs, https://aws.amazon.com/s3/pricing/: ~$430 a day at 1,000 workers) and objects under
128 KB are never moved to Standard-IA by a lifecycle rule
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-transition-general-considerations.html). A flush
is due when the oldest buffered row is ``flush_s`` old or the buffer holds ``flush_bytes`` (:meth:`OutputBuffer.due`);
the worker flushes sooner when others wait for it (a swap's handover reads its caught-up time, which moves only
with a flush) and always before it marks a slot drained or releases it.

Every enriched record carries the routing ids, the processing process (``owner``) and when its batch was
processed (``processed_at``, epoch ms), so the order of processing across a swap can be checked from the output.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from geo_service.aws import Clients, put_json, put_jsonl, put_lines
from geo_service.buffer import OutputBuffer
from geo_service.consumer import Batch
from geo_service.cost import CostTracker
from geo_service.logs import get_logger, log
from geo_service.records import BadRecord, Event, decode_event, enriched_record
from geo_service.slots import Slot
from geo_service.transform import stateful_of
from partitioner.contracts.cost import cost_key
from partitioner.contracts.enriched import enriched_key
from partitioner.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from partitioner.contracts.quarantine import TRANSFORM_ERROR, geo_quarantine_key
from partitioner.geo.tiles import arrays_to_quadkeys, tiles_xy


@dataclass(frozen=True)
class BatchResult:
    """What one batch produced (rows are buffered, not yet written)."""

    records: int
    events_out: int
    strays: int
    quarantined: int


@dataclass(frozen=True)
class FlushResult:
    """What one flush wrote: rows, quarantine rows, objects and the checkpoints it moved."""

    rows: int
    quarantined: int
    objects: int
    checkpoints: Mapping[str, str]


def apply_of(slot: Slot) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The slot's per-event call: the transform's ``apply``, or for a stateful transform ``apply_stateful`` with the
    entity's state from the slot's store (:meth:`geo_service.state.EntityStates.applier`), in processing order."""
    stateful = stateful_of(slot.transform)
    if stateful is None or slot.states is None:
        return slot.transform.apply
    return slot.states.applier(stateful)


class BatchProcessor:
    """Transforms a slot's batches into its buffer, writes the buffer, and writes cost reports (one per process).

    Parameters
    ----------
    clients : Clients
    output_bucket, quarantine_bucket, costs_bucket : str
    grid_zoom : int
    owner : str
    wall : callable
        Epoch seconds (output keys and ``processed_at``).
    monotonic : callable
        Monotonic seconds (the buffer's age).
    event_fields : EventFields
        Which JSON key of an event holds each field (``EVENT_FIELDS``).
    """

    def __init__(self, clients: Clients, output_bucket: str, quarantine_bucket: str, costs_bucket: str,
                 grid_zoom: int, owner: str, *, wall: Callable[[], float], monotonic: Callable[[], float],
                 event_fields: EventFields = DEFAULT_EVENT_FIELDS) -> None:
        self.clients = clients
        self.output_bucket = output_bucket
        self.quarantine_bucket = quarantine_bucket
        self.costs_bucket = costs_bucket
        self.grid_zoom = grid_zoom
        self.owner = owner
        self.wall = wall
        self.monotonic = monotonic
        self.event_fields = event_fields
        self.log = get_logger()
        self._last_ms = 0
        self._last_cost_s = 0

    def process(self, batch: Batch, slot: Slot, tracker: CostTracker) -> BatchResult:
        """Transform ``batch`` read from ``slot``'s shard into the slot's buffer (written by :meth:`flush`)."""
        ms = self._unique_ms()
        events: list[Event] = []
        bad: list[BadRecord] = []
        for rec in batch.records:
            decoded = decode_event(rec.data, f"{slot.stream}/{rec.shard_id}/{rec.sequence_number}", self.event_fields)
            (bad if isinstance(decoded, BadRecord) else events).append(decoded)  # type: ignore[arg-type]
        rows, strays = self._transform(events, slot, tracker, bad, batch.shard_id, ms)
        buf = slot.output
        if rows or bad or batch.checkpoint_at is not None:
            if buf.since is None:
                buf.since = self.monotonic()
            for row in rows:
                line = json.dumps(row, separators=(",", ":"), default=str)
                buf.lines.append(line)
                buf.bytes += len(line) + 1
            buf.bad += [b.to_dict() for b in bad]
            last = batch.checkpoint_at  # a gated batch stops before the first record still held
            if last is not None:
                buf.checkpoints[batch.shard_id] = last
        for b in bad[:5]:
            log(self.log, logging.WARNING, "record_quarantined", reason=b.reason, source=b.source,
                version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        if strays:
            log(self.log, logging.WARNING, "stray_events", count=len(strays), sample=strays[:5], version=slot.version,
                worker_id=slot.worker_id, owner=self.owner)
        return BatchResult(len(batch.records), len(rows), len(strays), len(bad))

    def flush(self, slot: Slot) -> FlushResult | None:
        """Write the slot's buffer (one object each for output and quarantine), then move its checkpoints.

        Returns None when the buffer was empty. A failed write raises and leaves the buffer and checkpoints as
        they were (the next flush retries; a successor re-reads from the old checkpoint).
        """
        buf = slot.output
        if buf.empty:
            return None
        ms = self._unique_ms()
        objects = 0
        if buf.lines:
            put_lines(self.clients.s3, self.output_bucket, enriched_key(slot.version, slot.worker_id, ms), buf.lines)
            objects += 1
        if buf.bad:
            put_jsonl(self.clients.s3, self.quarantine_bucket, geo_quarantine_key(slot.version, slot.worker_id, ms),
                      buf.bad)
            objects += 1
        if buf.checkpoints:
            slot.leases.checkpoint_many(buf.checkpoints)
        result = FlushResult(len(buf.lines), len(buf.bad), objects, dict(buf.checkpoints))
        slot.output = OutputBuffer()
        return result

    def _transform(self, events: list[Event], slot: Slot, tracker: CostTracker, bad: list[BadRecord], shard_id: str,
                   processed_ms: int) -> tuple[list[dict[str, Any]], list[str]]:
        rows: list[dict[str, Any]] = []
        strays: list[str] = []
        if not events:
            return rows, strays
        lon = np.array([e.lon for e in events])
        lat = np.array([e.lat for e in events])
        owners = slot.index.locate(lon, lat, [e.entity_id for e in events])
        gx, gy = tiles_xy(lon, lat, self.grid_zoom)
        grid_qks = arrays_to_quadkeys(gx, gy, self.grid_zoom)
        apply = apply_of(slot)
        for ev, owner_i, qk in zip(events, owners, grid_qks, strict=True):
            pid = slot.spec.partitions[int(owner_i)].id
            stray = pid not in slot.partition_ids
            if stray:
                strays.append(ev.event_id)
            try:
                fields = tracker.measure(qk, lambda ev=ev: apply(ev.fields))  # type: ignore[misc]
            except Exception as exc:
                bad.append(BadRecord(f"{TRANSFORM_ERROR}: {type(exc).__name__}: {exc} for event {ev.event_id!r}",
                                     json.dumps(ev.fields, default=str), f"{slot.stream}/{shard_id}/event:{ev.event_id}"))
                continue
            rows.append(enriched_record(ev, fields, spec_version=slot.version, partition_id=pid,
                                        worker_id=slot.worker_id, stray=stray, owner=self.owner,
                                        processed_at=processed_ms))
        return rows, strays

    def report_costs(self, tracker: CostTracker, slot: Slot, force: bool) -> bool:
        """Write a cost report when one is due (or ``force``) and the interval had events; True if written."""
        if not (tracker.due() or force):
            return False
        report = tracker.take()
        if report.total_events == 0:
            return False
        epoch_s = max(int(report.ended_at), self._last_cost_s + 1)
        self._last_cost_s = epoch_s
        body = report.to_dict(slot.version, slot.worker_id, [p.id for p in slot.spec.partitions_of(slot.worker_id)])
        put_json(self.clients.s3, self.costs_bucket, cost_key(slot.version, slot.worker_id, epoch_s), body)
        log(self.log, logging.INFO, "cost_reported", events=report.total_events, quadkeys=len(report.events),
            interval_s=round(report.interval_s, 3), version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        return True

    def _unique_ms(self) -> int:
        ms = max(int(self.wall() * 1000), self._last_ms + 1)
        self._last_ms = ms
        return ms
