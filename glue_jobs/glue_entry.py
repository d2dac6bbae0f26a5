"""AWS Glue 5.1 streaming entry point (Spark 3.5).

Glue-specific code is kept to :func:`main` (``awsglue`` only exists inside Glue); everything it
calls is the shared, tested code: :func:`glue_records` maps Glue's Kinesis frame to ``value,
source`` records, :func:`glue_batch_function` returns the one foreachBatch body
(:func:`glue_jobs.batch.stream_batch_fn`: quarantine + windows + snapshots). The stream is read by one
``glueContext.forEachBatch`` over the source frame, Glue's documented streaming entry point
(https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-concepts.html), so each shard has one reader.

Job arguments (``--key value``): ``stream_arn``, ``snapshots`` (s3://bucket), ``checkpoint``
(s3://...), optional ``quarantine``, ``costs``, ``zoom``, ``grid_zoom``, ``refine_events``,
``window``, ``watermark``, ``window_size`` (micro-batch interval, default ``30 seconds``), ``event_fields`` (the
event field mapping as JSON, :class:`geokernel.contracts.event_fields.EventFields`; default the canonical names),
``kinesis_connector_jar`` (see below).

**Two readers.** By default the stream is read by Glue's own Kinesis source, as described next. With
``kinesis_connector_jar`` (the stack's ``glue_kinesis_connector_jar``, also passed as ``--extra-jars``) it is read
by the open-source Kinesis connector for Spark Structured Streaming instead, exactly as on EMR Serverless
(:func:`glue_jobs.emr_entry.connector_records` and :func:`glue_jobs.batch.start_streaming`): the record bytes
arrive, so KPL aggregated records are de-aggregated (:func:`glue_jobs.events.deaggregate_records`), which Glue's
own source cannot do.

The Kinesis source is read as Glue documents it: ``classification: json`` with ``inferSchema: false``
requires a ``schema`` (DDL), and the frame then has one column per schema field (plus ``__src_timestamp``
with ``addRecordTimestamp``), not the record text
(https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-connect-kinesis-home.html, "Kinesis connection
option reference": ``schema``, ``inferSchema``, ``addRecordTimestamp``). :func:`glue_event_schema` declares the
event fields under the producer's keys (``ts`` as text: epoch milliseconds or ISO-8601; ``lat``/``lon`` as numbers)
and :func:`glue_records` rebuilds each event's JSON from them, so the shared validation (:func:`glue_jobs.events.classify_events`)
judges it as on EMR. What Glue cannot hand over is the text of a record that is not a JSON object: it arrives
with every field null and is quarantined as ``missing_field`` with the rebuilt ``{}`` as its ``raw``. (awsglue is
not installable outside Glue: :func:`main` is not run here; :func:`glue_kinesis_options` and :func:`glue_records`
are tested against a recorded frame of the documented shape, ``tests/events/glue_kinesis_frame.json``.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from glue_jobs.batch import JobConfig, start_streaming, stream_batch_fn
from glue_jobs.emr_entry import CONNECTOR_FORMAT, connector_options, connector_records
from glue_jobs.quadkey_counts import parse_duration
from glue_jobs.transform import RollupSpec, WindowSpec, check_rollup

DEFAULTS: Mapping[str, str] = {
    "quarantine": "", "costs": "", "zoom": "18", "grid_zoom": "12", "refine_events": "500",
    "window": "60s", "watermark": "2m", "window_size": "30 seconds", "event_fields": "", "kinesis_connector_jar": "",
}


SRC_TIMESTAMP = "__src_timestamp"  # added by addRecordTimestamp (Glue 4.0+)


def _quoted(name: str) -> str:
    """``name`` as a quoted identifier (DDL and column references): in backticks, a backtick doubled."""
    return "`" + name.replace("`", "``") + "`"


def glue_event_schema(fields: EventFields = DEFAULT_EVENT_FIELDS) -> str:
    """The DDL of the event fields under the producer's keys (ids and ``ts`` as text, ``lat``/``lon`` as numbers)."""
    types = ("STRING", "STRING", "STRING", "DOUBLE", "DOUBLE")
    return ", ".join(f"{_quoted(n)} {t}" for n, t in zip(fields.names, types, strict=True))


