"""The partitioner Lambda: on each load-snapshot manifest (S3 ObjectCreated ``snapshots/**/_manifest.json``) it
builds a candidate spec, applies the rebalance policy and publishes ``specs/v<version:08d>.json``."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from constructs import Construct

from infra import assets
from infra.functions import LambdaKit


class PartitionerFunction(Construct):
    """``function`` (handler ``lambdas/partitioner/handler.py:handler``), triggered by the snapshots bucket."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: LambdaKit,
        snapshots: s3.IBucket,
        environment: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = kit.function(
            self,
            "Function",
            entry=assets.PARTITIONER_HANDLER,
            description="Builds and publishes a partition spec from each load snapshot",
            environment=environment,
            timeout=Duration.minutes(5),
            memory_mb=2048,
        )
        snapshots.add_event_notification(
            s3.EventType.OBJECT_CREATED,
            s3n.LambdaDestination(self.function),
            s3.NotificationKeyFilter(prefix="snapshots/", suffix="_manifest.json"),
        )
