"""The aggregation transforms: windowed counts per quadkey, cost, quadtree rollup (no paths, no sessions, no I/O).

Every entry point (EMR Serverless, Glue streaming, the local runner, the benchmarks) calls the same
functions, in this order, after :mod:`glue_jobs.events` has kept the valid events::

    valid events (event_id, entity_id, ts, lat, lon, source)
      -> aggregate_cells      native tile code (:mod:`glue_jobs.quadkeys`) + aggregate_windows:
                              per (window, fine quadkey) counts, watermark, late-data policy
      -> with_cost            optional: cost = events * the rate the workers measured (cost reports)
      -> rollup_quadtree      the snapshot rows (CONTRACTS.md "Load snapshot")

They run unchanged on Spark 3.5 (Glue 5.1) and Spark 4.0 (EMR emr-spark-8.0.0), with ANSI mode on or off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from geokernel.geo.tiles import MAX_ZOOM
from glue_jobs.quadkeys import quadkey_of_cell, with_cell_key


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


def aggregate_windows(events: DataFrame, window: WindowSpec, ts_col: str = "ts",
                      quadkey_col: str = "quadkey") -> DataFrame:
    """Count events per (event-time window, quadkey).

    Parameters
    ----------
    events : DataFrame
        Valid events with a timestamp column ``ts_col`` and a quadkey column (see
        :func:`~glue_jobs.quadkeys.with_quadkey`), batch or streaming.
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
    row-major cell key (a long, :func:`~glue_jobs.quadkeys.cell_key`) and formats each cell's quadkey string once, after the
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


def with_cost(fine: DataFrame, rates: DataFrame | None, rate_zooms: Sequence[int] = ()) -> DataFrame:
    """Attach ``cost = events * rate`` to fine-cell counts, null where no rate is known.

    The rates are what the workers measure (CPU seconds per event over a start-up calibration, CONTRACTS.md
    "Cost reports"), so the partitioner balances measured cost instead of message counts.

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
        has at least one known rate (1.0 = one event: rates are normalised by the workers' calibration).

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
