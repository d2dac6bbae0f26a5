"""Ingest stream: Kinesis on-demand, encrypted with a customer-managed KMS key (rotation on)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import GeoConfig


class IngestStream(Construct):
    """``stream`` (``<prefix>-ingest``) and its ``key``. Producers use ``entity_id`` as the partition key."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description=f"{config.prefix}: ingest stream encryption",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.stream = kinesis.Stream(
            self,
            "Stream",
            stream_name=f"{config.prefix}-ingest",
            stream_mode=kinesis.StreamMode.ON_DEMAND,
            encryption=kinesis.StreamEncryption.KMS,
            encryption_key=self.key,
            retention_period=Duration.hours(24),
        )
