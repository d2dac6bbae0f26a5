"""Vectorised checks of event columns: coordinates as numbers in range, times by the one time unit rule.

Every function takes an Arrow array of whatever type the file held (numbers, text, timestamps) and
returns NumPy arrays: the values and a per-row :data:`Problem` code (0 = fine). The caller turns the
codes of the few bad rows into messages with :func:`describe`, which names the bad value with ``!r``.

Notes
-----
* **Numbers as text** (CSV, JSON strings) may carry white space around them; ``nan``, ``inf``, ``1,5``
  and empty text are not numbers. A null (an empty CSV field, a JSON ``null`` or a missing key) is
  *missing*.
* **Times** follow the time unit rule of every part (:mod:`geokernel.contracts.timestamps`; ``--ts-unit``, the
  ``ts_unit`` of the event field mapping): its constants are applied here over arrays (``auto``'s bounds, the
  milliseconds per unit, the rounding ``floor(v * ms_per_unit + 0.5)`` in doubles, the plausible window), and the
  reason of a bad time is :func:`geokernel.timestamps.read_ts`'s, so a log's times are judged as the router, the
  workers and the Spark job judge them (``tests/events/ts_units.json``). ISO-8601 text needs a date and a time to
  the minute (no zone means UTC). A typed timestamp or date column (Parquet) is an instant under every unit (no
  zone: UTC; a date: its midnight), still checked against the window.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel import timestamps
from geokernel.contracts.events import EVENT_LAT_LIMIT, EVENT_LON_LIMIT, ISO_DATETIME_PREFIX
from geokernel.contracts.timestamps import (
    AUTO_TOP_UNIT,
    AUTO_UNIT_BELOW,
    EPOCH_NUMBER_TEXT,
    MS_PER_UNIT,
    TS_WINDOW,
    TsUnit,
)
from geokernel.timestamps import iso_micros, read_ts

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.int8]

#: The ``--ts-unit`` choices (the units of the time unit rule).
TIME_UNITS: tuple[str, ...] = tuple(u.value for u in TsUnit)
NUMBER_RE = r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$"
#: ISO-8601 text Arrow's parser reads (the rest of the text with a date and a time goes to Python's, as in the rule).
ISO_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[-+][0-9]{2}(:?[0-9]{2})?)?$"
ZONE_RE = r"(Z|[-+][0-9]{2}(:?[0-9]{2})?)$"

OK, MISSING, NOT_NUMBER, NOT_FINITE, OUT_OF_RANGE, BAD_TIME = range(6)


def describe(problem: int, name: str, value: object, what: str, unit: TsUnit = TsUnit.AUTO,
             now: int | None = None) -> str:
    """The quarantine reason (``code: detail``) of a row's first problem; ``what`` is ``lat``, ``lon`` or ``time``.

    Notes
    -----
    The detail names the column as the file calls it and the bad value with ``!r``. A bad time's reason is the
    time unit rule's (:func:`geokernel.timestamps.read_ts` under ``unit``, the clock at ``now``).
    """
    if problem == MISSING:
        code = "bad_timestamp" if what == "time" else "missing_field"
        return f"{code}: {name} is missing (empty or null)"
    if what == "time":
        return read_ts(value, name, unit, now).reason or f"bad_timestamp: {name} {value!r} could not be read"
    if problem == NOT_NUMBER:
        comma = isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+,\d+\s*", value) is not None
        return f"bad_type: {name} {value!r} is not a number" + (
            " (a decimal comma? numbers are read with a decimal point)" if comma else "")
    if problem == NOT_FINITE:
        return f"nan: {name} {value!r} is not finite"
    if what == "lat":
        return f"lat_out_of_range: {name} {value!r} not in [-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}]"
    return f"lon_out_of_range: {name} {value!r} not in [-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}]"


def _nulls(col: Any) -> npt.NDArray[np.bool_]:
    out: npt.NDArray[np.bool_] = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return out


def _text_numbers(col: Any, pattern: str = NUMBER_RE) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Text -> float64 where it is a number (``pattern``; else NaN) and the mask of values that are numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(col)
    ok = pc.fill_null(pc.match_substring_regex(text, pattern), False)
    values = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.float64())
    return _floats(values), np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)


def _floats(col: Any) -> FloatArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    out: FloatArray = np.asarray(pc.fill_null(pc.cast(col, pa.float64(), safe=False), float("nan")).to_numpy(),
                                 dtype=np.float64)  # safe=False: an int64 beyond 2**53 is rounded, as float() does
    return out


def _is_text(col: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(col.type) or pa.types.is_large_string(col.type))


def coordinate(col: Any, limit: float) -> tuple[FloatArray, CodeArray]:
    """A latitude or longitude column as float64 and a problem code per row (``|value| <= limit`` is fine)."""
    import pyarrow as pa

    codes = np.zeros(len(col), dtype=np.int8)
    if _is_text(col):
        values, number = _text_numbers(col)
        codes[~number] = NOT_NUMBER
    elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        values = _floats(col)
    else:
        values = np.full(len(col), np.nan)
        codes[:] = NOT_NUMBER
    fine = codes == OK
    codes[fine & ~np.isfinite(values)] = NOT_FINITE
    with np.errstate(invalid="ignore"):
        codes[(codes == OK) & (np.abs(values) > limit)] = OUT_OF_RANGE
    codes[_nulls(col)] = MISSING
    return values, codes


def epoch_ms(col: Any, unit: TsUnit | str = TsUnit.AUTO, now: int | None = None) -> tuple[IntArray, CodeArray]:
    """A time column as epoch milliseconds (int64) and a problem code per row (see the module Notes).

    ``unit`` is the ``ts_unit``; ``now`` the clock (epoch ms) the plausible window ends a day after (default now).
    """
    import pyarrow as pa

    unit, now = TsUnit(unit), timestamps.now_ms() if now is None else now
    n = len(col)
    r = np.full(n, np.nan)  # each row's time in ms plus the rounding half, NaN when no unit reads it
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        r = _timestamp_us(col) * MS_PER_UNIT[TsUnit.US] + 0.5
    elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        r = _number_r(_floats(col), unit)
    elif _is_text(col):
        r = _text_r(col, unit)
    codes = np.zeros(n, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        ok = (r >= TS_WINDOW.earliest_ms) & (r < TS_WINDOW.latest_ms(now) + 1)
    codes[~ok] = BAD_TIME
    codes[_nulls(col)] = MISSING
    return np.where(codes == OK, np.floor(np.where(ok, r, 0.0)), 0.0).astype(np.int64), codes


def _number_r(v: FloatArray, unit: TsUnit) -> FloatArray:
    """Epoch numbers in ``unit`` (``auto``: each by its magnitude) as ms plus the rounding half; NaN under ``iso``."""
    if unit is TsUnit.ISO:
        return np.full(len(v), np.nan)
    if unit is TsUnit.AUTO:
        with np.errstate(invalid="ignore"):
            per: FloatArray | float = np.select([v < bound for bound, _ in AUTO_UNIT_BELOW],
                                                [MS_PER_UNIT[u] for _, u in AUTO_UNIT_BELOW], MS_PER_UNIT[AUTO_TOP_UNIT])
    else:
        per = MS_PER_UNIT[unit]
    out: FloatArray = v * per + 0.5
    return out


def _timestamp_us(col: Any) -> FloatArray:
    """A timestamp or date column as epoch microseconds (float64; NaN for nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tz = col.type.tz if pa.types.is_timestamp(col.type) else None
    as_us = pc.cast(pc.cast(col, pa.timestamp("us", tz=tz), safe=False), pa.int64())
    return _floats(as_us)


def _text_r(col: Any, unit: TsUnit) -> FloatArray:
    """Text times: epoch numbers by ``unit``, ISO-8601 text by its microseconds (not under a numeric unit)."""
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(col)
    values, number = _text_numbers(text, EPOCH_NUMBER_TEXT)
    r = _number_r(values, unit)
    r[~number] = np.nan
    if unit in MS_PER_UNIT:
        return r
    iso = np.asarray(pc.fill_null(pc.match_substring_regex(text, ISO_DATETIME_PREFIX), False)
                     .to_numpy(zero_copy_only=False), dtype=bool)
    rows = np.flatnonzero(iso & ~number)
    if len(rows):
        r[rows] = _iso_us(pc.take(text, rows)) * MS_PER_UNIT[TsUnit.US] + 0.5
    return r


def _iso_us(text: Any) -> FloatArray:
    """ISO-8601 strings -> epoch microseconds; Arrow's parser for the plain shapes, the rule's (Python's) for the rest."""
    import pyarrow as pa
    import pyarrow.compute as pc

    plain = np.asarray(pc.fill_null(pc.match_substring_regex(text, ISO_RE), False).to_numpy(zero_copy_only=False),
                       dtype=bool)
    zoned = np.asarray(pc.fill_null(pc.match_substring_regex(text, ZONE_RE), False).to_numpy(zero_copy_only=False),
                       dtype=bool)
    out = np.full(len(text), np.nan)
    slow = ~plain
    for mask, tz in ((plain & zoned, "UTC"), (plain & ~zoned, None)):
        idx = np.flatnonzero(mask)
        if not len(idx):
            continue
        try:
            ns = pc.cast(pc.cast(pc.take(text, idx), pa.timestamp("ns", tz=tz)), pa.int64()).to_numpy(zero_copy_only=False)
            out[idx] = np.floor_divide(np.asarray(ns, dtype=np.int64), 1000)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            slow[idx] = True
    idx = np.flatnonzero(slow)
    if len(idx):
        out[idx] = [_python_iso_us(s) for s in pc.take(text, idx).to_pylist()]
    return out


def _python_iso_us(text: str) -> float:
    try:
        return float(iso_micros(datetime.fromisoformat(text)))
    except ValueError:
        return float("nan")
