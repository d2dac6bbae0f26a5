"""Processing a slot's batches: decode, locate, transform into an output buffer; flush it; then checkpoint.

A batch's enriched rows (and quarantine rows) go to the slot's :class:`OutputBuffer`; :meth:`BatchProcessor.flush`
writes the buffer as one gzip'd S3 object per event hour it holds (``enriched/dt=<day>/hour=<HH>/v<v>-<worker>-
<epoch_ms>-<seq>.jsonl.gz``, :func:`geokernel.contracts.enriched.enriched_key`: usually one, two around the turn of
an hour or with late events; plus one quarantine object when there are bad records) and only then moves the lease
checkpoint of every shard the buffer covers (one ``UpdateItem``), so a successor resuming from the checkpoint
re-processes at most what was buffered (at-least-once; consumers dedupe by ``event_id``), and a checkpoint never
passes a record that was not written. An event's hour is its own time (its ``ts_ms``, :func:`geokernel.timestamps.event_time_ms`),
so a late event lands in its hour's folder with the flush that holds it.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from geo_service.adapters.aws import Clients, put_enriched, put_json, put_jsonl
from geo_service.adapters.logs import get_logger, log
from geo_service.adapters.metrics import WorkerMetrics
from geo_service.entity.handoff import HandoffStore
from geo_service.pipeline.buffer import OutputBuffer
from geo_service.pipeline.consumer import Batch
from geo_service.pipeline.cost import CostTracker
from geo_service.pipeline.records import BadRecord, Event, decode_event, enriched_record
from geo_service.pipeline.transform import stateful_of
from geo_service.serving.slots import Slot
from geokernel.contracts.cost import cost_key
from geokernel.contracts.enriched import enriched_key
from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.handoff import Marker, Stamp, decode_marker, is_marker, split_stamped
from geokernel.contracts.quarantine import BAD_STAMP, TRANSFORM_ERROR, geo_quarantine_key
from geokernel.events import ValidEvent
from geokernel.geo.tiles import arrays_to_quadkeys, tiles_xy
from geokernel.timestamps import event_time_ms

#: Seconds between two fetches of the states a slot's held entities wait for (one BatchGetItem per 100 entities).
FETCH_EVERY_S = 0.25
#: Seconds between two snapshots of a stateful slot's states, which its checkpoints move with (one PutObject each).
STATE_SNAPSHOT_S = 10.0
#: Least seconds between two ``state_calls`` log lines of a process (the local report times the handoff calls by them).
CALLS_LOG_EVERY_S = 1.0


class Decoded(NamedTuple):
    """One record of a batch, decoded: an event (with its handoff stamp, if any), a marker or a bad record, and
    its Kinesis arrival time (epoch seconds; 0 when the reader did not get one)."""

    item: Event | BadRecord | Marker
    stamp: Stamp | None
    arrival_s: float


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
    entity's state from the slot's store (:meth:`geo_service.entity.store.EntityStates.applier`), in processing order."""
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
    metrics : WorkerMetrics, optional
        The process's metrics: each event's transform time and failure, each flush's rows and age (default: none).
    """

    def __init__(self, clients: Clients, output_bucket: str, quarantine_bucket: str, costs_bucket: str,
                 grid_zoom: int, owner: str, *, wall: Callable[[], float], monotonic: Callable[[], float],
                 event_fields: EventFields = DEFAULT_EVENT_FIELDS, control_table: str = "",
                 metrics: WorkerMetrics | None = None) -> None:
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
        self._handoffs: HandoffStore | None = None
        #: The batch being processed collects its transform errors here; a held event released later writes its
        #: error straight into its slot's buffer.
        self._batch_bad: list[BadRecord] | None = None
        self.log = get_logger()
        self._last_ms = 0
        self._last_cost_s = 0
        self._calls_logged: tuple[float, dict[str, int]] = (0.0, {})  # the last state_calls line: (when, calls)

    @property
    def handoffs(self) -> HandoffStore:
        """The state handoff's AWS side (made on first use: only a stateful slot needs it)."""
        if self._handoffs is None:
            self._handoffs = HandoffStore(self.clients.dynamodb, self.control_table, self.clients.s3,
                                          self.output_bucket, wall=self.wall, clock=self.monotonic)
        return self._handoffs

    def process(self, batch: Batch, slot: Slot, tracker: CostTracker) -> BatchResult:
        """Transform ``batch`` read from ``slot``'s shard into the slot's buffer (written by :meth:`flush`).

        With state handoff (stamped records, :mod:`geo_service.entity.handoff`) the slot's gate may hold an entity's events
        until its state is here; the shard's checkpoint then stays before them."""
        ms = self._unique_ms()
        items: list[Decoded] = []
        bad: list[BadRecord] = []
        for rec in batch.records:
            source = f"{slot.stream}/{rec.shard_id}/{rec.sequence_number}"
            items.append(Decoded(*self._decode(rec.data, source), rec.arrival_s))
        buf = slot.output
        before = buf.rows
        self._batch_bad = bad
        try:
            strays = self._transform(items, slot, tracker, bad, batch.shard_id, ms)
        finally:
            self._batch_bad = None
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

    def _decode(self, data: bytes, source: str) -> tuple[Event | BadRecord | Marker, Stamp | None]:
        try:
            if is_marker(data):
                return decode_marker(data), None
            stamp, body = split_stamped(data)
        except ContractError as exc:
            return BadRecord(f"{BAD_STAMP}: {exc}", data.decode("utf-8", errors="replace"), source), None
        return decode_event(body, source, self.event_fields), stamp

    def step_handoff(self, slot: Slot) -> None:
        """The slot's state handoff between batches: write states handed over, fetch states waited for, and give
        up on those held too long (:mod:`geo_service.entity.handoff`)."""
        gate = slot.gate
        if gate is None:
            return
        gate.recheck()
        now = self.monotonic()
        wants = gate.fetches()
        waited, crossed = len(gate.waits), gate.crossings
        if wants and now >= slot.next_fetch:
            slot.next_fetch = now + FETCH_EVERY_S
            gate.receive(self.handoffs.get(wants))
        late = {e: gate.describe(e) for e, w in gate.wanted.items() if now - w.since > gate.wait_s}
        for e in gate.expire():
            log(self.log, logging.WARNING, "state_not_handed_over", entity_id=e, waited_s=gate.wait_s,
                gate=late.get(e), version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        handed = gate.outbox
        answered: list[float] = []
        if handed:
            self.handoffs.put(handed)
            gate.outbox = []
            written = self.wall()
            answered = [round(max(0.0, written - h.asked_at), 3) for h in handed if h.asked_at]
        if handed or len(gate.waits) > waited:
            # one line per step that moved states: the local report's handoff latency and calls per event;
            # answered_s: per state written for a marker, seconds since the router put that marker (the old
            # slot's part of the new slot's wait)
            log(self.log, logging.INFO, "state_handoff", handed=len(handed),
                waits_s=[round(w, 3) for w in gate.waits[waited:]], answered_s=answered,
                crossings=gate.crossings - crossed,
                calls=dict(self.handoffs.calls),
                version=slot.version, worker_id=slot.worker_id, owner=self.owner)
        self._log_calls(now)
        if slot.output.rows and slot.output.since is None:
            slot.output.since = self.monotonic()

    def _log_calls(self, now: float) -> None:
        """A ``state_calls`` line (the handoff's calls so far, per API) at most every :data:`CALLS_LOG_EVERY_S` while
        they change: the local report splits the calls between steady state and swaps by these times."""
        calls = dict(self.handoffs.calls)
        at, logged = self._calls_logged
        if calls != logged and now - at >= CALLS_LOG_EVERY_S:
            self._calls_logged = (now, calls)
            log(self.log, logging.INFO, "state_calls", calls=calls, owner=self.owner)

    def restore_states(self, slot: Slot) -> None:
        """A slot taken over starts from the states its last holder wrote with its checkpoints; a slot that has no
        checkpoint yet never had any (they move together), so it reads nothing."""
        lease = slot.leases.lease
        if slot.gate is None or slot.states is None or lease is None or not lease.checkpoint:
            return
        snap = self.handoffs.latest(slot.version, slot.worker_id)
        if snap is not None:
            slot.states.restore(snap, f"s3://{self.output_bucket}/state/v{slot.version}/{slot.worker_id}")

    def save_states(self, slot: Slot, *, final: bool) -> None:
        """Write the slot's states (after its output, before its checkpoints; ``final`` when it drained)."""
        if slot.gate is not None and slot.states is not None and (final or slot.states.n or slot.states.gone):
            self.handoffs.save(slot.version, slot.worker_id, slot.states.snapshot(), final=final)

    def flush(self, slot: Slot, final: bool = False) -> FlushResult | None:
        """Write the slot's buffer (one object each for output and quarantine), then move its checkpoints
        (a stateful slot's with a snapshot of its states: :meth:`_checkpoints_due`; ``final`` on its last flush).

        Returns None when the buffer was empty. A failed write raises and leaves the buffer and checkpoints as
        they were (the next flush retries; a successor re-reads from the old checkpoint).
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
        checkpoints = self._checkpoints_due(slot, buf.checkpoints, final)
        if checkpoints:
            slot.leases.checkpoint_many(checkpoints)
        result = FlushResult(buf.rows, len(buf.bad), objects, checkpoints)
        self.metrics.written(result.rows, result.quarantined, self.monotonic() - (buf.since or self.monotonic()))
        slot.output = OutputBuffer()
        return result

    def _checkpoints_due(self, slot: Slot, new: Mapping[str, str], final: bool) -> dict[str, str]:
        """The checkpoints a flush moves: all of them for a stateless slot; for a stateful one (a handoff gate) only
        together with a snapshot of its states, at most every :data:`STATE_SNAPSHOT_S` and on its last flush
        (``final``). A successor re-reads from the checkpoint onto the snapshot, whose event numbers make what it
        already includes copies; one snapshot per flush would cost a ``PutObject`` per flush."""
        if slot.gate is None:
            return dict(new)
        slot.pending_checkpoints.update(new)
        now = self.monotonic()
        if not slot.pending_checkpoints or (not final and now - slot.states_saved_at < STATE_SNAPSHOT_S):
            return {}
        self.save_states(slot, final=False)
        slot.states_saved_at = now
        due, slot.pending_checkpoints = slot.pending_checkpoints, {}
        return due

    def _transform(self, items: list[Decoded], slot: Slot,
                   tracker: CostTracker, bad: list[BadRecord], shard_id: str, processed_ms: int) -> list[str]:
        """Run the batch's events through the transform in shard order (behind the slot's handoff gate, if any);
        rows go to the slot's buffer. Returns the stray event ids."""
        strays: list[str] = []
        events = [d.item for d in items if isinstance(d.item, ValidEvent)]
        located = iter(self._locate(events, slot) if events else [])
        apply = apply_of(slot)

        def run(ev: Event, pid: str, stray: bool, qk: str) -> None:
            started = time.perf_counter()
            try:
                fields = tracker.measure(qk, lambda: apply(ev.fields))
            except Exception as exc:
                self.metrics.transformed(time.perf_counter() - started, failed=True)
                failed = BadRecord(f"{TRANSFORM_ERROR}: {type(exc).__name__}: {exc} for event {ev.event_id!r}",
                                   json.dumps(ev.fields, default=str), f"{slot.stream}/{shard_id}/event:{ev.event_id}")
                if self._batch_bad is not None:
                    self._batch_bad.append(failed)
                else:
                    slot.output.bad.append(failed.to_dict())
                return
            self.metrics.transformed(time.perf_counter() - started)
            row = enriched_record(ev, fields, spec_version=slot.version, partition_id=pid, worker_id=slot.worker_id,
                                  stray=stray, owner=self.owner,
                                  processed_at=processed_ms if self._batch_bad is not None else self._unique_ms())
            slot.output.add(json.dumps(row, separators=(",", ":"), default=str), event_time_ms(ev.fields))

        for it, stamp, arrival_s in items:
            if not isinstance(it, ValidEvent):  # ValidEvent: the class of the alias Event
                self._other(it, slot, bad, shard_id, arrival_s)
                continue
            owner_i, qk = next(located)
            pid = slot.spec.partitions[int(owner_i)].id
            stray = pid not in slot.partition_ids
            if stray:
                strays.append(it.event_id)
            call = functools.partial(run, it, pid, stray, str(qk))
            if slot.gate is None:
                call()
            else:
                slot.gate.offer(it.entity_id, stamp, shard_id, call)
        return strays

    def _locate(self, events: list[Event], slot: Slot) -> list[tuple[Any, Any]]:
        """Each event's owning partition index in the slot's spec and its grid quadkey (vectorised)."""
        lon = np.array([e.lon for e in events])
        lat = np.array([e.lat for e in events])
        owners = slot.index.locate(lon, lat, [e.entity_id for e in events])
        gx, gy = tiles_xy(lon, lat, self.grid_zoom)
        return list(zip(owners, arrays_to_quadkeys(gx, gy, self.grid_zoom), strict=True))

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
