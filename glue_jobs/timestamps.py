"""The time unit rule as Spark column expressions: a ``ts`` text column -> epoch milliseconds, or the reason why not.

The Spark side of :func:`geokernel.timestamps.read_ts`, with its constants (:mod:`geokernel.contracts.timestamps`):
the same units, ``auto``'s bounds (a column expression per row), the same double arithmetic for the milliseconds
(``floor(v * ms_per_unit + 0.5)``; ISO-8601 text by its epoch microseconds), the same plausible window and the same
reason texts, except that a value is always shown quoted (Spark reads every ``ts`` as text). ``tests/events/ts_units.json``
holds both to one table. Nothing here raises on bad data, on Spark 3.5 or 4.0, with ANSI mode on or off.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from geokernel.contracts.events import ISO_DATETIME_PREFIX, MAX_EPOCH_MS, ReasonCode
from geokernel.contracts.timestamps import (
    AUTO_TOP_UNIT,
    AUTO_UNIT_BELOW,
    EPOCH_NUMBER_TEXT,
    MS_PER_UNIT,
    TS_UNIT_SETTING,
    TS_WINDOW,
    TsUnit,
)
from geokernel.timestamps import SETTING_TEXT


class TsColumns(NamedTuple):
    """What the rule makes of a ``ts`` column: ``ms`` (epoch ms, long; null when bad) and ``reason`` (null when good)."""

    ms: Column
    reason: Column


def ts_columns(text: Column, shown: Column, unit: TsUnit, name: str, now_ms: Column | None = None) -> TsColumns:
    """Read a ``ts`` text column under ``unit`` (the mapping's ``ts_unit``).

    Parameters
    ----------
    text : Column
        The field as text (a JSON number's text or a string's content).
    shown : Column
        How a reason shows the value (quoted, clipped).
    unit : TsUnit
        The ``ts_unit`` setting.
    name : str
        The producer's key of the field, named by the reason.
    now_ms : Column, optional
        The clock (epoch ms) the window ends a day after; default the batch's ``current_timestamp()``.

    Returns
    -------
    TsColumns

    Notes
    -----
    An epoch number is text matching :data:`~geokernel.contracts.timestamps.EPOCH_NUMBER_TEXT` (spaces around it
    trimmed); ISO-8601 is text starting with a date and a time, parsed by ``try_to_timestamp`` (no offset: the
    session time zone, UTC in every entry point).
    """
    now = now_ms if now_ms is not None else F.unix_millis(F.current_timestamp())
    t = F.trim(text)
    is_num = t.rlike(EPOCH_NUMBER_TEXT)
    num = F.when(is_num, t.cast("double"))
    is_iso = ~is_num & t.rlike(ISO_DATETIME_PREFIX)
    parsed = F.when(is_iso, F.try_to_timestamp(t))
    guess = _auto_unit(num)
    r_guess = num * _ms_per(guess) + 0.5
    fixed = MS_PER_UNIT.get(unit)
    read = _Read(shown, guess, r_guess,
                 r_guess if fixed is None else num * fixed + 0.5,
                 F.unix_micros(parsed).cast("double") * MS_PER_UNIT[TsUnit.US] + 0.5,
                 now.cast("double") + float(TS_WINDOW.ahead_ms + 1))
    good_num = F.lit(False) if unit is TsUnit.ISO else is_num & read.plausible(read.r_num)
    good_iso = F.lit(unit in (TsUnit.AUTO, TsUnit.ISO)) & parsed.isNotNull() & read.plausible(read.r_iso)
    ms = F.when(good_num, F.floor(read.r_num)).when(good_iso, F.floor(read.r_iso))
    detail = (F.when(is_num, _on_number(read, unit))
              .when(is_iso & parsed.isNull(), F.concat(shown, F.lit(" is not a valid ISO-8601 date-time")))
              .when(is_iso, _on_iso(read, unit))
              .otherwise(F.concat(shown, F.lit(" is neither an epoch number nor an ISO-8601 date-time (a date and "
                                               "a time)"))))
    return TsColumns(ms, F.when(ms.isNull(), F.concat(F.lit(f"{ReasonCode.BAD_TIMESTAMP}: {name} "), detail)))


class _Read(NamedTuple):
    """The columns a reason is made of: the value shown, ``auto``'s unit for it, and each reading in ms plus the
    rounding half (``r_guess`` in auto's unit, ``r_num`` in the setting's, ``r_iso`` of ISO-8601 text)."""

    shown: Column
    guess: Column
    r_guess: Column
    r_num: Column
    r_iso: Column
    latest: Column  # the last plausible millisecond + 1

    def plausible(self, r: Column) -> Column:
        return (r >= float(TS_WINDOW.earliest_ms)) & (r < self.latest)


_WINDOW = f"outside the plausible window {TS_WINDOW.text}"


def _on_number(read: _Read, unit: TsUnit) -> Column:
    """The detail of a bad epoch number (``iso``: a number at all; else: out of the window, read as ``unit``)."""
    if unit is TsUnit.ISO:
        return F.concat(read.shown, F.lit(f" is a number, but {SETTING_TEXT} is 'iso' (ISO-8601 text only)"),
                        F.when(read.plausible(read.r_guess),
                               F.concat(F.lit("; set it to '"), read.guess, F.lit("' or 'auto'"))).otherwise(F.lit("")))
    if unit is TsUnit.AUTO:
        how, hint = F.concat(F.lit("read as "), read.guess, F.lit(f" ({TS_UNIT_SETTING} 'auto')")), F.lit("")
    else:
        how = F.lit(f"read as {unit}")
        hint = F.when((read.guess != unit.value) & read.plausible(read.r_guess),
                      F.concat(F.lit(f"; set {SETTING_TEXT} to '"), read.guess, F.lit("' or 'auto'"))).otherwise(F.lit(""))
    return F.concat(read.shown, F.lit(" "), how, F.lit(" is "), _instant(read.r_num), F.lit(f", {_WINDOW}"), hint)


def _on_iso(read: _Read, unit: TsUnit) -> Column:
    """The detail of bad ISO-8601 text (a numeric unit: text at all; else: out of the window)."""
    if unit in MS_PER_UNIT:
        return F.concat(read.shown, F.lit(f" is ISO-8601 text, but {SETTING_TEXT} is '{unit}' (epoch numbers only)"),
                        F.when(read.plausible(read.r_iso), F.lit("; set it to 'iso' or 'auto'")).otherwise(F.lit("")))
    return F.concat(read.shown, F.lit(" is "), _instant(read.r_iso), F.lit(f", {_WINDOW}"))


def _auto_unit(num: Column) -> Column:
    """The unit ``auto`` reads ``num`` in, as text (:data:`~geokernel.contracts.timestamps.AUTO_UNIT_BELOW`)."""
    (bound, unit), *rest = AUTO_UNIT_BELOW
    out = F.when(num < bound, F.lit(unit.value))
    for bound, unit in rest:
        out = out.when(num < bound, F.lit(unit.value))
    return out.otherwise(F.lit(AUTO_TOP_UNIT.value))


def _ms_per(unit: Column) -> Column:
    """Milliseconds per unit of a unit column (:data:`~geokernel.contracts.timestamps.MS_PER_UNIT`)."""
    (first, factor), *rest = MS_PER_UNIT.items()
    out = F.when(unit == first.value, F.lit(factor))
    for u, f in rest:
        out = out.when(unit == u.value, F.lit(f))
    return out


def _instant(r: Column) -> Column:
    """``floor(r)`` ms as ``2024-12-07T12:20:37Z``, or ``before 1970-01-01`` / ``after 9999-12-31`` (never raises)."""
    return (F.when(r < 0, F.lit("before 1970-01-01"))
            .when(r >= float(MAX_EPOCH_MS + 1), F.lit("after 9999-12-31"))
            .otherwise(F.date_format(F.timestamp_millis(F.floor(r)), "yyyy-MM-dd'T'HH:mm:ss'Z'")))