def glue_kinesis_options(stream_arn: str, fields: EventFields = DEFAULT_EVENT_FIELDS) -> dict[str, str]:
    """The Kinesis source options of the Glue job (see the module docstring)."""
    return {"typeOfData": "kinesis", "streamARN": stream_arn, "classification": "json", "inferSchema": "false",
            "schema": glue_event_schema(fields), "addRecordTimestamp": "true", "startingPosition": "TRIM_HORIZON"}


def glue_connector_options(stream_arn: str) -> dict[str, str]:
    """The ``aws-kinesis`` connector's options for the stream ``arn:<partition>:kinesis:<region>:<account>:stream/<name>``
    (read from its oldest record, as Glue's own source: each run has a checkpoint of its own)."""
    parts = stream_arn.split(":")
    if len(parts) != 6 or parts[2] != "kinesis" or not parts[3] or not parts[5].startswith("stream/") \
            or not parts[5].removeprefix("stream/"):
        raise ValueError(f"Glue job argument --stream_arn must be a Kinesis stream ARN "
                         f"arn:<partition>:kinesis:<region>:<account>:stream/<name>, got {stream_arn!r}")
    return connector_options(parts[5].removeprefix("stream/"), parts[3], None, "TRIM_HORIZON")


def glue_records(df: DataFrame, stream: str, fields: EventFields = DEFAULT_EVENT_FIELDS) -> DataFrame:
    """``value, source`` records from Glue's Kinesis DataFrame (one column per :func:`glue_event_schema` field).

    ``value`` is the event rebuilt as JSON from its fields (null fields left out, so a missing or unparsable one
    is quarantined as missing); ``source`` is ``<stream>/<__src_timestamp>`` when Glue added the arrival time,
    else ``<stream>``. A frame without the schema's columns is a clear error naming its columns.
    """
    cols = df.columns
    missing = [f for f in fields.names if f not in cols]
    if missing:
        raise ValueError(f"Glue Kinesis frame: expected the schema's columns {list(fields.names)!r}, "
                         f"missing {missing!r} in {cols!r}")
    value = F.to_json(F.struct(*[F.col(_quoted(f)).alias(f) for f in fields.names]))
    parts = [F.lit(stream)]
    if SRC_TIMESTAMP in cols:
        parts.append(F.date_format(F.col(SRC_TIMESTAMP), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"))
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
    rollup = check_rollup(RollupSpec(ints["grid_zoom"], ints["zoom"], ints["refine_events"]))
    window = WindowSpec(parse_duration(merged["window"], "--window"), None,
                        parse_duration(merged["watermark"], "--watermark"))
    return JobConfig(out=merged["snapshots"], quarantine=merged["quarantine"] or None, window=window,
                     rollup=rollup, costs=merged["costs"] or None,
                     event_fields=EventFields.from_json(merged["event_fields"], "Glue job argument --event_fields"))


def glue_batch_function(cfg: JobConfig, checkpoint: str) -> Callable[[DataFrame, int], None]:
    """The foreachBatch body the Glue job hands to ``glueContext.forEachBatch``.

    The open windows live under ``<checkpoint>/windows``, next to the query's offsets (``<checkpoint>/events``).
    """
    return stream_batch_fn(cfg, f"{checkpoint.rstrip('/')}/windows")


def main() -> None:  # pragma: no cover - needs the Glue runtime (awsglue)
    """Glue job body: Kinesis source -> one glueContext.forEachBatch (quarantine + windows + snapshots)."""
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
    checkpoint = args["checkpoint"].rstrip("/")
    window_size = parse_duration(args.get("window_size", DEFAULTS["window_size"]), "--window_size")
    if args.get("kinesis_connector_jar"):  # the connector's reader (record bytes: KPL de-aggregated), as on EMR
        reader = spark.readStream.format(CONNECTOR_FORMAT).options(**glue_connector_options(args["stream_arn"]))
        start_streaming(connector_records(reader.load()), cfg, checkpoint, window_size).awaitTermination()
        job.commit()
        return
    kinesis = glue_context.create_data_frame.from_options(
        connection_type="kinesis",
        connection_options=glue_kinesis_options(args["stream_arn"], cfg.event_fields),
        transformation_ctx="ingest",
    )
    raw = glue_records(kinesis, args["stream_arn"].rsplit("/", 1)[-1], cfg.event_fields)
    glue_context.forEachBatch(
        frame=raw,
        batch_function=glue_batch_function(cfg, checkpoint),
        options={"windowSize": window_size, "checkpointLocation": f"{checkpoint}/events"},
    )
    job.commit()


if __name__ == "__main__":  # pragma: no cover
    main()
