"""Vectorised checks of event columns: coordinates as numbers in range, times as epoch milliseconds.

Every function takes an Arrow array of whatever type the file held (numbers, text, timestamps) and
returns NumPy arrays: the values and a per-row :data:`Problem` code (0 = fine). The caller turns the
codes of the few bad rows into messages with :func:`describe`, which names the bad value with ``!r``.

Notes
-----
* **Numbers as text** (CSV, JSON strings) may carry white space around them; ``nan``, ``inf``, ``1,5``
  and empty text are not numbers. A null (an empty CSV field, a JSON ``null`` or a missing key) is
  *missing*.
* **Times.** Numbers are epoch seconds or epoch milliseconds: with ``unit="auto"`` a value above
  ``1e11`` (year 1973 in milliseconds, year 5138 in seconds) is milliseconds, anything else seconds;
  ``"s"`` and ``"ms"`` force one for numbers (ISO-8601 text is still read); ``"iso"`` accepts ISO-8601 text only. ISO-8601 text needs a date and a
  time to the minute (``2024-05-01T08:30``, seconds, fractions and a zone ``Z``/``+02:00`` optional; no
  zone means UTC). A timestamp column (Parquet) is taken as it is (no zone: UTC). Times are resolved to
  the millisecond (seconds rounded, ISO fractions truncated) and must lie in
  ``[1970-01-01, 9999-12-31]`` (the event contract's ``[0, MAX_EPOCH_MS]``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.contracts.events import EVENT_LAT_LIMIT, EVENT_LON_LIMIT, MAX_EPOCH_MS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.int8]

MS_THRESHOLD = 1e11  # auto unit: a number above this is epoch milliseconds
TIME_UNITS = ("auto", "s", "ms", "iso")
NUMBER_RE = r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$"
ISO_RE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[-+][0-9]{2}(:?[0-9]{2})?)?$"
ZONE_RE = r"(Z|[-+][0-9]{2}(:?[0-9]{2})?)$"

OK, MISSING, NOT_NUMBER, NOT_FINITE, OUT_OF_RANGE, BAD_TIME, TIME_RANGE = range(7)


def describe(problem: int, name: str, value: object, what: str) -> str:
    """The quarantine reason (``code: detail``) of a row's first problem; ``what`` is ``lat``, ``lon`` or ``time``.

    Notes
    -----
    The detail names the column as the file calls it and the bad value with ``!r``.
    """
    if problem == MISSING:
        code = "bad_timestamp" if what == "time" else "missing_field"
        return f"{code}: {name} is missing (empty or null)"
    if what == "time":
        if problem == TIME_RANGE:
            return f"bad_timestamp: {name} {value!r} is outside 1970-01-01 .. 9999-12-31"
        return f"bad_timestamp: {name} {value!r} is not epoch seconds, epoch milliseconds or ISO-8601"
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


def _text_numbers(col: Any) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Text -> float64 where it is a number (else NaN) and the mask of values that are numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(col)
    ok = pc.fill_null(pc.match_substring_regex(text, NUMBER_RE), False)
    values = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.string())), pa.float64())
    return _floats(values), np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)


def _floats(col: Any) -> FloatArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    out: FloatArray = np.asarray(pc.fill_null(pc.cast(col, pa.float64()), float("nan")).to_numpy(), dtype=np.float64)
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


def epoch_ms(col: Any, unit: str = "auto") -> tuple[IntArray, CodeArray]:
    """A time column as epoch milliseconds (int64) and a problem code per row (see the module Notes)."""
    import pyarrow as pa

    n = len(col)
    ms = np.full(n, np.nan)
    codes = np.zeros(n, dtype=np.int8)
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        ms = _timestamp_ms(col)
    elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        ms = _number_ms(_floats(col), unit)
    elif _is_text(col):
        ms = _text_ms(col, unit)
    with np.errstate(invalid="ignore"):
        codes[~np.isfinite(ms)] = BAD_TIME
        codes[(codes == OK) & ((ms < 0) | (ms > MAX_EPOCH_MS))] = TIME_RANGE
    codes[_nulls(col)] = MISSING
    return np.where(codes == OK, ms, 0.0).astype(np.int64), codes


def _number_ms(v: FloatArray, unit: str) -> FloatArray:
    if unit == "iso":
        return np.full(len(v), np.nan)
    if unit == "ms":
        return np.round(v)
    if unit == "s":
        return np.round(v * 1000.0)
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(np.abs(v) > MS_THRESHOLD, np.round(v), np.round(v * 1000.0))
    return out


def _timestamp_ms(col: Any) -> FloatArray:
    import pyarrow as pa
    import pyarrow.compute as pc

    tz = col.type.tz if pa.types.is_timestamp(col.type) else None
    as_ms = pc.cast(pc.cast(col, pa.timestamp("ms", tz=tz), safe=False), pa.int64())
    return _floats(as_ms)


def _text_ms(col: Any, unit: str) -> FloatArray:
    """Text times: numbers by ``unit``, ISO-8601 strings parsed (zone-less as UTC), anything else NaN."""
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(col)
    values, number = _text_numbers(text)
    ms = _number_ms(values, unit)
    ms[~number] = np.nan
    iso = np.asarray(pc.fill_null(pc.match_substring_regex(text, ISO_RE), False).to_numpy(zero_copy_only=False),
                     dtype=bool)
    rows = np.flatnonzero(iso & ~number)
    if len(rows):
        ms[rows] = _iso_ms(pc.take(text, rows))
    return ms


def _iso_ms(text: Any) -> FloatArray:
    """ISO-8601 strings (shape checked) -> epoch ms; Arrow's parser first, Python's for what it refuses."""
    import pyarrow as pa
    import pyarrow.compute as pc

    zoned = np.asarray(pc.match_substring_regex(text, ZONE_RE).to_numpy(zero_copy_only=False), dtype=bool)
    out = np.full(len(text), np.nan)
    for mask, tz in ((zoned, "UTC"), (~zoned, None)):
        idx = np.flatnonzero(mask)
        if not len(idx):
            continue
        part = pc.take(text, idx)
        try:
            ns = pc.cast(pc.cast(part, pa.timestamp("ns", tz=tz)), pa.int64()).to_numpy(zero_copy_only=False)
            out[idx] = np.floor_divide(np.asarray(ns, dtype=np.int64), 1_000_000)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out[idx] = [_python_iso_ms(s) for s in part.to_pylist()]
    return out


def _python_iso_ms(text: str) -> float:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return float("nan")
    t = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return float((t - datetime(1970, 1, 1, tzinfo=UTC)) // _MS)


_MS = datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
