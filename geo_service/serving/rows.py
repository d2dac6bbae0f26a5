"""A read batch's records to output rows: decode them all, locate them all, transform them as a batch, build each row
once and write its JSON line (the worker's hot path, issue #60; :mod:`geo_service.serving.batches` drives it).

* **Decode**: each record's bytes by :func:`geo_service.pipeline.records.read_event` (orjson, ``json``'s values);
  markers and stamps as before.
* **Locate**: every event's partition (the slot's :class:`~geokernel.partition_spec.index.SpecIndex`) and grid cell in
  one vectorised call.
* **Transform**: a transform with a batch form gets the whole batch at once (:func:`~geo_service.pipeline.transform.
  batch_form`: one KD-tree query for the reverse geocoder); a stateful one that prepares its batches
  (:func:`~geo_service.pipeline.transform.prepared_form`) does its state-free part for the batch at once and the rest
  per event, in the slot's order behind its handoff gate; any other is called per event, as before. A batch call that
  raises is not trusted: the batch goes through the per-event calls, so a bad event is quarantined alone.
* **Rows**: :func:`~geo_service.pipeline.records.enriched_record` builds each row once; :func:`~geo_service.pipeline.
  codec.dumps_row` writes it (the text ``json.dumps`` wrote).

**Cost per cell within a batch.** The whole path's thread CPU time of a batch (its GetRecords parse included:
:attr:`geo_service.pipeline.consumer.Batch.read_cpu_s`) is charged to the cells of its events: the call of a transform
without a batch form is timed and charged to its event's cell, as before; the rest of the batch (decode, locate, a
batch transform call, a prepared stateful transform's per-event rest, rows, lines) is split over its events evenly, so
each cell gets it in proportion to its events in the batch (timing each event's stateful rest would add two
thread-clock reads, ~1.5 us, to every event). A batch transform's cost therefore reaches the cells as the batch's mean: cells whose
events cost more than others' *inside one batch* are told apart only by a per-event transform.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from geo_service.pipeline.codec import dumps_row, plain
from geo_service.pipeline.consumer import KinesisRecord
from geo_service.pipeline.cost import CostTracker
from geo_service.pipeline.records import BadRecord, Event, enriched_record, read_event
from geo_service.pipeline.transform import batch_form, prepared_form, stateful_of
from geo_service.serving.slots import Slot
from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.handoff import (
    MARKER_MAGIC,
    STAMP_MAGIC,
    Marker,
    Stamp,
    decode_marker,
    is_marker,
    split_stamped,
)
from geokernel.contracts.quarantine import BAD_STAMP
from geokernel.events import Rejection
from geokernel.geo.tiles import arrays_to_quadkeys, tiles_xy

Fields = dict[str, Any]
#: The first byte of a handoff marker's and a stamped record's magic (:mod:`geokernel.contracts.handoff`).
_HANDOFF = MARKER_MAGIC[:1]
assert STAMP_MAGIC[:1] == _HANDOFF
#: The per-event call of a slot's transform (``apply``, or ``apply_stateful`` with the entity's stored state).
Apply = Callable[[Mapping[str, Any]], Fields]


class Decoded(NamedTuple):
    """One record of a batch, decoded: an event (with its handoff stamp, if any), a marker or a bad record, its
    Kinesis arrival time (epoch seconds; 0 when the reader did not get one), and whether the event's fields are plain
    JSON (:func:`geo_service.pipeline.codec.loads`)."""

    item: Event | BadRecord | Marker
    stamp: Stamp | None
    arrival_s: float
    plain: bool = False


def decode_records(records: Sequence[KinesisRecord], stream: str, fields: EventFields, now: int) -> list[Decoded]:
    """Decode a batch's records; ``now`` (epoch ms) is the clock the plausible window of their times ends after."""
    out: list[Decoded] = []
    for rec in records:
        data = body = rec.data
        stamp: Stamp | None = None
        if data[:1] == _HANDOFF:  # a marker or a stamped event (both magics start with a NUL byte; JSON never does)
            try:
                if is_marker(data):
                    out.append(Decoded(decode_marker(data), None, rec.arrival_s))
                    continue
                stamp, body = split_stamped(data)
            except ContractError as exc:
                bad = BadRecord(f"{BAD_STAMP}: {exc}", data.decode("utf-8", errors="replace"), source(stream, rec))
                out.append(Decoded(bad, None, rec.arrival_s))
                continue
        parsed, is_plain = read_event(body, fields, now)
        if isinstance(parsed, Rejection):
            out.append(Decoded(BadRecord(parsed.reason, body.decode("utf-8", errors="replace"), source(stream, rec)),
                               stamp, rec.arrival_s))
        else:
            out.append(Decoded(parsed, stamp, rec.arrival_s, is_plain))
    return out


