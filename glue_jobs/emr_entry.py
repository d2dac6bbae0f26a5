"""EMR Serverless entry point (release emr-spark-8.0.0, Spark 4.0, job mode STREAMING).

Reads the ingest stream through the runtime's bundled Kinesis connector (format
``aws-kinesis``, from awslabs/spark-sql-kinesis-connector; on EMR Serverless add
``--jars /usr/share/aws/kinesis/spark-sql-kinesis/lib/spark-streaming-sql-kinesis-connector.jar``
to ``sparkSubmitParameters``), checkpoints to S3, and runs the shared transforms through
:func:`glue_jobs.batch.start_streaming`: one query, so one reader per shard, whose foreachBatch
caches the micro-batch and writes both the quarantine and the snapshots (the connector's README, "Avoid race
conditions": https://github.com/awslabs/spark-sql-kinesis-connector). Entry-point arguments::

    --stream-name NAME --region REGION --snapshots s3://BUCKET[/prefix] --checkpoint s3://BUCKET/ckpt
    [--quarantine s3://BUCKET] [--costs s3://BUCKET/costs/] [--endpoint-url URL]
    [--starting-position TRIM_HORIZON|LATEST] [--zoom 18] [--grid-zoom 12] [--refine-events 500]
    [--window 60s] [--slide S] [--watermark 2m] [--trigger 30s] [--event-fields JSON]

``--starting-position`` applies to a fresh checkpoint only: a run on a checkpoint that holds offsets resumes from
them (Spark's "Recovering from Failures with Checkpointing",
https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html#recovering-from-failures-with-checkpointing;
the connector keeps its shard positions under the checkpoint location, its README "Kinesis Connector Metadata
storage"). With ``LATEST`` (the stack's choice) a fresh run misses what the stream held before it, so the windows
that began before its first micro-batch are written partial (``JobConfig.starting_position``).

``--event-fields`` is the event field mapping (:class:`geokernel.contracts.event_fields.EventFields`, the JSON of
``EVENT_FIELDS``): which key of an event holds each field; left out, the canonical names.

The snapshot writer uses boto3 on the driver (the EMR runtime ships it; if a custom image
does not, add it to the job's Python environment archive).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from glue_jobs.batch import start_streaming
from glue_jobs.events import deaggregate_records
from glue_jobs.quadkey_counts import add_event_fields_argument, config_from_args, parse_duration

#: The bundled connector's format name and its record columns (data binary, streamName,
#: partitionKey, sequenceNumber, approximateArrivalTimestamp).
CONNECTOR_FORMAT = "aws-kinesis"


def connector_options(stream_name: str, region: str, endpoint_url: str | None,
                      starting_position: str = "TRIM_HORIZON") -> dict[str, str]:
    """Options of the ``aws-kinesis`` source (GetRecords consumer; endpoint defaults to the region's)."""
    if starting_position.upper() not in ("TRIM_HORIZON", "LATEST", "EARLIEST"):
        raise ValueError(f"--starting-position must be TRIM_HORIZON, LATEST or EARLIEST, got {starting_position!r}")
    return {
        "kinesis.streamName": stream_name,
        "kinesis.region": region,
        "kinesis.endpointUrl": endpoint_url or f"https://kinesis.{region}.amazonaws.com",
        "kinesis.consumerType": "GetRecords",
        "kinesis.startingPosition": starting_position.upper(),
    }


def connector_records(df: DataFrame) -> DataFrame:
    """``value, source`` records from the connector's rows, KPL aggregated records split into their user records.

    The connector does not expose the shard id, so ``source`` is
    ``<streamName>/pk=<partitionKey>/<sequenceNumber>`` (a sub-record's ends ``/sub=<index>``). A record the
    connector already de-aggregated has no KPL magic and passes :func:`glue_jobs.events.deaggregate_records`
    unchanged.
    """
    return deaggregate_records(df.select(
        F.col("data"),
        F.concat_ws("/", F.col("streamName"), F.concat(F.lit("pk="), F.col("partitionKey")),
                    F.col("sequenceNumber")).alias("source"),
    ))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="emr_entry", description="Geo Rebalancer aggregation on EMR Serverless")
    p.add_argument("--stream-name", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--snapshots", required=True, help="s3://bucket[/prefix] for snapshots/")
    p.add_argument("--checkpoint", required=True, help="s3:// checkpoint root")
    p.add_argument("--quarantine", default=None)
    p.add_argument("--costs", default=None, help="s3:// prefix of worker cost reports")
    p.add_argument("--endpoint-url", default=None)
    p.add_argument("--starting-position", default="TRIM_HORIZON")
    p.add_argument("--zoom", type=int, default=18)
    p.add_argument("--grid-zoom", type=int, default=12)
    p.add_argument("--refine-events", type=int, default=500)
    p.add_argument("--window", default="60s")
    p.add_argument("--slide", default=None)
    p.add_argument("--watermark", default="2m")
    p.add_argument("--trigger", default="30s")
    add_event_fields_argument(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Start the streaming query and block until it terminates."""
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args, out=args.snapshots)
    options = connector_options(args.stream_name, args.region, args.endpoint_url, args.starting_position)
    spark = (SparkSession.builder.appName("georebal-aggregation")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    raw = connector_records(spark.readStream.format(CONNECTOR_FORMAT).options(**options).load())
    start_streaming(raw, cfg, args.checkpoint, parse_duration(args.trigger, "--trigger")).awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
