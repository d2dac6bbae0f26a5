"""AWS Glue 5.1 streaming entry point (Spark 3.5).

Glue-specific code is kept to :func:`main` (``awsglue`` only exists inside Glue); everything it
calls is the shared, tested code: :func:`glue_records` maps Glue's Kinesis frame to ``value,
source`` records, :func:`glue_batch_functions` returns the two foreachBatch bodies
(:func:`glue_jobs.batch.snapshot_batch_fn`, :func:`glue_jobs.batch.quarantine_batch_fn`).

Job arguments (``--key value``): ``stream_arn``, ``snapshots`` (s3://bucket), ``checkpoint``
(s3://...), optional ``quarantine``, ``costs``, ``zoom``, ``grid_zoom``, ``refine_events``,
``window``, ``watermark``, ``window_size`` (micro-batch interval, default ``30 seconds``).

The Kinesis source is read with ``"classification": "json"`` and ``"inferSchema": "false"`` so
that Glue does not parse or drop records: the raw record text arrives in a single string column
and our own validation quarantines bad ones. (This could not be run here: awsglue is not
installable outside Glue. :func:`glue_records` accepts the raw text in a ``data`` column or in
the frame's only column, whatever Glue names it.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from glue_jobs import transform as T
from glue_jobs.batch import JobConfig, fine_counts_stream, quarantine_batch_fn, snapshot_batch_fn
from glue_jobs.quadkey_counts import parse_duration

DEFAULTS: Mapping[str, str] = {
    "quarantine": "", "costs": "", "zoom": "18", "grid_zoom": "12", "refine_events": "500",
    "window": "60s", "watermark": "2m", "window_size": "30 seconds",
}


def glue_records(df: DataFrame, stream: str) -> DataFrame:
    """``value, source`` records from Glue's Kinesis DataFrame.

    The record text is the ``data`` column when present, else the frame's only column; any
    other layout is a clear error. ``source`` is ``<stream>/pk=<partitionKey>/<sequenceNumber>``
    when Glue exposes those columns, else ``<stream>/<approximateArrivalTimestamp>`` or ``<stream>``.
    """
    cols = df.columns
    if "data" in cols:
        value = F.col("data").cast("string")
    elif len(cols) == 1:
        value = F.col(f"`{cols[0]}`").cast("string")
    else:
        raise ValueError(f"Glue Kinesis frame: expected a 'data' column or a single raw column, got {cols!r}")
    parts = [F.lit(stream)]
    if "partitionKey" in cols and "sequenceNumber" in cols:
        parts += [F.concat(F.lit("pk="), F.col("partitionKey")), F.col("sequenceNumber")]
    elif "approximateArrivalTimestamp" in cols:
        parts.append(F.col("approximateArrivalTimestamp").cast("string"))
    return df.select(value.alias("value"), F.concat_ws("/", *parts).alias("source"))


def config_from_job_args(args: Mapping[str, str]) -> JobConfig:
    """JobConfig from resolved Glue job arguments (ValueError names the bad argument and value)."""
    merged = {**DEFAULTS, **args}
    for key in ("snapshots",):
        if not merged.get(key):
            raise ValueError(f"Glue job argument --{key} is required, got {merged.get(key)!r}")
    ints = {}
    for key in ("zoom", "grid_zoom", "refine_events"):
        try:
            ints[key] = int(merged[key])
        except ValueError:
            raise ValueError(f"Glue job argument --{key} must be an integer, got {merged[key]!r}") from None
    rollup = T.check_rollup(T.RollupSpec(ints["grid_zoom"], ints["zoom"], ints["refine_events"]))
    window = T.WindowSpec(parse_duration(merged["window"], "--window"), None,
                          parse_duration(merged["watermark"], "--watermark"))
    return JobConfig(out=merged["snapshots"], quarantine=merged["quarantine"] or None, window=window,
                     rollup=rollup, costs=merged["costs"] or None)


def glue_batch_functions(cfg: JobConfig) -> tuple[Callable[[DataFrame, int], None], Callable[[DataFrame, int], None]]:
    """The (snapshot, quarantine) foreachBatch bodies the Glue job hands to Spark."""
    return snapshot_batch_fn(cfg), quarantine_batch_fn(cfg)


def main() -> None:  # pragma: no cover - needs the Glue runtime (awsglue)
    """Glue job body: Kinesis source -> quarantine query + aggregate query via glueContext.forEachBatch."""
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    names = ["JOB_NAME", "stream_arn", "snapshots", "checkpoint"]
    optional = [k for k in DEFAULTS if f"--{k}" in sys.argv]
    args = getResolvedOptions(sys.argv, names + optional)
    cfg = config_from_job_args(args)
    glue_context = GlueContext(SparkContext.getOrCreate())
    spark = glue_context.spark_session
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    job = Job(glue_context)
    job.init(args["JOB_NAME"], args)
    kinesis = glue_context.create_data_frame.from_options(
        connection_type="kinesis",
        connection_options={
            "typeOfData": "kinesis",
            "streamARN": args["stream_arn"],
            "classification": "json",
            "inferSchema": "false",
            "startingPosition": "TRIM_HORIZON",
        },
        transformation_ctx="ingest",
    )
    raw = glue_records(kinesis, args["stream_arn"].rsplit("/", 1)[-1])
    on_snapshot, on_quarantine = glue_batch_functions(cfg)
    checkpoint = args["checkpoint"].rstrip("/")
    window_size = parse_duration(args.get("window_size", DEFAULTS["window_size"]), "--window_size")
    (raw.writeStream.queryName("georebal-quarantine").option("checkpointLocation", f"{checkpoint}/quarantine")
     .trigger(processingTime=window_size).foreachBatch(on_quarantine).start())
    glue_context.forEachBatch(
        frame=fine_counts_stream(raw, cfg.window, cfg.rollup.zoom),
        batch_function=on_snapshot,
        options={"windowSize": window_size, "checkpointLocation": f"{checkpoint}/aggregate"},
    )
    job.commit()


if __name__ == "__main__":  # pragma: no cover
    main()