def source(stream: str, rec: KinesisRecord) -> str:
    """A record's place in its stream, named by a quarantine record: ``<stream>/<shard>/<sequence>``."""
    return f"{stream}/{rec.shard_id}/{rec.sequence_number}"


def locate(events: Sequence[Event], slot: Slot, grid_zoom: int) -> tuple[list[str], list[str]]:
    """Each event's owning partition id in the slot's spec and its grid quadkey (vectorised)."""
    if not events:
        return [], []
    lon = np.fromiter((e.lon for e in events), dtype=np.float64, count=len(events))
    lat = np.fromiter((e.lat for e in events), dtype=np.float64, count=len(events))
    owners = slot.index.locate(lon, lat, [e.entity_id for e in events])
    gx, gy = tiles_xy(lon, lat, grid_zoom)
    parts = slot.spec.partitions
    return [parts[i].id for i in owners.tolist()], [str(q) for q in arrays_to_quadkeys(gx, gy, grid_zoom)]


class Prepared(NamedTuple):
    """What a batch's transform did for the whole batch: each event's fields (a stateless batch form), or each event's
    prepared value (a stateful transform that prepares), or neither (per-event calls); and its CPU seconds."""

    fields: list[Fields] | None
    prepared: Sequence[Any] | None
    cpu_s: float


def prepare(slot: Slot, events: Sequence[Event]) -> Prepared:
    """The slot's transform over the whole batch, when it has a batch form (see the module docstring)."""
    if not events:
        return Prepared(None, None, 0.0)
    whole = batch_form(slot.transform)
    ready = prepared_form(slot.transform) if slot.states is not None else None
    if whole is None and ready is None:
        return Prepared(None, None, 0.0)
    t0 = time.thread_time()
    docs = [e.fields for e in events]
    try:
        if whole is not None:
            got = whole(docs)
            return Prepared(got, None, time.thread_time() - t0) if len(got) == len(docs) else \
                Prepared(None, None, time.thread_time() - t0)
        assert ready is not None
        done = ready.prepare_batch(docs)
        return Prepared(None, done, time.thread_time() - t0) if len(done) == len(docs) else \
            Prepared(None, None, time.thread_time() - t0)
    except Exception:  # not trusted: the per-event calls quarantine the bad event alone
        return Prepared(None, None, time.thread_time() - t0)


def per_event(slot: Slot, batch: Prepared) -> Callable[[int, Event], Fields]:
    """``(k, event) -> fields`` of the ``k``-th event of the batch: its precomputed fields, its prepared value through
    the stateful rest (the entity's state from the slot's store), or the transform's per-event call."""
    if batch.fields is not None:
        got = batch.fields
        return lambda k, ev: got[k]
    if batch.prepared is not None and slot.states is not None:
        ready = prepared_form(slot.transform)
        assert ready is not None
        run, prepared = slot.states.prepared_applier(ready), batch.prepared
        return lambda k, ev: run(ev.fields, prepared[k])
    one = apply_of(slot)
    return lambda k, ev: one(ev.fields)


def apply_of(slot: Slot) -> Apply:
    """The slot's per-event call: the transform's ``apply``, or for a stateful transform ``apply_stateful`` with the
    entity's state from the slot's store (:meth:`geo_service.entity.store.EntityStates.applier`), in processing order."""
    stateful = stateful_of(slot.transform)
    if stateful is None or slot.states is None:
        return slot.transform.apply
    return slot.states.applier(stateful)


def line_of(ev: Event, is_plain: bool, fields: Fields, slot: Slot, pid: str, stray: bool, owner: str,
            processed_at: int) -> str:
    """The enriched JSON line of one event (the row built once)."""
    row = enriched_record(ev, fields, spec_version=slot.version, partition_id=pid, worker_id=slot.worker_id,
                          stray=stray, owner=owner, processed_at=processed_at)
    return dumps_row(row, is_plain and plain(fields))


def charge(tracker: CostTracker, cells: Sequence[str], cpu_s: float) -> None:
    """Charge ``cpu_s`` of a batch to the cells of its events (one entry per event), in proportion to their events;
    the events themselves were counted as they ran."""
    if not cells or cpu_s <= 0:
        return
    share = cpu_s / len(cells)
    for qk, n in Counter(cells).items():
        tracker.record(qk, share * n, events=0)
