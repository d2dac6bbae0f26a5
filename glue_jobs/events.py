"""Event validation and quarantine as Spark column expressions (no paths, no sessions, no I/O).

The Spark side of the event rules of CONTRACTS.md "Events" (the limits, required fields and reason codes live
in :mod:`geokernel.contracts`; :mod:`geokernel.events` applies the same rules to single records in the
router and the workers, and ``tests/events/event_rules.json`` holds both to one table)::

    Kinesis payloads (binary data, source)
      -> deaggregate_records  one text row per user record (KPL aggregated records split, before the JSON parse)
    raw (value, source)
      -> classify_events      one row per record, typed fields + ``reason`` (null = valid)
      -> valid_events         the events the aggregation counts
      -> quarantine_records   the rest, shaped as CONTRACTS.md quarantine records

Nothing here can raise on bad data, on Spark 3.5 or 4.0, with ANSI mode on or off: bad data becomes a
quarantine reason instead.

Notes
-----
Reason codes, first failing check wins:
``unparsable_json``, ``not_an_object``, ``missing_field`` (absent, JSON null or empty id),
``bad_type`` (lat/lon not a JSON number; an id given as an object or array),
``nan``, ``lat_out_of_range``, ``lon_out_of_range``, ``bad_timestamp``. Ids given as JSON
numbers are accepted as their JSON text. ``ts`` is read by the time unit rule under the mapping's
``ts_unit`` (:mod:`glue_jobs.timestamps`, :mod:`geokernel.contracts.timestamps`): an epoch number (a JSON
number, or the same as text) in seconds, milliseconds or microseconds, or an ISO-8601 date-time string
(``YYYY-MM-DDTHH:MM[:SS[.fff]]`` with ``Z`` or an offset; without one it is read in the
session time zone, which every entry point sets to UTC), rounded to the millisecond and plausible
(``[2000-01-01, now + 1 day]``, now the batch's ``current_timestamp()``). The ``ts`` column is that
millisecond. A document with trailing bytes after the first JSON value is read as that value (Spark's
JSON reader stops there).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, SPARK_CORRUPT_COLUMN, EventFields

# Points between tiles.MAX_LAT and EVENT_LAT_LIMIT are valid; the quadkey expressions clamp them.
from geokernel.contracts.events import (
    EVENT_LAT_LIMIT,
    EVENT_LON_LIMIT,
    MAX_PARTITION_KEY,
    REQUIRED_FIELDS,
    ReasonCode,
)
from geokernel.contracts.kpl import KPL_MAGIC, SUB_RECORD_MARK, KplError, deaggregate, is_aggregated
from glue_jobs.timestamps import ts_columns

_JSON_SCALAR = r'^(-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|null|"([^"\\]|\\.)*")$'

#: Columns of :func:`classify_events` output besides the raw ones.
EVENT_COLUMNS: tuple[str, ...] = ("event_id", "entity_id", "ts", "lat", "lon", "source")


def classify_events(raw: DataFrame, value_col: str = "value", source_col: str = "source",
                    fields: EventFields = DEFAULT_EVENT_FIELDS, now_ms: int | None = None) -> DataFrame:
    """Parse raw JSON records and attach a quarantine reason to the bad ones.

    Parameters
    ----------
    raw : DataFrame
        One record per row: ``value_col`` (the record text) and ``source_col`` (where it came
        from: ``file:line`` or ``stream/shard/sequence``); rows of :func:`deaggregate_records` may also carry
        :data:`DECODE_REASON`, a quarantine reason that wins over the event checks.
    value_col, source_col : str
        Column names in ``raw``.
    fields : EventFields
        Which JSON key holds each event field and the ``ts_unit`` (``--event-fields``; default the canonical names,
        ``auto``). Reasons name the producer's keys; the output columns have the canonical names.
    now_ms : int, optional
        The clock (epoch ms) the plausible window of ``ts`` ends a day after; default the batch's current time.

    Returns
    -------
    DataFrame
        Columns ``raw`` (string), ``source``, ``event_id``, ``entity_id``, ``ts`` (timestamp, to the millisecond),
        ``lat``, ``lon`` (double) and ``reason`` (string ``"<code>: <detail>"``, null when the
        event is valid). Typed fields are null on quarantined rows.
    """
    value = F.col(value_col).cast("string")
    parsed = raw.select(
        value.alias("raw"),
        F.col(source_col).cast("string").alias("source"),
        F.from_json(value, text_schema(fields)).alias("_t"),
        F.from_json(value, StructType([StructField(n, DoubleType()) for n in (fields.lat, fields.lon)])).alias("_n"),
        _decode_reason(raw).alias("_decode"),
    )
    names = dict(zip(REQUIRED_FIELDS, fields.names, strict=True))  # canonical -> the producer's key
    text = {f: F.col("_t").getField(names[f]) for f in REQUIRED_FIELDS}
    lat, lon = F.col("_n").getField(fields.lat), F.col("_n").getField(fields.lon)
    when = ts_columns(text["ts"], _quoted(text["ts"]), fields.ts_unit, fields.ts,
                      None if now_ms is None else F.lit(now_ms))
    ts = F.timestamp_millis(when.ms)
    reason = F.coalesce(F.col("_decode"), _reason(F.col("raw"), F.col("_t"), text, (lat, lon, when.reason), names))
    return parsed.select(
        "raw",
        "source",
        F.when(reason.isNull(), text["event_id"]).alias("event_id"),
        F.when(reason.isNull(), text["entity_id"]).alias("entity_id"),
        F.when(reason.isNull(), ts).alias("ts"),
        F.when(reason.isNull(), lat).alias("lat"),
        F.when(reason.isNull(), lon).alias("lon"),
        reason.alias("reason"),
    )


def text_schema(fields: EventFields = DEFAULT_EVENT_FIELDS) -> StructType:
    """Every event field (under the producer's key) as text, and Spark's corrupt-record column."""
    return StructType([StructField(n, StringType()) for n in (*fields.names, SPARK_CORRUPT_COLUMN)])


def valid_events(classified: DataFrame) -> DataFrame:
    """Rows of :func:`classify_events` without a reason: ``event_id, entity_id, ts, lat, lon, source``."""
    return classified.where(F.col("reason").isNull()).select(*EVENT_COLUMNS)


def quarantine_records(classified: DataFrame, quarantined_at: Column | None = None) -> DataFrame:
    """Rows of :func:`classify_events` with a reason, shaped as CONTRACTS.md quarantine records.

    Parameters
    ----------
    classified : DataFrame
        Output of :func:`classify_events`.
    quarantined_at : Column, optional
        ISO timestamp string column; defaults to the batch's ``current_timestamp()`` in UTC.

    Returns
    -------
    DataFrame
        ``reason, raw, source, quarantined_at`` (all strings) plus ``code`` (the reason code).
    """
    at = quarantined_at if quarantined_at is not None else F.date_format(
        F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    return classified.where(F.col("reason").isNotNull()).select(
        "reason",
        "raw",
        "source",
        at.alias("quarantined_at"),
        F.substring_index("reason", ":", 1).alias("code"),
    )


def _reason(raw: Column, t: Column, text: dict[str, Column], lat_lon_ts: tuple[Column, Column, Column],
            names: dict[str, str]) -> Column:
    """The first failing check's reason; ``text`` by canonical name, messages by ``names`` (the producer's keys);
    ``lat_lon_ts`` the typed coordinates and the time's reason (:func:`glue_jobs.timestamps.ts_columns`)."""
    lat, lon, ts_reason = lat_lon_ts
    esc = {k: v.replace("%", "%%") for k, v in names.items()}  # names inside format_string patterns
    trimmed = F.trim(raw)
    corrupt = t.isNull() | t[SPARK_CORRUPT_COLUMN].isNotNull()
    is_array = trimmed.startswith("[") & F.from_json(trimmed, "array<string>").isNotNull()
    not_object = is_array | trimmed.rlike(_JSON_SCALAR)
    checks: list[tuple[Column, Column]] = [
        (raw.isNull() | (trimmed == ""), F.lit("unparsable_json: record is empty")),
        (corrupt & not_object, F.concat(F.lit("not_an_object: record is a JSON "),
                                        F.when(is_array, F.lit("array")).otherwise(F.lit("scalar")),
                                        F.lit(", not an object: "), _clip(trimmed))),
        (corrupt, F.concat(F.lit("unparsable_json: not valid JSON: "), _clip(trimmed))),
    ]
    for field in REQUIRED_FIELDS:
        value = text[field]
        empty_id = F.lit(False) if field in ("ts", "lat", "lon") else (value == "")
        checks.append((value.isNull() | empty_id,
                       F.lit(f"missing_field: {names[field]} is missing, null or empty")))
    for field in ("event_id", "entity_id"):
        value = text[field]
        checks.append((value.startswith("{") | value.startswith("["),
                       F.format_string(f"bad_type: {esc[field]} must be a string, got %s", _clip(value))))
    checks.append((F.length(text["entity_id"]) > MAX_PARTITION_KEY,
                   F.format_string(f"bad_type: {esc['entity_id']} longer than {MAX_PARTITION_KEY} characters (a Kinesis "
                                   "partition key): %s", _clip(text["entity_id"]))))
    for field, typed in (("lat", lat), ("lon", lon)):
        checks.append((typed.isNull(),
                       F.format_string(f"bad_type: {esc[field]} must be a JSON number, got %s",
                                       _quoted(text[field]))))
    for field, typed in (("lat", lat), ("lon", lon)):
        checks.append((F.isnan(typed), F.lit(f"nan: {names[field]} is NaN")))
    checks.append(((lat < -EVENT_LAT_LIMIT) | (lat > EVENT_LAT_LIMIT),
                   F.format_string(f"lat_out_of_range: {esc['lat']}=%s is outside "
                                   f"[-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}]", text["lat"])))
    checks.append(((lon < -EVENT_LON_LIMIT) | (lon > EVENT_LON_LIMIT),
                   F.format_string(f"lon_out_of_range: {esc['lon']}=%s is outside "
                                   f"[-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}]", text["lon"])))
    checks.append((ts_reason.isNotNull(), ts_reason))
    out = F.when(checks[0][0], checks[0][1])
    for cond, msg in checks[1:]:
        out = out.when(cond, msg)
    return out


