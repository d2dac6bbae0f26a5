"""Ingest stream: Kinesis on-demand, encrypted with a customer-managed KMS key (rotation on)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import GeoConfig

#: How long the ingest stream keeps a record (hours): the router's event source holds records at most this long,
#: less REDRIVE_MARGIN_HOURS (infra/router.py)
INGEST_RETENTION_HOURS = 24

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
            # retained (retain_data): a generated name, so a redeploy after `cdk destroy` does not collide with it
            stream_name=None if config.retain_data else f"{config.prefix}-ingest",
            # ingest_shards=0: on-demand (pays per GB in and out); N > 0: provisioned N shards, cheaper for a steady
            # known rate (https://aws.amazon.com/kinesis/data-streams/pricing/; docs/COST.md)
            stream_mode=kinesis.StreamMode.PROVISIONED if config.ingest_shards else kinesis.StreamMode.ON_DEMAND,
            shard_count=config.ingest_shards or None,
            encryption=kinesis.StreamEncryption.KMS,
            encryption_key=self.key,
            retention_period=Duration.hours(INGEST_RETENTION_HOURS),
        )
