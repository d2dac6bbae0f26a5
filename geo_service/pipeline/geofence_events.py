"""Geofence transitions pushed to an EventBridge bus, shaped like Amazon Location's geofence events (issue #58).

When ``GEOFENCE_EVENT_BUS`` names a bus, the worker turns each ``transitions`` item of every enriched record it writes
(``{"zone", "kind"}``: :mod:`transforms.zone_state`) into one EventBridge event and puts them on the bus after the
record's output object is written and before its checkpoint moves (:meth:`geo_service.serving.batches.BatchProcessor.
flush`), batched and retried by :func:`geo_service.adapters.eventbridge.put_events`.

An event (what a rule's target receives)::

    {"source": "georebal.geo", "detail-type": "Location Geofence Event", "time": <the sample time>, ...,
     "detail": {"EventType": "ENTER", "GeofenceId": "TOKYO-CORE", "DeviceId": "ent-3-17",
                "SampleTime": "2026-06-21T04:12:09.512Z", "Position": [139.6917, 35.6895],
                "EventId": "e7-000000042", "IdempotencyKey": "<64 hex digits>"}}

Notes
-----
* **Amazon Location's shape.** Amazon Location sends its geofence events to EventBridge with ``source`` ``aws.geo``
  and ``detail-type`` ``Location Geofence Event`` (https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-geo.html),
  the detail holding ``EventType`` (``ENTER`` or ``EXIT``), ``GeofenceId``, ``DeviceId``, ``SampleTime`` (ISO 8601 in
  UTC, milliseconds) and ``Position`` (``[longitude, latitude]``, WGS 84), and optionally ``Accuracy``,
  ``GeofenceProperties`` and ``PositionProperties``
  (https://docs.aws.amazon.com/location/latest/developerguide/location-events.html). Ours has the same detail-type
  and those five fields (``DeviceId`` is the event's ``entity_id``), so a consumer written for Amazon Location reads
  them; **what is ours**: the ``source`` is :data:`SOURCE` (EventBridge refuses custom events whose source begins with
  ``aws.``: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html); ``EventType``
  ``DWELL`` (Amazon Location has no dwell event; a rule on ``"EventType": ["ENTER", "EXIT"]`` sees only those);
  ``EventId`` (the source event's id) and ``IdempotencyKey``.
* **At least once.** The worker's output is at least once: after a crash or a takeover its successor re-processes
  from the last checkpoint, and a record written (and pushed) before it is pushed again, with the same transitions
  (each event runs on the same entity state). Each event's ``IdempotencyKey`` is the SHA-256 of the JSON array
  ``[event_id, zone, kind]`` (:func:`idempotency_key`), equal for every copy: consumers dedupe by it. EventBridge also
  delivers at least once to targets.
* A record without ``transitions`` (another transform), or with none (``late``, or nothing happened), puts nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from geo_service.adapters.eventbridge import PutResult, put_events
from geokernel.contracts.env import EnvVar

SOURCE = "georebal.geo"
DETAIL_TYPE = "Location Geofence Event"
EVENT_BUS_ENV = EnvVar.GEOFENCE_EVENT_BUS
KINDS = ("ENTER", "EXIT", "DWELL")


def idempotency_key(event_id: str, zone: str, kind: str) -> str:
    """The key every copy of one transition shares: SHA-256 (hex) of the JSON array ``[event_id, zone, kind]``."""
    text = json.dumps([event_id, zone, kind], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample_time(ts: Any) -> datetime:
    """The event's time (``ts``: epoch milliseconds, a digit string, or ISO 8601; naive is UTC) as a UTC datetime.

    Raises
    ------
    ValueError
        ``ts`` is none of those (the worker validated it: only a hand-made record gets here).
    """
    if (isinstance(ts, int | float) and not isinstance(ts, bool)) or str(ts).strip().isdigit():
        return datetime.fromtimestamp(float(ts) / 1000.0, tz=UTC)
    when = datetime.fromisoformat(str(ts).strip().replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def iso_ms(when: datetime) -> str:
    """``YYYY-MM-DDThh:mm:ss.sssZ`` (Amazon Location's ``SampleTime``)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def details_of(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The event details of an enriched record's transitions (module docstring), in the record's order.

    Raises
    ------
    ValueError
        A transition is not ``{"zone": str, "kind": one of KINDS}`` (names it and the event).
    """
    transitions = record.get("transitions")
    if not transitions:
        return []
    event_id = str(record["event_id"])
    when = iso_ms(sample_time(record["ts"]))
    out = []
    for t in transitions:
        if not isinstance(t, Mapping) or not isinstance(t.get("zone"), str) or t.get("kind") not in KINDS:
            raise ValueError(f"event {event_id!r}: a transition must be {{'zone': str, 'kind': one of {KINDS}}}, "
                             f"got {t!r}")
        out.append({"EventType": t["kind"], "GeofenceId": t["zone"], "DeviceId": str(record["entity_id"]),
                    "SampleTime": when, "Position": [float(record["lon"]), float(record["lat"])],
                    "EventId": event_id, "IdempotencyKey": idempotency_key(event_id, t["zone"], t["kind"])})
    return out


@dataclass(frozen=True)
class GeofenceSink:
    """Puts transitions on ``bus`` with ``client`` (an EventBridge client); ``put`` returns what it took."""

    client: Any
    bus: str

    def entries(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ``PutEvents`` request entries of one enriched record (none without transitions)."""
        details = details_of(record)
        if not details:
            return []
        when = sample_time(record["ts"])
        return [{"Source": SOURCE, "DetailType": DETAIL_TYPE, "Detail": json.dumps(d, separators=(",", ":")),
                 "EventBusName": self.bus, "Time": when} for d in details]

    def put(self, entries: Sequence[Mapping[str, Any]]) -> PutResult:
        """Put ``entries`` (:func:`geo_service.adapters.eventbridge.put_events`: raises EventSinkError when some
        cannot be put)."""
        return put_events(self.client, entries) if entries else PutResult()
