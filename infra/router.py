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
"""

from __future__ import annotations

from collections.abc import Mapping

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
from infra.ingest import INGEST_RETENTION_HOURS

ROUTER_MEMORY_MB = 1024  # holds two routing tables during a flip: bench/bench_spec_memory.py
ROUTER_TIMEOUT = Duration.minutes(1)
#: Hours a record that could not be routed for its whole age stays in the stream after the failure queue names it
REDRIVE_MARGIN_HOURS = 6


class RouterFunction(Construct):
    """``function`` (``lambdas/router/handler.py:handler``) on ``stream``; ``failures`` is the on-failure queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GeoConfig,
        kit: LambdaKit,
        stream: kinesis.IStream,
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
        self.event_source = sources.KinesisEventSource(
            stream,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=config.router_batch_size,
            max_batching_window=Duration.seconds(config.router_batching_window_s),
            bisect_batch_on_error=True,
            report_batch_item_failures=True,
            # no retry_attempts: infinite (see the module docstring); records are held by their age instead
            max_record_age=Duration.hours(INGEST_RETENTION_HOURS - REDRIVE_MARGIN_HOURS),
            parallelization_factor=config.router_parallelism,
            on_failure=sources.SqsDlq(self.failures),
        )
        self.function.add_event_source(self.event_source)