def _clip(text: Column, limit: int = 120) -> Column:
    """At most ``limit`` characters of ``text`` (quarantine details stay readable)."""
    return F.when(F.length(text) > limit, F.concat(F.substring(text, 1, limit), F.lit("..."))).otherwise(text)


def _quoted(text: Column) -> Column:
    return F.concat(F.lit("'"), _clip(text), F.lit("'"))


# ---------------------------------------------------------------------------
# Decoding: binary Kinesis payloads (KPL aggregated or not) -> one text record per user record
# ---------------------------------------------------------------------------

#: Column of :func:`deaggregate_records` rows: a quarantine reason found while decoding (null when none).
DECODE_REASON = "decode_reason"
_KPL_RESULT = T.StructType([T.StructField("payloads", T.ArrayType(T.StringType())),
                            T.StructField("problem", T.StringType())])


def deaggregate_records(raw: DataFrame, data_col: str = "data", source_col: str = "source") -> DataFrame:
    """Binary Kinesis payloads -> ``value, source, decode_reason`` rows, one per user record, before the JSON parse.

    A payload that is not a KPL aggregated record (:func:`geokernel.contracts.kpl.is_aggregated`) is one row,
    its bytes as text (the cast the records had before), ``source`` unchanged; its bytes never reach Python: only
    rows starting with the KPL magic are sent to the decoder (a Python UDF, see ``_kpl_decode``). An aggregated one
    becomes a row per user record, ``source`` = ``<source>/sub=<index>``
    (:func:`geokernel.contracts.kpl.sub_record_source`); one that does not decode is one row whose ``value`` is
    the record's base64 and whose :data:`DECODE_REASON` is ``corrupt_kpl_record: <what is wrong>``
    (:func:`classify_events` quarantines it with that reason). An aggregated record with no user records gives
    no row (as the KCL). Same rows on Spark 3.5 and 4.

    Parameters
    ----------
    raw : DataFrame
        Streaming or static; ``data_col`` binary, ``source_col`` where the record came from.
    data_col, source_col : str
        Column names in ``raw``.

    Returns
    -------
    DataFrame
        ``value`` (string), ``source`` (string), ``decode_reason`` (string, null for a decoded record).
    """
    data = F.col(data_col)
    candidate = F.substring(data, 1, len(KPL_MAGIC)) == F.unhex(F.lit(KPL_MAGIC.hex()))
    decoded = raw.select(data.alias("_d"), F.col(source_col).cast("string").alias("_s"),
                         _kpl_decode(F.when(candidate, data), F.when(candidate, F.col(source_col).cast("string")))
                         .alias("_k"))
    payloads, problem = F.col("_k.payloads"), F.col("_k.problem")
    whole = F.when(problem.isNull(), F.col("_d").cast("string")).otherwise(F.base64(F.col("_d")))
    values = F.when(payloads.isNotNull(), payloads).otherwise(F.array(whole))
    rows = decoded.select("_s", payloads.isNotNull().alias("_sub"), problem.alias("_p"),
                          F.posexplode(values).alias("_i", "value"))
    return rows.select(
        "value",
        F.when(F.col("_sub"), F.concat(F.col("_s"), F.lit(SUB_RECORD_MARK), F.col("_i").cast("string")))
        .otherwise(F.col("_s")).alias("source"),
        F.when(F.col("_p").isNotNull(), F.concat(F.lit(f"{ReasonCode.CORRUPT_KPL_RECORD}: "), F.col("_p")))
        .alias(DECODE_REASON),
    )


def _decode_kpl(blob: bytes | bytearray | None, where: str | None) -> tuple[list[str] | None, str | None] | None:
    """One row: ``(payload texts, None)`` of an aggregated record, ``(None, what is wrong)``, or None (not one)."""
    if blob is None or not is_aggregated(bytes(blob)):
        return None
    try:
        return [p.decode("utf-8", errors="replace") for p in deaggregate(bytes(blob), str(where))], None
    except KplError as exc:
        return None, str(exc)


#: A plain Python UDF, not a pandas one: the EMR Serverless runtime the job runs on is not known to ship pandas and
#: pyarrow (the job ships only py-files), and only rows starting with the KPL magic carry their bytes to Python
#: (the others pass a null), so the Python cost is per aggregated record, shared by its dozens of events.
_kpl_decode = F.udf(_decode_kpl, _KPL_RESULT)


def _decode_reason(raw: DataFrame) -> Column:
    """The :data:`DECODE_REASON` column of ``raw`` when it has one, else null."""
    return F.col(DECODE_REASON) if DECODE_REASON in raw.columns else F.lit(None).cast("string")
