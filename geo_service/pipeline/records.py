"""Event decoding and the records the worker writes (enriched output, quarantine).

Events follow ``docs/CONTRACTS.md`` ("Events"). A record that is not a valid event is
never dropped: it becomes a quarantine record with a reason code naming the bad value
and its source (``<stream>/<shard>/<sequence>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from geo_service.pipeline.codec import loads
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.events import Rejection, ValidEvent, check_event

Event = ValidEvent  # what the worker processes: a valid event with all its fields


@dataclass(frozen=True)
class BadRecord:
    """A record that failed decoding, with its contract reason (``code: detail``); stamped when it is written."""

    reason: str
    raw: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return QuarantineRecord(self.reason, self.raw, self.source, stamp).to_dict()


def decode_event(data: bytes, source: str, fields: EventFields = DEFAULT_EVENT_FIELDS) -> Event | BadRecord:
    """Decode one Kinesis record's bytes into an :class:`Event`, or a :class:`BadRecord` saying why not.

    The rules are the router's (:func:`geokernel.events.parse_event`): what the router let
    through passes here too, and a record written to the geo stream some other way is
    quarantined with the same reason codes. ``fields`` says which key holds each field (``EVENT_FIELDS``); the
    event's fields carry the canonical names.
    """
    parsed, _plain = read_event(data, fields)
    if isinstance(parsed, Rejection):
        return BadRecord(parsed.reason, data.decode("utf-8", errors="replace"), source)
    return parsed


def read_event(data: bytes, fields: EventFields = DEFAULT_EVENT_FIELDS,
               now: int | None = None) -> tuple[Event | Rejection, bool]:
    """:func:`geokernel.events.parse_event` of ``data`` with the worker's codec (:func:`geo_service.pipeline.codec.loads`:
    the same value as ``json.loads``), and whether its fields are plain (the row may be written by orjson)."""
    try:
        doc, plain = loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        return Rejection(f"unparsable_json: {exc}", data), False
    return check_event(doc, data, fields, now), plain


def enriched_record(event: Event, transform_fields: Mapping[str, Any], *, spec_version: int, partition_id: str,
                    worker_id: str, stray: bool, owner: str | None = None,
                    processed_at: int | None = None) -> dict[str, Any]:
    """Return the downstream record: the event's fields, the transform's, and the routing ids (which win).

    ``spec_version`` is the version of the geo stream the event was read from and ``worker_id`` the slot; ``owner``
    is the worker process (``<host>:<pid>:<random>``: one process serves several versions of a slot in ``carry``
    mode) and ``processed_at`` when its batch was processed (epoch ms).

    Built once, as a dict: the object :meth:`geokernel.contracts.enriched.EnrichedRecord.to_dict` gives for the same
    values, keys in the same order (an event field that is a routing id keeps its place and takes the routing value).
    """
    if owner is not None and processed_at is not None:  # the worker's rows: one dict display
        return {**event.fields, **transform_fields, "event_id": event.event_id, "spec_version": spec_version,
                "partition_id": partition_id, "worker_id": worker_id, "stray": stray, "owner": owner,
                "processed_at": processed_at}
    row = {**event.fields, **transform_fields, "event_id": event.event_id, "spec_version": spec_version,
           "partition_id": partition_id, "worker_id": worker_id, "stray": stray}
    if owner is not None:
        row["owner"] = owner
    if processed_at is not None:
        row["processed_at"] = processed_at
    return row
