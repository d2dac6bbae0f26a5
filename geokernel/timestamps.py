"""The time unit rule applied to one ``ts`` value: its epoch milliseconds, or the quarantine reason saying why not.

The rule and its constants are :mod:`geokernel.contracts.timestamps`'s (units, ``auto``'s bounds, the plausible
window, the rounding); this is its one Python implementation. :func:`geokernel.events.parse_event` (the router
and the workers) reads every event's time with :func:`read_ts`; ``partitioner counts`` takes the reason of each
bad row from it; the reference stateful transform reads a hand-made event's time with it. The Spark job applies
the same constants as column expressions (``glue_jobs/timestamps.py``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from geokernel.contracts.events import ISO_DATETIME_PREFIX, MAX_EPOCH_MS, ReasonCode
from geokernel.contracts.timestamps import (
    EPOCH_NUMBER_TEXT,
    EVENT_TIME_FIELD,
    MS_PER_UNIT,
    TS_UNIT_SETTING,
    TS_WINDOW,
    TsUnit,
    auto_unit,
)

_NUMBER = re.compile(EPOCH_NUMBER_TEXT)
_ISO = re.compile(ISO_DATETIME_PREFIX)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Where a reason points to the setting.
SETTING_TEXT = f"{TS_UNIT_SETTING} (event field mapping)"


@dataclass(frozen=True, slots=True)
class EventTime:
    """What the rule made of one ``ts``: its epoch milliseconds, or (``ms`` None) the quarantine ``reason``."""

    ms: int | None
    reason: str = ""


def now_ms() -> int:
    """The reader's clock in epoch milliseconds (the "now" of the plausible window)."""
    return time.time_ns() // 1_000_000


