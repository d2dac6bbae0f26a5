"""Pure DataFrame transforms of the aggregation job (no paths, no sessions, no I/O).

Every entry point (EMR Serverless, Glue streaming, the local runner, the benchmarks)
calls the same functions, in this order::

    raw (value, source)
      -> classify_events      one row per record, typed fields + ``reason`` (null = valid)
      -> valid_events / quarantine_records
      -> aggregate_cells      native tile code (mercantile semantics) + aggregate_windows:
                              per (window, fine quadkey) counts, watermark, late-data policy
      -> with_cost            optional: cost = events * reported rate (seed 004)
      -> rollup_quadtree      the snapshot rows (CONTRACTS.md "Load snapshot")

They run unchanged on Spark 3.5 (Glue 5.1) and Spark 4.0 (EMR emr-spark-8.0.0), with
ANSI mode on or off: nothing here can raise on bad data, bad data becomes a quarantine
reason instead.

Notes
-----
Validation follows CONTRACTS.md "Events". Reason codes, first failing check wins:
``unparsable_json``, ``not_an_object``, ``missing_field`` (absent, JSON null or empty id),
``bad_type`` (lat/lon not a JSON number; an id given as an object or array),
``nan``, ``lat_out_of_range``, ``lon_out_of_range``, ``bad_timestamp``. Ids given as JSON
numbers are accepted as their JSON text. ``ts`` is epoch milliseconds (a JSON number, or a
string of digits) in [0, 253402300799999], or an ISO-8601 date-time string
(``YYYY-MM-DDTHH:MM[:SS[.fff]]`` with ``Z`` or an offset; without one it is read in the
session time zone, which every entry point sets to UTC). A document with trailing bytes
after the first JSON value is read as that value (Spark's JSON reader stops there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# The event rules (limits, required fields, reason codes) live in partitioner.contracts; points between
# tiles.MAX_LAT and EVENT_LAT_LIMIT are valid and clamp.
from partitioner.contracts.events import (
    EVENT_LAT_LIMIT,
    EVENT_LON_LIMIT,
    ISO_DATETIME_PREFIX,
    MAX_EPOCH_MS,
    MAX_PARTITION_KEY,
    REQUIRED_FIELDS,
)
from partitioner.tiles import EPSILON, MAX_LAT, MAX_ZOOM

_TEXT_SCHEMA = (
    "struct<event_id:string, entity_id:string, ts:string, lat:string, lon:string, _corrupt_record:string>"
)
_TYPED_SCHEMA = "struct<lat:double, lon:double>"
_JSON_SCALAR = r'^(-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|null|"([^"\\]|\\.)*")$'
_EPOCH_NUMBER = r"^-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?$"

#: Columns of :func:`classify_events` output besides the raw ones.
EVENT_COLUMNS: tuple[str, ...] = ("event_id", "entity_id", "ts", "lat", "lon", "source")


class WindowSpec(NamedTuple):
    """Windowing of the load: ``length`` and ``slide`` as Spark interval strings.

    ``slide`` equal to ``length`` is a tumbling window; shorter is sliding (each event counts
    in ``length / slide`` windows). ``watermark`` is the allowed event-time lateness.
    """

    length: str = "60 seconds"
    slide: str | None = None
    watermark: str = "2 minutes"


class RollupSpec(NamedTuple):
    """Shape of the rolled-up quadtree (CONTRACTS.md "Load snapshot")."""

    grid_zoom: int = 12
    zoom: int = 18
    refine_events: int = 500


def check_rollup(spec: RollupSpec) -> RollupSpec:
    """Return ``spec`` if ``0 <= grid_zoom <= zoom <= MAX_ZOOM`` and ``refine_events >= 0``, else raise ValueError."""
    if not 0 <= spec.grid_zoom <= spec.zoom <= MAX_ZOOM:
        raise ValueError(f"rollup: need 0 <= grid_zoom <= zoom <= {MAX_ZOOM}, got grid_zoom={spec.grid_zoom!r}, "
                         f"zoom={spec.zoom!r}")
    if spec.refine_events < 0:
        raise ValueError(f"rollup: refine_events must be >= 0, got {spec.refine_events!r}")
    return spec


# ---------------------------------------------------------------------------
# Validation and quarantine
# ---------------------------------------------------------------------------


def classify_events(raw: DataFrame, value_col: str = "value", source_col: str = "source") -> DataFrame:
    """Parse raw JSON records and attach a quarantine reason to the bad ones.

    Parameters
    ----------
    raw : DataFrame
        One record per row: ``value_col`` (the record text) and ``source_col`` (where it came
        from: ``file:line`` or ``stream/shard/sequence``).
    value_col, source_col : str
        Column names in ``raw``.

    Returns
    -------
    DataFrame
        Columns ``raw`` (string), ``source``, ``event_id``, ``entity_id``, ``ts`` (timestamp),
        ``lat``, ``lon`` (double) and ``reason`` (string ``"<code>: <detail>"``, null when the
        event is valid). Typed fields are null on quarantined rows.
    """
    value = F.col(value_col).cast("string")
    parsed = raw.select(
        value.alias("raw"),
        F.col(source_col).cast("string").alias("source"),
        F.from_json(value, _TEXT_SCHEMA).alias("_t"),
        F.from_json(value, _TYPED_SCHEMA).alias("_n"),
    )
    text = {f: F.col(f"_t.{f}") for f in REQUIRED_FIELDS}
    lat, lon = F.col("_n.lat"), F.col("_n.lon")
    ts = _timestamp_of(text["ts"])
    reason = _reason(F.col("raw"), F.col("_t"), text, lat, lon, ts)
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


def _timestamp_of(text: Column) -> Column:
    """Timestamp of a ``ts`` field text (epoch ms or ISO-8601), null when it is neither."""
    trimmed = F.trim(text)
    is_number = trimmed.rlike(_EPOCH_NUMBER)
    millis = F.when(is_number, trimmed.cast("double"))
    in_range = (millis >= 0) & (millis <= MAX_EPOCH_MS)
    from_millis = F.when(is_number & in_range, F.timestamp_millis(F.floor(millis).cast("long")))
    iso = F.when(~is_number & trimmed.rlike(ISO_DATETIME_PREFIX), F.try_to_timestamp(trimmed))
    return F.coalesce(from_millis, iso)


def _reason(raw: Column, t: Column, text: dict[str, Column], lat: Column, lon: Column, ts: Column) -> Column:
    trimmed = F.trim(raw)
    corrupt = t.isNull() | t["_corrupt_record"].isNotNull()
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
                       F.lit(f"missing_field: {field} is missing, null or empty")))
    for field in ("event_id", "entity_id"):
        value = text[field]
        checks.append((value.startswith("{") | value.startswith("["),
                       F.format_string(f"bad_type: {field} must be a string, got %s", _clip(value))))
    checks.append((F.length(text["entity_id"]) > MAX_PARTITION_KEY,
                   F.format_string(f"bad_type: entity_id longer than {MAX_PARTITION_KEY} characters (a Kinesis "
                                   "partition key): %s", _clip(text["entity_id"]))))
    for field, typed in (("lat", lat), ("lon", lon)):
        checks.append((typed.isNull(),
                       F.format_string(f"bad_type: {field} must be a JSON number, got %s", _quoted(text[field]))))
    for field, typed in (("lat", lat), ("lon", lon)):
        checks.append((F.isnan(typed), F.lit(f"nan: {field} is NaN")))
    checks.append(((lat < -EVENT_LAT_LIMIT) | (lat > EVENT_LAT_LIMIT),
                   F.format_string(f"lat_out_of_range: lat=%s is outside [-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}]",
                                   text["lat"])))
    checks.append(((lon < -EVENT_LON_LIMIT) | (lon > EVENT_LON_LIMIT),
                   F.format_string(f"lon_out_of_range: lon=%s is outside [-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}]",
                                   text["lon"])))
    checks.append((ts.isNull(), F.format_string(
        "bad_timestamp: ts=%s is neither epoch milliseconds in [0, %s] nor an ISO-8601 date-time",
        _quoted(text["ts"]), F.lit(str(MAX_EPOCH_MS)))))
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
# Quadkeys (native expressions; mercantile.tile + mercantile.quadkey semantics)
# ---------------------------------------------------------------------------


def tile_index(unit: Column, zoom: int) -> Column:
    """Tile index along one axis of a unit coordinate in [0, 1] (mercantile's rule).

    ``u <= 0`` -> 0, ``u >= 1`` -> ``2**zoom - 1``, else ``floor((u + EPSILON) * 2**zoom)``
    capped at ``2**zoom - 1`` (mercantile would return ``2**zoom`` for ``u`` within EPSILON
    below 1; partitioner.tiles caps it, and so do we). Written as one clamp of the floor: for
    ``u <= 0`` the floor is 0 or negative (``EPSILON * 2**30 < 1``), for ``u >= 1`` it is at
    least ``2**zoom``, so no branch is needed.
    """
    n = float(1 << zoom)
    idx = F.floor((unit + F.lit(EPSILON)) * F.lit(n))
    return F.greatest(F.least(idx, F.lit(int(n) - 1)), F.lit(0)).cast("long")


def tile_xy(lon: Column, lat: Column, zoom: int) -> tuple[Column, Column]:
    """Tile ``x`` and ``y`` (long columns) of ``lon``/``lat`` degrees at ``zoom``.

    Latitudes are clamped to +/-MAX_LAT first (poles go to the edge rows); lon 180 lands in
    the last column. Same float operations, in the same order, as ``partitioner.tiles``.
    """
    clamped = F.greatest(F.least(lat, F.lit(MAX_LAT)), F.lit(-MAX_LAT))
    ux = lon / F.lit(360.0) + F.lit(0.5)
    sinlat = F.sin(F.radians(clamped))
    uy = F.lit(0.5) - F.lit(0.25) * F.log((F.lit(1.0) + sinlat) / (F.lit(1.0) - sinlat)) / F.lit(math.pi)
    return tile_index(ux, zoom), tile_index(uy, zoom)


_SPREAD = (
    (16, 0x0000FFFF0000FFFF),
    (8, 0x00FF00FF00FF00FF),
    (4, 0x0F0F0F0F0F0F0F0F),
    (2, 0x3333333333333333),
    (1, 0x5555555555555555),
)


def _spread_bits(v: Column) -> Column:
    """Insert a zero bit above each of the low 32 bits of ``v`` (Morton interleave helper)."""
    for shift, mask in _SPREAD:
        v = v.bitwiseOR(F.shiftleft(v, shift)).bitwiseAND(F.lit(mask))
    return v


def morton_of_xy(x: Column, y: Column) -> Column:
    """Interleaved tile code (long): bit pairs ``(ybit, xbit)``, i.e. the quadkey read in base 4."""
    return _spread_bits(x).bitwiseOR(F.shiftleft(_spread_bits(y), 1))


def quadkey_of_code(code: Column, zoom: int) -> Column:
    """Quadkey string of an interleaved tile code (see :func:`morton_of_xy`) at ``zoom``."""
    if zoom == 0:
        return F.lit("")
    return F.lpad(F.conv(code.cast("string"), 10, 4), zoom, "0")


def quadkey_of_xy(x: Column, y: Column, zoom: int) -> Column:
    """Quadkey string of tile ``x``, ``y`` at ``zoom``: one digit ``2*ybit + xbit`` per level."""
    return quadkey_of_code(morton_of_xy(x, y), zoom)


def cell_key(x: Column, y: Column, zoom: int) -> Column:
    """Row-major cell key (long) of tile ``x``, ``y`` at ``zoom``: ``x << zoom | y``.

    One shift and one OR per event, against about twenty bit operations for the Morton
    code; the job groups on this key and formats each cell's quadkey once, after the
    aggregation (:func:`quadkey_of_cell`).
    """
    return F.shiftleft(x, zoom).bitwiseOR(y)


def quadkey_of_cell(key: Column, zoom: int) -> Column:
    """Quadkey string of a :func:`cell_key` at ``zoom``."""
    x = F.shiftright(key, zoom)
    y = key.bitwiseAND(F.lit((1 << zoom) - 1))
    return quadkey_of_xy(x, y, zoom)


def cell_key_expr(lon: Column, lat: Column, zoom: int) -> Column:
    """Native expression for the :func:`cell_key` of a point at ``zoom``.

    ``quadkey_of_cell(cell_key_expr(lon, lat, z), z) == quadkey_expr(lon, lat, z)``. Aggregating on
    this long and formatting the quadkey string once per cell afterwards is the job's hot path.
    """
    _check_zoom(zoom)
    x, y = tile_xy(lon, lat, zoom)
    return cell_key(x, y, zoom)


def quadkey_expr(lon: Column, lat: Column, zoom: int) -> Column:
    """Native Spark expression for ``mercantile.quadkey(mercantile.tile(lon, lat, zoom))``.

    Parameters
    ----------
    lon, lat : Column
        Degrees, already validated (finite, lon in [-180, 180]); lat is clamped here.
    zoom : int
        Zoom level in [0, 30].

    Returns
    -------
    Column
        String quadkey of ``zoom`` digits (``""`` at zoom 0).
    """
    _check_zoom(zoom)
    x, y = tile_xy(lon, lat, zoom)
    return quadkey_of_xy(x, y, zoom)


def _check_zoom(zoom: object) -> None:
    if isinstance(zoom, bool) or not isinstance(zoom, int) or not 0 <= zoom <= MAX_ZOOM:
        raise ValueError(f"quadkey: zoom must be an integer in [0, {MAX_ZOOM}], got {zoom!r}")


def with_cell_key(df: DataFrame, zoom: int, lon_col: str = "lon", lat_col: str = "lat",
                  out_col: str = "cell") -> DataFrame:
    """Return ``df`` with ``out_col`` = :func:`cell_key` of (``lon_col``, ``lat_col``) at ``zoom``.

    Computed in two projections (unit coordinates, then the key) so the trigonometry is
    evaluated once per row even where Spark would otherwise inline a reused sub-expression.
    """
    _check_zoom(zoom)
    cols = [c for c in df.columns if c != out_col]
    lat = F.greatest(F.least(F.col(lat_col), F.lit(MAX_LAT)), F.lit(-MAX_LAT))
    sinlat = F.sin(F.radians(lat))
    staged = df.select(
        *cols,
        (F.col(lon_col) / F.lit(360.0) + F.lit(0.5)).alias("_ux"),
        (F.lit(0.5) - F.lit(0.25) * F.log((F.lit(1.0) + sinlat) / (F.lit(1.0) - sinlat)) / F.lit(math.pi)).alias("_uy"),
    )
    return staged.select(*cols, cell_key(tile_index(F.col("_ux"), zoom), tile_index(F.col("_uy"), zoom), zoom)
                         .alias(out_col))


def with_quadkey(df: DataFrame, zoom: int, lon_col: str = "lon", lat_col: str = "lat",
                 out_col: str = "quadkey") -> DataFrame:
    """Return ``df`` with ``out_col`` = quadkey of (``lon_col``, ``lat_col``) at ``zoom`` (same as :func:`quadkey_expr`)."""
    coded = with_cell_key(df, zoom, lon_col, lat_col, "_qk_cell")
    cols = [c for c in coded.columns if c not in ("_qk_cell", out_col)]
    return coded.select(*cols, quadkey_of_cell(F.col("_qk_cell"), zoom).alias(out_col))


# ---------------------------------------------------------------------------
# Windowed aggregation
# ---------------------------------------------------------------------------


def aggregate_windows(events: DataFrame, window: WindowSpec, ts_col: str = "ts",
                      quadkey_col: str = "quadkey") -> DataFrame:
    """Count events per (event-time window, quadkey).

    Parameters
    ----------
    events : DataFrame
        Valid events with a timestamp column ``ts_col`` and a quadkey column (see
        :func:`with_quadkey`), batch or streaming.
    window : WindowSpec
        Window length, slide (None = tumbling) and watermark.

    Returns
    -------
    DataFrame
        ``window_start, window_end`` (timestamps), ``quadkey``, ``events`` (long).

    Notes
    -----
    **Late-data policy** (the streaming job, :class:`glue_jobs.window_state.WindowStore`, applying Spark's
    append-mode rules to these per-micro-batch counts): the watermark is ``max(event time seen) -
    window.watermark``, advanced at the end of each micro-batch. A window is emitted exactly once, when the
    watermark passes its end, so a snapshot is final when written. An event whose window is still open is
    counted even if it arrives out of order. An event whose window ended at or before the watermark is **not
    counted** in any snapshot, and the drop is counted in the job's per-batch progress line
    (``late_dropped=``, once per window the event falls in). On a batch DataFrame (backfill) the watermark is a
    no-op: every event is counted in its window.
    """
    win = F.window(F.col(ts_col), window.length, window.slide) if window.slide else F.window(
        F.col(ts_col), window.length)
    return (
        events.withWatermark(ts_col, window.watermark)
        .groupBy(win.alias("w"), F.col(quadkey_col).alias("quadkey"))
        .agg(F.count(F.lit(1)).alias("events"))
        .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "quadkey", "events")
    )


def aggregate_cells(events: DataFrame, window: WindowSpec, zoom: int, ts_col: str = "ts", lon_col: str = "lon",
                    lat_col: str = "lat") -> DataFrame:
    """Count events per (window, quadkey at ``zoom``) straight from ``lon``/``lat``: the hot path.

    Same result as ``aggregate_windows(with_quadkey(events, zoom), window)`` but groups on the
    row-major cell key (a long, :func:`cell_key`) and formats each cell's quadkey string once, after the
    aggregation. Late-data policy: see :func:`aggregate_windows`.

    Returns
    -------
    DataFrame
        ``window_start, window_end, quadkey, events``.
    """
    coded = with_cell_key(events, zoom, lon_col, lat_col, "_cell")
    counts = aggregate_windows(coded, window, ts_col, "_cell")
    return counts.select("window_start", "window_end", quadkey_of_cell(F.col("quadkey"), zoom).alias("quadkey"),
                         "events")


# ---------------------------------------------------------------------------
# Cost and rollup
# ---------------------------------------------------------------------------


def with_cost(fine: DataFrame, rates: DataFrame | None, rate_zooms: Sequence[int] = ()) -> DataFrame:
    """Attach ``cost = events * rate`` to fine-cell counts (seed 004), null where no rate is known.

    Parameters
    ----------
    fine : DataFrame
        ``window_start, window_end, quadkey, events`` (output of :func:`aggregate_windows`).
    rates : DataFrame or None
        ``quadkey`` (string), ``rate`` (double): normalised cost per event reported by the
        workers. None or empty = cold start: every ``cost`` is null and the partitioner
        falls back to ``events``.
    rate_zooms : sequence of int
        The distinct quadkey lengths present in ``rates``. A fine cell takes the rate of the
        deepest listed quadkey that is a prefix of it (its own, or an ancestor's).

    Returns
    -------
    DataFrame
        ``fine`` plus ``cost`` (double, nullable).
    """
    if rates is None or not rate_zooms:
        return fine.withColumn("cost", F.lit(None).cast("double"))
    out = fine.withColumn("_rate", F.lit(None).cast("double"))
    for i, z in enumerate(sorted(set(rate_zooms), reverse=True)):
        r = rates.where(F.length("quadkey") == z).select(F.col("quadkey").alias(f"_rq{i}"),
                                                          F.col("rate").cast("double").alias(f"_r{i}"))
        out = (out.join(F.broadcast(r), F.substring(F.col("quadkey"), 1, z) == F.col(f"_rq{i}"), "left")
               .withColumn("_rate", F.coalesce(F.col("_rate"), F.col(f"_r{i}")))
               .drop(f"_rq{i}", f"_r{i}"))
    return out.withColumn("cost", F.col("events") * F.col("_rate")).drop("_rate")


def rollup_quadtree(fine: DataFrame, rollup: RollupSpec, default_rate: float = 1.0) -> DataFrame:
    """Roll fine-cell counts up into the snapshot's quadtree rows.

    Parameters
    ----------
    fine : DataFrame
        ``window_start, window_end, quadkey`` (at ``rollup.zoom``), ``events`` and optionally
        ``cost`` (see :func:`with_cost`). A static DataFrame (inside foreachBatch, or batch).
    rollup : RollupSpec
        ``grid_zoom``, ``zoom`` and ``refine_events``.
    default_rate : float
        Cost per event of a fine cell without a known rate, used only inside a row that
        has at least one known rate (1.0 = one event; rates are normalised, seed 004).

    Returns
    -------
    DataFrame
        ``window_start, window_end, quadkey, zoom, events, cost``: every non-empty cell at
        ``grid_zoom``, plus every non-empty cell at zoom ``L`` in (grid_zoom, zoom] whose
        parent has ``events > refine_events`` (then every ancestor does too: counts only
        grow upwards). ``cost`` is null when no fine cell under the row has a known rate,
        else known costs plus ``default_rate * events`` of the unknown cells, so the
        partitioner's weight (cost if present, else events) adds up the same at every level.
    """
    check_rollup(rollup)
    gz, z = rollup.grid_zoom, rollup.zoom
    cost = F.col("cost") if "cost" in fine.columns else F.lit(None).cast("double")
    levels = fine.select(
        "window_start", "window_end", "events",
        cost.alias("cost"),
        F.explode(F.sequence(F.lit(gz), F.lit(z))).alias("zoom"),
        F.col("quadkey").alias("fine_qk"),
    ).select(
        "window_start", "window_end", "zoom", "events", "cost",
        F.expr("substring(fine_qk, 1, zoom)").alias("quadkey"),
    )
    agg = levels.groupBy("window_start", "window_end", "zoom", "quadkey").agg(
        F.sum("events").alias("events"),
        F.sum("cost").alias("_known_cost"),
        F.sum(F.when(F.col("cost").isNull(), F.col("events"))).alias("_unknown_events"),
    ).select(
        "window_start", "window_end", "zoom", "quadkey", "events",
        F.when(F.col("_known_cost").isNull(), F.lit(None).cast("double"))
        .otherwise(F.col("_known_cost") + F.coalesce(F.col("_unknown_events"), F.lit(0)) * F.lit(default_rate))
        .alias("cost"),
    )
    hot = agg.where(F.col("events") > rollup.refine_events).select(
        F.col("window_start").alias("_ws"), F.col("window_end").alias("_we"), F.col("quadkey").alias("_pq"))
    kept = agg.join(
        hot,
        (agg.window_start == hot._ws) & (agg.window_end == hot._we)
        & (F.expr("substring(quadkey, 1, zoom - 1)") == hot._pq) & (agg.zoom > gz),
        "left",
    ).where((F.col("zoom") == gz) | F.col("_pq").isNotNull())
    return kept.select("window_start", "window_end", "quadkey", "zoom", "events", "cost")


def snapshot_rows(valid: DataFrame, window: WindowSpec, rollup: RollupSpec, rates: DataFrame | None = None,
                  rate_zooms: Sequence[int] = ()) -> DataFrame:
    """Batch convenience: valid events -> quadkeys -> windows -> cost -> rolled-up snapshot rows."""
    fine = aggregate_cells(valid, window, rollup.zoom)
    return rollup_quadtree(with_cost(fine, rates, rate_zooms), rollup)
