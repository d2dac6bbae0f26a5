"""The smoke run's events: probes (the events whose delivery is checked) and ticks, put to the ingest stream.

An event (docs/CONTRACTS.md "Events") has ``event_id``, ``entity_id``, ``ts`` (epoch ms), ``lat``, ``lon`` under the
keys the deployment's ``event_fields`` maps them to, and a ``place`` field (passed through to the output). Places
are real cities (:data:`PLACES`), each event a few hundred metres from its city's centre. The Kinesis partition key
is the ``entity_id``.

**Ticks.** The Spark job reads the ingest stream from LATEST (it starts minutes after the stack is up, so it may
never see the probes) and closes an event-time window only when a later event moves its watermark past the
window's end plus ``watermark_s``. So, while no spec is active, the smoke run puts a few ticks (ordinary events
with ids ``<run>-tick-...``) at every poll: they make windows close, a snapshot, and the first spec. They are
routed and enriched like the probes, and counted apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from georebal.errors import SmokeError
from georebal.smoke.clock import Clock

#: (name, lat, lon) of the city centres the events are spread over.
PLACES: tuple[tuple[str, float, float], ...] = (
    ("Berlin", 52.5200, 13.4050), ("Paris", 48.8566, 2.3522), ("London", 51.5072, -0.1276),
    ("Madrid", 40.4168, -3.7038), ("Rome", 41.9028, 12.4964), ("Warsaw", 52.2297, 21.0122),
    ("New York", 40.7128, -74.0060), ("Tokyo", 35.6762, 139.6503), ("Sao Paulo", -23.5505, -46.6333),
    ("Sydney", -33.8688, 151.2093),
)
ENTITIES = 50  # probes are spread over this many entities (partition keys), i.e. over the ingest shards
BATCH = 500  # PutRecords takes at most 500 records
PUT_ATTEMPTS = 8  # a record Kinesis refused (throttled) is put again, backing off, this many times in all
TICKS_PER_POLL = 5

Event = dict[str, Any]


def event(fields: EventFields, event_id: str, entity_id: str, ts_ms: int, n: int) -> Event:
    """One event at the ``n``-th place: city ``n % 10``, offset by up to ~500 m (deterministic)."""
    name, lat, lon = PLACES[n % len(PLACES)]
    d_lat, d_lon = ((n * 37) % 101 - 50) * 1e-4, ((n * 53) % 101 - 50) * 1e-4
    e_id, ent, ts, la, lo = fields.names
    return {e_id: event_id, ent: entity_id, ts: ts_ms, la: round(lat + d_lat, 6), lo: round(lon + d_lon, 6),
            "place": name}


def probe_ids(run_id: str, count: int) -> list[str]:
    return [f"{run_id}-{i:05d}" for i in range(count)]


def probes(run_id: str, count: int, ts_ms: int, fields: EventFields = DEFAULT_EVENT_FIELDS) -> list[Event]:
    """``count`` probes ``<run>-00000``..., over :data:`ENTITIES` entities ``<run>-e000``..., all at ``ts_ms``."""
    return [event(fields, eid, f"{run_id}-e{i % ENTITIES:03d}", ts_ms, i)
            for i, eid in enumerate(probe_ids(run_id, count))]


def ticks(run_id: str, poll: int, ts_ms: int, fields: EventFields = DEFAULT_EVENT_FIELDS) -> list[Event]:
    """The :data:`TICKS_PER_POLL` ticks of the ``poll``-th wait, ids ``<run>-tick-<poll>-<j>``."""
    return [event(fields, f"{run_id}-tick-{poll:04d}-{j}", f"{run_id}-tick-{j}", ts_ms, poll * TICKS_PER_POLL + j)
            for j in range(TICKS_PER_POLL)]


def put_events(kinesis: Any, stream: str, events: Sequence[Event], clock: Clock, *,
               fields: EventFields = DEFAULT_EVENT_FIELDS,
               progress: Callable[[int, int], None] = lambda done, total: None) -> int:
    """Put ``events`` with ``PutRecords`` in batches of :data:`BATCH`, each partitioned by its entity id; a record
    Kinesis refuses is put again (backing off) up to :data:`PUT_ATTEMPTS` times. ``progress(done, total)`` after
    each batch; returns how many were put. Raises :class:`SmokeError` naming the refusals when some never got in."""
    entity = fields.entity_id
    done = 0
    for start in range(0, len(events), BATCH):
        records = [{"Data": json.dumps(e, separators=(",", ":")).encode(), "PartitionKey": str(e[entity])}
                   for e in events[start:start + BATCH]]
        _put_batch(kinesis, stream, records, clock)
        done += len(records)
        progress(done, len(events))
    return done


def _put_batch(kinesis: Any, stream: str, records: list[dict[str, Any]], clock: Clock) -> None:
    pending, errors = records, []
    for attempt in range(PUT_ATTEMPTS):
        if attempt:
            clock.sleep(min(0.2 * 2 ** attempt, 5.0))
        answer = kinesis.put_records(StreamName=stream, Records=pending)
        if not answer.get("FailedRecordCount"):
            return
        results = answer["Records"]
        errors = sorted({r["ErrorCode"] for r in results if r.get("ErrorCode")})
        pending = [rec for rec, res in zip(pending, results, strict=True) if res.get("ErrorCode")]
    raise SmokeError(f"{len(pending)} event(s) could not be put to the ingest stream {stream!r} after "
                     f"{PUT_ATTEMPTS} attempts ({', '.join(errors)})")
