"""Processing a slot's batches: decode, locate, transform into an output buffer; flush it; then checkpoint.

A batch's enriched rows (and quarantine rows) go to the slot's :class:`OutputBuffer`; :meth:`BatchProcessor.flush`
writes the buffer as one gzip'd S3 object per event hour it holds (``enriched/dt=<day>/hour=<HH>/v<v>-<worker>-
<epoch_ms>-<seq>.jsonl.gz``, :func:`geokernel.contracts.enriched.enriched_key`: usually one, two around the turn of
an hour or with late events; plus one quarantine object when there are bad records), puts the rows' geofence
transitions on the EventBridge bus when one is set (:mod:`geo_service.pipeline.geofence_events`), and only then moves
the lease checkpoint of every shard the buffer covers (one ``UpdateItem``), so a successor resuming from the checkpoint
re-processes at most what was buffered (at-least-once; consumers dedupe by ``event_id``, and the geofence events by
their ``IdempotencyKey``), and a checkpoint never passes a record that was not written, nor a transition that was not
put. An event's hour is its own time (its ``ts_ms``, :func:`geokernel.timestamps.event_time_ms`), so a late event
lands in its hour's folder with the flush that holds it.

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

import functools
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from geo_service.adapters.aws import Clients, put_enriched, put_json, put_jsonl
from geo_service.adapters.logs import get_logger, log
from geo_service.adapters.metrics import WorkerMetrics
from geo_service.entity.handoff import HandoffStore
from geo_service.pipeline.buffer import OutputBuffer
from geo_service.pipeline.consumer import Batch
from geo_service.pipeline.cost import CostTracker
from geo_service.pipeline.geofence_events import GeofenceSink
from geo_service.pipeline.records import BadRecord, Event
from geo_service.serving.rows import Decoded, charge, decode_records, line_of, locate, per_event, prepare
from geo_service.serving.slot_states import SlotStates
from geo_service.serving.slots import Slot
from geokernel.contracts.cost import cost_key
from geokernel.contracts.enriched import HOUR_MS, enriched_key
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.handoff import Marker
from geokernel.contracts.quarantine import TRANSFORM_ERROR, geo_quarantine_key
from geokernel.events import ValidEvent
from geokernel.timestamps import now_ms


@dataclass(frozen=True)
class BatchResult:
    """What one batch produced (rows are buffered, not yet written)."""

    records: int
    events_out: int
    strays: int
    quarantined: int


@dataclass(frozen=True)
class FlushResult:
    """What one flush wrote: rows, quarantine rows, objects, the checkpoints it moved and the geofence events put."""

    rows: int
    quarantined: int
    objects: int
    checkpoints: Mapping[str, str]
    pushed: int = 0


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
    metrics : WorkerMetrics, optional
        The process's metrics: each event's transform time and failure, each flush's rows and age (default: none).
    sink : GeofenceSink, optional
        Puts the rows' geofence transitions on an EventBridge bus at each flush (``GEOFENCE_EVENT_BUS``).
    """

    def __init__(self, clients: Clients, output_bucket: str, quarantine_bucket: str, costs_bucket: str,
                 grid_zoom: int, owner: str, *, wall: Callable[[], float], monotonic: Callable[[], float],
                 event_fields: EventFields = DEFAULT_EVENT_FIELDS, control_table: str = "",
                 metrics: WorkerMetrics | None = None, sink: GeofenceSink | None = None) -> None:
        self.clients = clients
        self.output_bucket = output_bucket
        self.quarantine_bucket = quarantine_bucket
        self.costs_bucket = costs_bucket
        self.grid_zoom = grid_zoom
        self.owner = owner
        self.wall = wall
        self.monotonic = monotonic
        self.event_fields = event_fields
        self.control_table = control_table
        self.metrics = metrics or WorkerMetrics("", interval_s=0, clock=monotonic)
        self.sink = sink
        self.states = SlotStates(clients, control_table, output_bucket, owner, wall=wall, monotonic=monotonic,
                                 logger=get_logger())
        #: The batch being processed collects its transform errors here; a held event released later writes its
        #: error straight into its slot's buffer.
        self._batch_bad: list[BadRecord] | None = None
        self.log = get_logger()
        self._last_ms = 0
        self._last_cost_s = 0

    @property
    def handoffs(self) -> HandoffStore:
        """The state handoff's AWS side (:attr:`geo_service.serving.slot_states.SlotStates.store`)."""
        return self.states.store

    def step_handoff(self, slot: Slot) -> None:
        """The slot's state handoff between batches (:meth:`geo_service.serving.slot_states.SlotStates.step`)."""
        self.states.step(slot)

    def restore_states(self, slot: Slot) -> None:
        """A slot taken over starts from its last holder's states (:meth:`~geo_service.serving.slot_states.SlotStates.restore`)."""
        self.states.restore(slot)

    def save_states(self, slot: Slot, *, final: bool) -> None:
        """Write the slot's states (:meth:`geo_service.serving.slot_states.SlotStates.save`)."""
        self.states.save(slot, final=final)

    def process(self, batch: Batch, slot: Slot, tracker: CostTracker) -> BatchResult:
        """Transform ``batch`` read from ``slot``'s shard into the slot's buffer (written by :meth:`flush`).

        With state handoff (stamped records, :mod:`geo_service.entity.handoff`) the slot's gate may hold an entity's events
        until its state is here; the shard's checkpoint then stays before them."""
        t0 = tracker.cpu_timer()
        ms = self._unique_ms()
        items = decode_records(batch.records, slot.stream, self.event_fields, now_ms())
        bad: list[BadRecord] = []
        buf = slot.output
        before = buf.rows
        self._batch_bad = bad
        try:
            strays, cells, measured = self._transform(items, slot, tracker, bad, batch.shard_id, ms)
        finally:
            self._batch_bad = None
        charge(tracker, cells, tracker.cpu_timer() - t0 + batch.read_cpu_s - measured)  # the whole path, by cell
        rows = buf.rows - before
        if rows or bad or batch.checkpoint_at is not None:
            if buf.since is None:
                buf.since = self.monotonic()
            buf.bad += [b.to_dict() for b in bad]
            last = batch.checkpoint_at  # a gated batch stops before the first record still held
            if last is not None and not (slot.gate is not None and slot.gate.holds(batch.shard_id)):
                buf.checkpoints[batch.shard_id] = last
        for b in bad[:5]:
            log(self.log, logging.WARNING, "record_quarantined", reason=b.reason, source=b.source,
                version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        if strays:
            log(self.log, logging.WARNING, "stray_events", count=len(strays), sample=strays[:5], version=slot.version,
                worker_id=slot.worker_id, owner=self.owner)
        return BatchResult(len(batch.records), rows, len(strays), len(bad))

    def flush(self, slot: Slot, final: bool = False) -> FlushResult | None:
        """Write the slot's buffer (one object per event hour, one for quarantine), put its geofence transitions, then
        move its checkpoints (a stateful slot's with a snapshot of its states: :meth:`_checkpoints_due`; ``final`` on
        its last flush).

        Returns None when the buffer was empty. A failed write, or transitions that cannot be put, raises and leaves
        the buffer and checkpoints as they were (the next flush writes and puts it all again: copies, which consumers
        dedupe; a successor re-reads from the old checkpoint).
        """
        buf = slot.output
        if buf.empty:
            return None
        ms = self._unique_ms()
        objects = 0
        for seq, hour in enumerate(sorted(buf.hours)):  # a failed put raises: the next flush writes them all again
            put_enriched(self.clients.s3, self.output_bucket, enriched_key(hour, slot.version, slot.worker_id, ms, seq),
                         buf.hours[hour])
            objects += 1
        if buf.bad:
            put_jsonl(self.clients.s3, self.quarantine_bucket, geo_quarantine_key(slot.version, slot.worker_id, ms),
                      buf.bad)
            objects += 1
        if buf.pushes and self.sink is not None:  # after the rows are written, before the checkpoints move
            put = self.sink.put(buf.pushes)
            log(self.log, logging.INFO, "geofence_events_put", events=put.entries, calls=put.calls,
                retried=put.retried, version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        checkpoints = self.states.checkpoints_due(slot, buf.checkpoints, final)
        if checkpoints:
            slot.leases.checkpoint_many(checkpoints)
        result = FlushResult(buf.rows, len(buf.bad), objects, checkpoints, len(buf.pushes))
        self.metrics.written(result.rows, result.quarantined, self.monotonic() - (buf.since or self.monotonic()))
        slot.output = OutputBuffer()
        return result

    def _transform(self, items: list[Decoded], slot: Slot, tracker: CostTracker, bad: list[BadRecord],
                   shard_id: str, processed_ms: int) -> tuple[list[str], list[str], float]:
        """Run the batch's events through the transform in shard order (behind the slot's handoff gate, if any), the
        transform's batch form first (:mod:`geo_service.serving.rows`); rows go to the slot's buffer. Returns the stray
        event ids, every event's cell, and the CPU seconds already charged to cells (per-event transform calls)."""
        events = [d.item for d in items if isinstance(d.item, ValidEvent)]
        pids, cells = locate(events, slot, self.grid_zoom)
        batch = prepare(slot, events)
        fields_of = per_event(slot, batch)
        timed = batch.fields is None and batch.prepared is None  # the transform's only call: charged to its cell
        if not timed and slot.gate is None:
            return self._rows(items, batch.fields, fields_of, batch.cpu_s, pids, cells, slot, tracker, bad, shard_id,
                              processed_ms), cells, 0.0
        strays: list[str] = []
        measured = [0.0]
        share = batch.cpu_s / len(events) if events else 0.0

        def run(k: int, ev: Event, is_plain: bool, pid: str, stray: bool, qk: str) -> None:
            started = time.perf_counter()
            t0 = tracker.cpu_timer() if timed else 0.0
            try:
                fields = fields_of(k, ev)
                pushes = self._pushes(ev, fields)  # a bad transition: as a transform error
            except Exception as exc:
                failed = self._failed(ev, exc, slot, shard_id, time.perf_counter() - started)
                if self._batch_bad is not None:
                    self._batch_bad.append(failed)
                else:
                    slot.output.bad.append(failed.to_dict())
                return
            finally:
                spent = tracker.cpu_timer() - t0 if timed else 0.0
                measured[0] += spent if self._batch_bad is not None else 0.0
                tracker.record(qk, spent)
            self.metrics.transformed(time.perf_counter() - started + share)
            at = processed_ms if self._batch_bad is not None else self._unique_ms()
            slot.output.add(line_of(ev, is_plain, fields, slot, pid, stray, self.owner, at), ev.ts_ms)
            slot.output.pushes += pushes

        k = 0
        for it, stamp, arrival_s, is_plain in items:
            if not isinstance(it, ValidEvent):  # ValidEvent: the class of the alias Event
                self._other(it, slot, bad, shard_id, arrival_s)
                continue
            pid, stray = pids[k], pids[k] not in slot.partition_ids
            if stray:
                strays.append(it.event_id)
            if slot.gate is None:
                run(k, it, is_plain, pid, stray, cells[k])
            else:
                slot.gate.offer(it.entity_id, stamp, shard_id, functools.partial(run, k, it, is_plain, pid, stray, cells[k]))
            k += 1
        return strays, cells, measured[0]

    def _rows(self, items: list[Decoded], got: list[dict[str, Any]] | None,
              fields_of: Callable[[int, Event], dict[str, Any]], batch_cpu_s: float, pids: list[str], cells: list[str],
              slot: Slot, tracker: CostTracker, bad: list[BadRecord], shard_id: str, processed_ms: int) -> list[str]:
        """The rows of an ungated batch whose transform ran for the whole batch: its batch form's fields ``got``, or
        a prepared stateful transform's per-event rest (``fields_of``) called here. One loop; the lines go to the
        buffer by event hour at the end, the events are counted by cell (their CPU is the batch's, charged by the
        caller). Returns the stray event ids."""
        strays: list[str] = []
        owner, partition_ids, perf = self.owner, slot.partition_ids, time.perf_counter
        hours: dict[int, list[str]] = {}
        spent = 0.0
        k = 0
        for it, _stamp, arrival_s, is_plain in items:
            if not isinstance(it, ValidEvent):  # ValidEvent: the class of the alias Event
                self._other(it, slot, bad, shard_id, arrival_s)
                continue
            pid = pids[k]
            stray = pid not in partition_ids
            if stray:
                strays.append(it.event_id)
            if got is not None:
                fields = got[k]
            else:
                started = perf()
                try:
                    fields = fields_of(k, it)
                except Exception as exc:
                    bad.append(self._failed(it, exc, slot, shard_id, perf() - started))
                    k += 1
                    continue
                finally:
                    spent += perf() - started
            if self.sink is not None:
                try:
                    slot.output.pushes += self._pushes(it, fields)
                except ValueError as exc:  # a bad transition: as a transform error
                    bad.append(self._failed(it, exc, slot, shard_id, 0.0))
                    k += 1
                    continue
            ms = it.ts_ms  # by the hour of geokernel.contracts.enriched.event_hour
            hours.setdefault(ms - ms % HOUR_MS, []).append(line_of(it, is_plain, fields, slot, pid, stray, owner,
                                                                   processed_ms))
            k += 1
        for hour, lines in hours.items():
            slot.output.add_hour(hour, lines)
        if k:
            self.metrics.transformed_many(batch_cpu_s / k + spent / k, k)
        for qk, n in Counter(cells).items():
            tracker.record(qk, 0.0, events=n)
        return strays

    def _pushes(self, ev: Event, fields: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ``PutEvents`` entries of an event's geofence transitions when a bus is set (none without a sink or
        transitions: :meth:`geo_service.pipeline.geofence_events.GeofenceSink.entries`)."""
        if self.sink is None or not fields.get("transitions"):
            return []
        return self.sink.entries({**ev.fields, **fields})

    def _failed(self, ev: Event, exc: Exception, slot: Slot, shard_id: str, seconds: float) -> BadRecord:
        """The quarantine record of an event its transform raised on after ``seconds`` (a transform error)."""
        self.metrics.transformed(seconds, failed=True)
        return BadRecord(f"{TRANSFORM_ERROR}: {type(exc).__name__}: {exc} for event {ev.event_id!r}",
                         json.dumps(ev.fields, default=str), f"{slot.stream}/{shard_id}/event:{ev.event_id}")

    @staticmethod
    def _other(it: BadRecord | Marker, slot: Slot, bad: list[BadRecord], shard_id: str, arrival_s: float) -> None:
        """A marker (to the gate, with the time the router put it; ignored without a gate) or a bad record
        (quarantined)."""
        if isinstance(it, Marker):
            if slot.gate is not None:
                slot.gate.mark(it, shard_id, put_at=arrival_s or None)
        else:
            bad.append(it)

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
