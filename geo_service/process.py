"""Processing one batch of a slot's shard: decode, locate, transform, write output, then checkpoint.

Output is written before the checkpoint moves, so a successor resuming from the lease checkpoint
re-processes at most the batch in flight (at-least-once; consumers dedupe by ``event_id``), and a
checkpoint never passes a record that was not processed. Every enriched record carries the routing
ids, the processing process (``owner``) and when it was processed (``processed_at``, epoch ms), so the
order of processing across a swap can be checked from the output alone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from geo_service.aws import Clients, put_json, put_jsonl
from geo_service.consumer import Batch
from geo_service.cost import CostTracker
from geo_service.logs import get_logger, log
from geo_service.records import BadRecord, Event, decode_event, enriched_record
from geo_service.slots import Slot
from partitioner.contracts import cost_key, enriched_key, geo_quarantine_key
from partitioner.tiles import arrays_to_quadkeys, tiles_xy


@dataclass(frozen=True)
class BatchResult:
    """What one batch produced."""

    records: int
    events_out: int
    strays: int
    quarantined: int


class BatchProcessor:
    """Writes a slot's enriched output, quarantine records and cost reports (one per worker process)."""

    def __init__(self, clients: Clients, output_bucket: str, quarantine_bucket: str, costs_bucket: str,
                 grid_zoom: int, owner: str) -> None:
        self.clients = clients
        self.output_bucket = output_bucket
        self.quarantine_bucket = quarantine_bucket
        self.costs_bucket = costs_bucket
        self.grid_zoom = grid_zoom
        self.owner = owner
        self.log = get_logger()
        self._last_ms = 0
        self._last_cost_s = 0

    def process(self, batch: Batch, slot: Slot, tracker: CostTracker) -> BatchResult:
        """Process ``batch`` read from ``slot``'s shard; the checkpoint moves after the output is written."""
        ms = self._unique_ms()
        events: list[Event] = []
        bad: list[BadRecord] = []
        for rec in batch.records:
            decoded = decode_event(rec.data, f"{slot.stream}/{rec.shard_id}/{rec.sequence_number}")
            (bad if isinstance(decoded, BadRecord) else events).append(decoded)  # type: ignore[arg-type]
        rows, strays = self._transform(events, slot, tracker, bad, batch.shard_id, ms)
        if rows:
            put_jsonl(self.clients.s3, self.output_bucket, enriched_key(slot.version, slot.worker_id, ms), rows)
        if bad:
            put_jsonl(self.clients.s3, self.quarantine_bucket, geo_quarantine_key(slot.version, slot.worker_id, ms),
                      [b.to_dict() for b in bad])
            for b in bad[:5]:
                log(self.log, logging.WARNING, "record_quarantined", reason=b.reason, source=b.source,
                    version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        if strays:
            log(self.log, logging.WARNING, "stray_events", count=len(strays), sample=strays[:5], version=slot.version,
                worker_id=slot.worker_id, owner=self.owner)
        last = batch.checkpoint_at  # a gated batch stops before the first record still held
        if last is not None:
            slot.leases.checkpoint(batch.shard_id, last)
        return BatchResult(len(batch.records), len(rows), len(strays), len(bad))

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
        for ev, owner_i, qk in zip(events, owners, grid_qks, strict=True):
            pid = slot.spec.partitions[int(owner_i)].id
            stray = pid not in slot.partition_ids
            if stray:
                strays.append(ev.event_id)
            try:
                fields = tracker.measure(qk, lambda ev=ev: slot.transform.apply(ev.fields))  # type: ignore[misc]
            except Exception as exc:
                bad.append(BadRecord(f"transform_error: {type(exc).__name__}: {exc} for event {ev.event_id!r}",
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
        ms = max(int(time.time() * 1000), self._last_ms + 1)
        self._last_ms = ms
        return ms
