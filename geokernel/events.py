"""Location event rules (``docs/CONTRACTS.md``, "Events") and quarantine records.

:func:`parse_event` turns one raw record into a :class:`ValidEvent` or a :class:`Rejection` whose
``reason`` is ``"<code>: <detail naming the bad value>"`` with one of :class:`geokernel.contracts.ReasonCode`.
The router Lambda (before routing) and the geo worker (on what it reads) apply the same rules
from here; the Spark job applies them as column expressions (``glue_jobs/events.py``). All three read the
fields under the producer's names (:class:`geokernel.contracts.event_fields.EventFields`, ``EVENT_FIELDS``) and
the time by the one time unit rule (:func:`geokernel.timestamps.read_ts`, the mapping's ``ts_unit``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.events import EVENT_LAT_LIMIT, EVENT_LON_LIMIT, MAX_PARTITION_KEY
from geokernel.contracts.timestamps import EVENT_TIME_FIELD, TS_WINDOW, TsUnit
from geokernel.timestamps import read_ts, short_repr


class ValidEvent(NamedTuple):
    """A valid event: the fields routing needs, its time, the original bytes (passed on untouched) and every field.

    ``ts_ms`` is the event time in epoch milliseconds (the time unit rule's reading of ``ts``); ``fields`` holds
    every field under its canonical name, ``ts`` as sent, plus ``ts_ms`` (:data:`EVENT_TIME_FIELD`). An immutable
    tuple: the router and every worker make one per event (a frozen dataclass costs ~3x as much to make).
    """

    event_id: str
    entity_id: str
    lat: float
    lon: float
    ts_ms: int
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


def parse_event(raw: bytes, fields: EventFields = DEFAULT_EVENT_FIELDS,
                now: int | None = None) -> ValidEvent | Rejection:
    """Validate one raw event record.

    Parameters
    ----------
    raw : bytes
        The record payload (UTF-8 JSON).
    fields : EventFields
        Which JSON key holds each field and the ``ts_unit`` (``EVENT_FIELDS``; default the canonical names, ``auto``).
        A reason names the producer's key; the :class:`ValidEvent` (its ``fields`` too) uses the canonical names.
    now : int, optional
        The clock (epoch ms) the plausible window ends a day after; default the current time.

    Returns
    -------
    ValidEvent or Rejection
        The first failing check gives the reason; ``ts`` is read by :func:`geokernel.timestamps.read_ts`.
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return Rejection(f"unparsable_json: {exc}", raw)
    return check_event(doc, raw, fields, now)


def check_event(doc: Any, raw: bytes, fields: EventFields = DEFAULT_EVENT_FIELDS,
                now: int | None = None) -> ValidEvent | Rejection:
    """The checks of :func:`parse_event` on ``doc``, the value ``json.loads(raw)`` gave (a reader that decodes
    ``raw`` with another codec giving the same value, the geo worker, checks it here)."""
    if not isinstance(doc, dict):
        return Rejection(f"not_an_object: expected a JSON object, got {type(doc).__name__} {short_repr(doc)}", raw)
    names = fields.names
    f_event, f_entity, f_ts, f_lat, f_lon = names
    get = doc.get
    event_id, entity_id, lat, lon = get(f_event), get(f_entity), get(f_lat), get(f_lon)
    if not (type(event_id) is str and type(entity_id) is str and type(lat) is float and type(lon) is float
            and event_id and entity_id and get(f_ts) is not None and get(f_ts) != ""
            and len(entity_id) <= MAX_PARTITION_KEY and math.isfinite(lat) and math.isfinite(lon)):
        checked = _checked(doc, raw, names)  # not the common shape: the checks one by one, naming the first failure
        if isinstance(checked, Rejection):
            return checked
        event_id, entity_id, lat, lon = checked
    if not -EVENT_LAT_LIMIT <= lat <= EVENT_LAT_LIMIT:
        return Rejection(f"lat_out_of_range: {f_lat} {doc[f_lat]!r} not in [-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}]",
                         raw)
    if not -EVENT_LON_LIMIT <= lon <= EVENT_LON_LIMIT:
        return Rejection(f"lon_out_of_range: {f_lon} {doc[f_lon]!r} not in [-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}]",
                         raw)
    ts, unit = doc[f_ts], fields.ts_unit
    if type(ts) is int and (unit is TsUnit.AUTO or unit is TsUnit.MS) and TS_WINDOW.earliest_ms <= ts \
            and (now is not None and ts <= now + TS_WINDOW.ahead_ms):
        ms = ts  # epoch ms in the plausible window: read_ts's answer, at once (the common case)
    else:
        when = read_ts(ts, f_ts, unit, now)
        if when.ms is None:
            return Rejection(when.reason, raw)
        ms = when.ms
    canonical = {**(doc if fields is DEFAULT_EVENT_FIELDS else fields.canonical(doc)), EVENT_TIME_FIELD: ms}
    return ValidEvent(event_id, entity_id, lat, lon, ms, raw, canonical)


def _checked(doc: dict[str, Any], raw: bytes, names: tuple[str, str, str, str, str]
             ) -> Rejection | tuple[str, str, float, float]:
    """The presence, type and finiteness checks of :func:`check_event`, one by one: the first failure's rejection,
    else the ids (a JSON integer id as its text) and the coordinates as floats."""
    f_event, f_entity, _f_ts, f_lat, f_lon = names
    missing = [f for f in names if f not in doc or doc[f] is None or doc[f] == ""]
    if missing:
        return Rejection(f"missing_field: {', '.join(missing)} missing, null or empty in event "
                         f"{short_repr(doc.get(f_event))}", raw)
    ids: list[str] = []
    for f in (f_event, f_entity):
        v = doc[f]
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)  # a JSON integer id is accepted as its text, as the Spark job reads it
        if not isinstance(v, str):
            return Rejection(f"bad_type: {f} must be a string, got {short_repr(v)}", raw)
        ids.append(v)
    if len(ids[1]) > MAX_PARTITION_KEY:
        return Rejection(f"bad_type: {f_entity} longer than {MAX_PARTITION_KEY} characters: {short_repr(doc[f_entity])}", raw)
    coords: list[float] = []
    for f in (f_lat, f_lon):
        v = doc[f]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return Rejection(f"bad_type: {f} must be a number, got {short_repr(v)}", raw)
        if not math.isfinite(v):
            return Rejection(f"nan: {f} is not finite: {v!r}", raw)
        coords.append(float(v))
    return ids[0], ids[1], coords[0], coords[1]


def quarantine_record(rejection: Rejection, source: str, quarantined_at: str) -> dict[str, str]:
    """Return the contract's quarantine record for ``rejection``."""
    return {"reason": rejection.reason, "raw": rejection.raw.decode("utf-8", errors="replace"), "source": source,
            "quarantined_at": quarantined_at}
