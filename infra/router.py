"""The router Lambda: consumes the ingest stream and writes each event to the active spec version's geo stream
with an ExplicitHashKey inside its partition's shard range.

Kinesis event source: batch size and window from config, bisect on function error, partial batch responses
(ReportBatchItemFailures), and an on-failure destination: an SQS queue (KMS-encrypted, TLS-only) that receives the
metadata of batches that still fail.

Nothing is lost before the first spec, or while the active pointer is missing: the mapping reads the ingest stream
from TRIM_HORIZON (every record the stream holds when it starts, so the events a producer sends while the stack and
the first spec come up are routed once a spec is live), and holds failed records by AGE, not by a retry count: no
``MaximumRetryAttempts`` (-1, infinite: "failed records are retried until the record expires") and
``MaximumRecordAgeInSeconds`` the stream's retention less :data:`REDRIVE_MARGIN_HOURS`
(https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-parameters.html). The router fails every valid record
while no spec is active (``lambdas/router/routing.py``), so they wait in the stream until one is; only a record that
could not be routed for its whole age goes to the failure queue, with the margin left to redrive its range before
the stream drops it (https://docs.aws.amazon.com/lambda/latest/dg/kinesis-on-failure-destination.html: the queue
holds the shard and sequence range, not the records). The iterator age alarm (infra/monitoring.py) pages long before.

A stream of your own (docs/DEPLOY.md "Embedding the construct in your own stack") is read from LATEST unless told
otherwise (:class:`infra.ingest.IngestReading`), with its retention as given; ``fan_out`` reads it through an
enhanced fan-out consumer of the router's own (``<prefix>-router``), whose dedicated 2 MB/s per shard leaves the
shards' shared read throughput to the stream's other readers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import assets
from infra.config import GeoConfig
from infra.functions import LambdaKit
from infra.ingest import IngestReading

ROUTER_MEMORY_MB = 1024  # holds two routing tables during a flip: bench/bench_spec_memory.py
ROUTER_TIMEOUT = Duration.minutes(1)
#: Hours a record that could not be routed for its whole age stays in the stream after the failure queue names it
REDRIVE_MARGIN_HOURS = 6
#: The longest MaximumRecordAgeInSeconds an event source mapping takes (7 days; -1, infinite, is not used: a record
#: must reach the failure queue before the stream drops it)
MAX_RECORD_AGE = Duration.days(7)


def max_record_age(retention_h: int) -> Duration:
    """How long the event source holds a failing record: the stream's retention less the redrive margin, at most
    :data:`MAX_RECORD_AGE`."""
    return Duration.hours(min(retention_h - REDRIVE_MARGIN_HOURS, int(MAX_RECORD_AGE.to_hours())))


class RouterFunction(Construct):
    """``function`` (``lambdas/router/handler.py:handler``) on ``stream``; ``failures`` is the on-failure queue;
    ``consumer`` the enhanced fan-out consumer it reads through (``reading.fan_out``), else None."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GeoConfig,
        kit: LambdaKit,
        stream: kinesis.IStream,
        reading: IngestReading,
        environment: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.failures_key = kms.Key(
            self, "FailuresKey", description=f"{config.prefix}: router failure queue", enable_key_rotation=True
        )
        self.failures = sqs.Queue(
            self,
            "Failures",
            queue_name=f"{config.prefix}-router-failures",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.failures_key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.function: lambda_.Function = kit.function(
            self,
            "Function",
            entry=assets.ROUTER_HANDLER,
            description="Routes ingest events to the active spec's geo stream",
            environment=environment,
            timeout=ROUTER_TIMEOUT,
            memory_mb=ROUTER_MEMORY_MB,
        )
        settings: dict[str, Any] = {
            "starting_position": reading.starting_position,
            "starting_position_timestamp": reading.timestamp_s,
            "batch_size": config.router_batch_size,
            "max_batching_window": Duration.seconds(config.router_batching_window_s),
            "bisect_batch_on_error": True,
            "report_batch_item_failures": True,
            # no retry_attempts: infinite (see the module docstring); records are held by their age instead
            "max_record_age": max_record_age(reading.retention_h),
            "parallelization_factor": config.router_parallelism,
            "on_failure": sources.SqsDlq(self.failures),
        }
        self.consumer: kinesis.StreamConsumer | None = None
        self.event_source: lambda_.IEventSource
        if reading.fan_out:
            self.consumer = kinesis.StreamConsumer(self, "Consumer", stream=stream,
                                                   stream_consumer_name=f"{config.prefix}-router")
            self.event_source = sources.KinesisConsumerEventSource(self.consumer, **settings)
        else:
            self.event_source = sources.KinesisEventSource(stream, **settings)
        self.function.add_event_source(self.event_source)