def read_ts(value: Any, name: str = "ts", unit: TsUnit = TsUnit.AUTO, now: int | None = None) -> EventTime:
    """Read one ``ts`` value under ``unit`` (:mod:`geokernel.contracts.timestamps`).

    Parameters
    ----------
    value : Any
        The value as decoded from JSON (int, float, str, anything else), or a ``datetime`` or ``date`` (a typed
        column of a recorded log).
    name : str
        The producer's key of the field, named by the reason.
    unit : TsUnit
        The ``ts_unit`` setting.
    now : int, optional
        The reader's clock (epoch ms) the plausible window ends a day after; default :func:`now_ms`.

    Returns
    -------
    EventTime
        The epoch milliseconds, or a ``bad_timestamp`` reason naming ``name``, the value and, where it would help,
        the ``ts_unit`` to set.

    Notes
    -----
    * A boolean is no number. Text that is an epoch number (:data:`~geokernel.contracts.timestamps.EPOCH_NUMBER_TEXT`,
      spaces around it ignored) is that number, as the Spark job reads it; text starting with a date and a time is
      ISO-8601 (no offset: UTC); other text is refused.
    * NaN is refused as not finite; an infinite number (or one too large for a double) is out of the window.
    * A ``datetime`` is accepted under every unit (it is an instant, not an encoding); naive means UTC; a ``date``
      is its midnight UTC.
    """
    now = now_ms() if now is None else now
    if type(value) is int and (unit is TsUnit.AUTO or unit is TsUnit.MS) \
            and TS_WINDOW.earliest_ms <= value <= TS_WINDOW.latest_ms(now):
        return EventTime(value)  # epoch ms in the window (what the rule below gives it, the common case, at once)
    if isinstance(value, date):
        return _instant(value, name, repr(value), unit, now, typed=True)
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text):
            return _number(float(text), name, value, unit, now)
        if _ISO.match(text):
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                return _bad(name, f"{short_repr(value)} is not a valid ISO-8601 date-time")
            return _instant(when, name, short_repr(value), unit, now)
        return _bad(name, f"{short_repr(value)} is neither an epoch number nor an ISO-8601 date-time (a date and a time)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _bad(name, f"must be an epoch number or ISO-8601 text, got {short_repr(value)}")
    if isinstance(value, float) and math.isnan(value):
        return _bad(name, f"{value!r} is not a finite number")
    return _number(_as_float(value), name, value, unit, now)


def _number(number: float, name: str, value: Any, unit: TsUnit, now: int) -> EventTime:
    """``number`` (read from ``value``, named in a reason: its ``repr`` is made only then) under ``unit``."""
    guess = auto_unit(number)
    if unit is TsUnit.ISO:
        shown = short_repr(value)
        hint = f"; set it to '{guess}' or 'auto'" if _plausible(number * MS_PER_UNIT[guess] + 0.5, now) else ""
        return _bad(name, f"{shown} is a number, but {SETTING_TEXT} is 'iso' (ISO-8601 text only){hint}")
    read = guess if unit is TsUnit.AUTO else unit
    r = number * MS_PER_UNIT[read] + 0.5
    if _plausible(r, now):
        return EventTime(math.floor(r))
    shown = short_repr(value)
    how = f"read as {read} ({TS_UNIT_SETTING} 'auto')" if unit is TsUnit.AUTO else f"read as {read}"
    hint = ""
    if unit is not TsUnit.AUTO and guess is not unit and _plausible(number * MS_PER_UNIT[guess] + 0.5, now):
        hint = f"; set {SETTING_TEXT} to '{guess}' or 'auto'"
    return _bad(name, f"{shown} {how} is {instant_text(r)}, outside the plausible window {TS_WINDOW.text}{hint}")


def _instant(when: date, name: str, shown: str, unit: TsUnit, now: int, typed: bool = False) -> EventTime:
    r = float(iso_micros(when)) * MS_PER_UNIT[TsUnit.US] + 0.5
    if not typed and unit in MS_PER_UNIT:
        hint = "; set it to 'iso' or 'auto'" if _plausible(r, now) else ""
        return _bad(name, f"{shown} is ISO-8601 text, but {SETTING_TEXT} is '{unit}' (epoch numbers only){hint}")
    if _plausible(r, now):
        return EventTime(math.floor(r))
    return _bad(name, f"{shown} is {instant_text(r)}, outside the plausible window {TS_WINDOW.text}")


def encode_ts(ms: int, unit: TsUnit) -> int | float | str:
    """How a producer whose events the setting ``unit`` describes writes the epoch milliseconds ``ms``.

    ``s``: seconds (an int when whole, else a float to the millisecond); ``ms`` and ``auto``: ``ms``; ``us``: ``ms``
    times 1000; ``iso``: ``2024-12-07T12:20:37.123Z``. :func:`read_ts` reads each back to ``ms`` under ``unit``
    (the local loop's replay sends its events so).
    """
    if unit is TsUnit.S:
        return ms // 1000 if ms % 1000 == 0 else ms / 1000
    if unit is TsUnit.US:
        return ms * 1000
    if unit is TsUnit.ISO:
        when = _EPOCH + timedelta(milliseconds=ms)
        return f"{when:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"
    return ms


def iso_micros(when: datetime | date) -> int:
    """Epoch microseconds of ``when`` (naive: UTC; a date: its midnight UTC)."""
    if not isinstance(when, datetime):
        when = datetime(when.year, when.month, when.day)
    when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return (when - _EPOCH) // _US


def _plausible(r: float, now: int) -> bool:
    """Whether ``floor(r)`` lies in the plausible window (``r`` a time in ms plus a half, as the rule rounds)."""
    return TS_WINDOW.earliest_ms <= r < TS_WINDOW.latest_ms(now) + 1


def instant_text(r: float) -> str:
    """``floor(r)`` ms as ``2024-12-07T12:20:37Z`` (to the second), or ``before 1970-01-01`` / ``after 9999-12-31``."""
    if r < 0:
        return "before 1970-01-01"
    if r >= MAX_EPOCH_MS + 1:
        return "after 9999-12-31"
    return f"{_EPOCH + timedelta(milliseconds=math.floor(r)):%Y-%m-%dT%H:%M:%S}Z"


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # a JSON integer beyond a double: out of any window
        return math.inf if value > 0 else -math.inf


def _bad(name: str, detail: str) -> EventTime:
    return EventTime(None, f"{ReasonCode.BAD_TIMESTAMP}: {name} {detail}")


def short_repr(v: Any, limit: int = 80) -> str:
    """``repr(v)``, cut after ``limit`` characters (a reason stays readable)."""
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "...'"


def event_time_ms(fields: Mapping[str, Any]) -> int:
    """An event's or enriched record's time in epoch ms: its ``ts_ms`` (the worker's reading of ``ts`` under the
    deployment's ``ts_unit``), else its ``ts`` read by the same rule with ``auto`` (a raw event, as sent).

    The one reading of an event's time outside the checks: the workers' output partitions (the event hour of
    ``geokernel.contracts.enriched.enriched_key``), the local loop's reader and its oracle.

    Raises
    ------
    ValueError
        Neither gives a time (naming the value): the caller read a record no check passed.
    """
    ms = fields.get(EVENT_TIME_FIELD)
    if isinstance(ms, int) and not isinstance(ms, bool):
        return ms
    when = read_ts(fields.get("ts"))
    if when.ms is None:
        raise ValueError(f"no {EVENT_TIME_FIELD} and {when.reason}")
    return when.ms
