"""The router Lambda: consumes the ingest stream and writes each event to the active spec version's geo stream
with an ExplicitHashKey inside its partition's shard range.

Kinesis event source: batch size and window from config, bisect on function error, partial batch responses
(ReportBatchItemFailures), bounded retries and record age, and an on-failure destination: an SQS queue
(KMS-encrypted, TLS-only) that receives the metadata of batches that still fail.
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

ROUTER_MEMORY_MB = 1024  # holds two routing tables during a flip: bench/bench_spec_memory.py
ROUTER_TIMEOUT = Duration.minutes(1)


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
            starting_position=lambda_.StartingPosition.LATEST,
            batch_size=config.router_batch_size,
            max_batching_window=Duration.seconds(config.router_batching_window_s),
            bisect_batch_on_error=True,
            report_batch_item_failures=True,
            retry_attempts=10,
            max_record_age=Duration.hours(6),
            parallelization_factor=config.router_parallelism,
            on_failure=sources.SqsDlq(self.failures),
        )
        self.function.add_event_source(self.event_source)
