"""Event decoding and the records the worker writes (enriched output, quarantine).

Events follow ``docs/CONTRACTS.md`` ("Events"). A record that is not a valid event is
never dropped: it becomes a quarantine record with a reason code naming the bad value
and its source (``<stream>/<shard>/<sequence>``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_LAT = 85.05112878
REQUIRED_STRINGS = ("event_id", "entity_id")


@dataclass(frozen=True)
class Event:
    """A decoded, validated event (``fields`` holds the whole original object)."""

    event_id: str
    entity_id: str
    lat: float
    lon: float
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class BadRecord:
    """A record that failed decoding, with its contract reason (``code: detail``)."""

    reason: str
    raw: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "raw": self.raw, "source": self.source,
                "quarantined_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def decode_event(data: bytes, source: str) -> Event | BadRecord:
    """Decode one Kinesis record's bytes into an :class:`Event`, or a :class:`BadRecord` saying why not."""
    raw = data.decode("utf-8", errors="replace")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        return BadRecord(f"unparsable_json: {exc} in {raw[:80]!r}", raw, source)
    if not isinstance(obj, dict):
        return BadRecord(f"not_an_object: got {type(obj).__name__} {raw[:80]!r}", raw, source)
    for key in (*REQUIRED_STRINGS, "lat", "lon"):
        if key not in obj:
            return BadRecord(f"missing_field: {key!r} is missing", raw, source)
    for key in REQUIRED_STRINGS:
        if not isinstance(obj[key], str) or not obj[key]:
            return BadRecord(f"bad_type: {key!r} must be a non-empty string, got {obj[key]!r}", raw, source)
    coords: dict[str, float] = {}
    for key in ("lat", "lon"):
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return BadRecord(f"bad_type: {key!r} must be a number, got {v!r}", raw, source)
        if not math.isfinite(v):
            return BadRecord(f"nan: {key!r} is {v!r}", raw, source)
        coords[key] = float(v)
    if abs(coords["lat"]) > MAX_LAT:
        return BadRecord(f"lat_out_of_range: lat {coords['lat']!r} not in [-{MAX_LAT}, {MAX_LAT}]", raw, source)
    if abs(coords["lon"]) > 180.0:
        return BadRecord(f"lon_out_of_range: lon {coords['lon']!r} not in [-180, 180]", raw, source)
    return Event(event_id=obj["event_id"], entity_id=obj["entity_id"], lat=coords["lat"], lon=coords["lon"],
                 fields=obj)


def enriched_record(event: Event, transform_fields: Mapping[str, Any], *, spec_version: int, partition_id: str,
                    worker_id: str, stray: bool) -> dict[str, Any]:
    """Return the downstream record: the event's fields, the transform's, and the routing ids (which win)."""
    return {**event.fields, **transform_fields, "event_id": event.event_id, "spec_version": spec_version,
            "partition_id": partition_id, "worker_id": worker_id, "stray": stray}


def enriched_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """``enriched/v<version>/<worker>/<epoch_ms>.jsonl``."""
    return f"enriched/v{version}/{worker_id}/{epoch_ms}.jsonl"


def quarantine_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """``quarantine/geo/v<version>/<worker>/<epoch_ms>.jsonl`` (records the worker could not process)."""
    return f"quarantine/geo/v{version}/{worker_id}/{epoch_ms}.jsonl"
