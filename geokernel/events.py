"""Location event rules (``docs/CONTRACTS.md``, "Events") and quarantine records.

:func:`parse_event` turns one raw record into a :class:`ValidEvent` or a :class:`Rejection` whose
``reason`` is ``"<code>: <detail naming the bad value>"`` with one of :class:`geokernel.contracts.ReasonCode`.
The router Lambda (before routing) and the geo worker (on what it reads) apply the same rules
from here; the Spark job applies them as column expressions (``glue_jobs/events.py``). All three read the
fields under the producer's names (:class:`geokernel.contracts.event_fields.EventFields`, ``EVENT_FIELDS``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.events import (
    EVENT_LAT_LIMIT,
    EVENT_LON_LIMIT,
    ISO_DATETIME_PREFIX,
    MAX_EPOCH_MS,
    MAX_PARTITION_KEY,
)

_DIGITS = re.compile(r"^[0-9]+$")
_ISO = re.compile(ISO_DATETIME_PREFIX)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ValidEvent:
    """A valid event: the fields routing needs, the original bytes (passed on untouched) and every field."""

    event_id: str
    entity_id: str
    lat: float
    lon: float
    raw: bytes
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class Rejection:
    """An invalid record: why, and the original text."""

    reason: str
    raw: bytes

    @property
    def code(self) -> str:
        return self.reason.split(":", 1)[0]


def parse_event(raw: bytes, fields: EventFields = DEFAULT_EVENT_FIELDS) -> ValidEvent | Rejection:
    """Validate one raw event record.

    Parameters
    ----------
    raw : bytes
        The record payload (UTF-8 JSON).
    fields : EventFields
        Which JSON key holds each field (``EVENT_FIELDS``; default the canonical names). A reason names the
        producer's key; the :class:`ValidEvent` (its ``fields`` too) uses the canonical names.

    Returns
    -------
    ValidEvent or Rejection
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return Rejection(f"unparsable_json: {exc}", raw)
    if not isinstance(doc, dict):
        return Rejection(f"not_an_object: expected a JSON object, got {type(doc).__name__} {_short(doc)}", raw)
    names = fields.names
    f_event, f_entity, f_ts, f_lat, f_lon = names
    missing = [f for f in names if f not in doc or doc[f] is None or doc[f] == ""]
    if missing:
        return Rejection(f"missing_field: {', '.join(missing)} missing, null or empty in event "
                         f"{_short(doc.get(f_event))}", raw)
    ids: list[str] = []
    for f in (f_event, f_entity):
        v = doc[f]
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)  # a JSON integer id is accepted as its text, as the Spark job reads it
        if not isinstance(v, str):
            return Rejection(f"bad_type: {f} must be a string, got {_short(v)}", raw)
        ids.append(v)
    if len(ids[1]) > MAX_PARTITION_KEY:
        return Rejection(f"bad_type: {f_entity} longer than {MAX_PARTITION_KEY} characters: {_short(doc[f_entity])}",
                         raw)
    coords: list[float] = []
    for f in (f_lat, f_lon):
        v = doc[f]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return Rejection(f"bad_type: {f} must be a number, got {_short(v)}", raw)
        if not math.isfinite(v):
            return Rejection(f"nan: {f} is not finite: {v!r}", raw)
        coords.append(float(v))
    if not -EVENT_LAT_LIMIT <= coords[0] <= EVENT_LAT_LIMIT:
        return Rejection(f"lat_out_of_range: {f_lat} {doc[f_lat]!r} not in [-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}]",
                         raw)
    if not -EVENT_LON_LIMIT <= coords[1] <= EVENT_LON_LIMIT:
        return Rejection(f"lon_out_of_range: {f_lon} {doc[f_lon]!r} not in [-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}]",
                         raw)
    bad_ts = _check_ts(doc[f_ts], f_ts)
    if bad_ts:
        return Rejection(bad_ts, raw)
    canonical = doc if fields is DEFAULT_EVENT_FIELDS else fields.canonical(doc)
    return ValidEvent(ids[0], ids[1], coords[0], coords[1], raw, canonical)


def _check_ts(ts: Any, name: str) -> str | None:
    if isinstance(ts, bool):
        return f"bad_timestamp: {name} must be epoch milliseconds or ISO-8601, got {ts!r}"
    if isinstance(ts, str) and _DIGITS.match(ts.strip()):
        ts = int(ts.strip())  # epoch milliseconds as a digit string, as the Spark job reads it
    if isinstance(ts, (int, float)):
        if not math.isfinite(ts) or not 0 <= ts <= MAX_EPOCH_MS:
            return f"bad_timestamp: {name} {ts!r} is not epoch milliseconds in [0, {MAX_EPOCH_MS}]"
        return None
    if isinstance(ts, str):
        if not _ISO.match(ts.strip()):
            return f"bad_timestamp: {name} {_short(ts)} is not an ISO-8601 date-time (a date and a time)"
        try:
            datetime.fromisoformat(ts.strip())
        except ValueError:
            return f"bad_timestamp: {name} {_short(ts)} is not ISO-8601"
        return None
    return f"bad_timestamp: {name} must be epoch milliseconds or ISO-8601, got {_short(ts)}"


def _short(v: Any, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "...'"


def quarantine_record(rejection: Rejection, source: str, quarantined_at: str) -> dict[str, str]:
    """Return the contract's quarantine record for ``rejection``."""
    return {"reason": rejection.reason, "raw": rejection.raw.decode("utf-8", errors="replace"), "source": source,
            "quarantined_at": quarantined_at}


def event_time_ms(ts: Any) -> int:
    """The epoch milliseconds of a valid event's ``ts`` (one :func:`parse_event` accepted), by its rule: epoch
    milliseconds as a number or a digit string, else ISO-8601 text (no offset: UTC); rounded to the nearest ms.

    The one reading of an event's time outside the checks: the workers' output partitions (the event hour of
    ``geokernel.contracts.enriched.enriched_key``) and the local loop's report read it here.

    Raises
    ------
    ValueError
        ``ts`` is none of these (naming it): the caller read a field :func:`parse_event` did not check.
    """
    if isinstance(ts, str) and _DIGITS.match(ts.strip()):
        ts = int(ts.strip())
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
        return math.floor(ts + 0.5)
    if isinstance(ts, str) and _ISO.match(ts.strip()):
        when = datetime.fromisoformat(ts.strip())
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        micros = (when - _EPOCH) // timedelta(microseconds=1)
        return (micros + 500) // 1000
    raise ValueError(f"not an event time (epoch milliseconds or ISO-8601): {_short(ts)}")
