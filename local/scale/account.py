"""The simulation's AWS account: moto in-process on the simulated clock, its resources and clients.

The resources are those the deploy controller, the workers and the router use (:class:`local.aws.Names`): the
buckets, the control and leases tables, the geo streams' KMS key, and an ECS cluster with the worker service.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import boto3
from botocore.config import Config

from geo_service.runtime.config import WorkerConfig
from geokernel.contracts.lease import LEASE_KEY_ATTR
from geokernel.contracts.plan import SwapMode
from local.aws import Names
from local.scale.memo import shared_objects
from local.scale.simtime import SimTime

REGION = "us-east-1"


def clients(config: Config) -> dict[str, Any]:
    """One client per service the simulation uses (s3, dynamodb, kinesis, ecs, kms), with ``config``."""
    return {s: boto3.client(s, region_name=REGION, config=config) for s in ("s3", "dynamodb", "kinesis", "ecs", "kms")}


def create_resources(c: dict[str, Any], names: Names) -> tuple[str, str]:
    """Create the buckets, tables, KMS key and the ECS worker service; return ``(cluster, service)``."""
    for bucket in names.buckets:
        c["s3"].create_bucket(Bucket=bucket)
    for table, key in ((names.control_table, "pk"), (names.leases_table, LEASE_KEY_ATTR)):
        c["dynamodb"].create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                                   KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                   AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}])
    key_id = c["kms"].create_key(Description="geo streams")["KeyMetadata"]["KeyId"]
    c["kms"].create_alias(AliasName=names.geo_stream_key, TargetKeyId=key_id)
    cluster, service = f"{names.prefix}-workers", f"{names.prefix}-geo-workers"
    c["ecs"].create_cluster(clusterName=cluster)
    c["ecs"].register_task_definition(family=f"{names.prefix}-geo-worker", networkMode="awsvpc",
                                      requiresCompatibilities=["FARGATE"], cpu="512", memory="1024",
                                      containerDefinitions=[{"name": "worker", "image": "geo-worker", "essential": True}])
    c["ecs"].create_service(cluster=cluster, serviceName=service, taskDefinition=f"{names.prefix}-geo-worker",
                            desiredCount=0)
    return cluster, service


@contextmanager
def moto_on(sim: SimTime) -> Iterator[None]:
    """moto in-process, its Kinesis arrival stamps on the simulated clock (workers compare them with it)."""
    from moto import mock_aws

    def now() -> datetime:
        return datetime.fromtimestamp(sim.now, UTC).replace(tzinfo=None)

    from moto.kinesis.models import Shard

    # moto finds a shard's newest sequence number by copying every key of the shard (``list(records)[-1]``) on every
    # put: quadratic in the records a shard holds, 92 % of a run at 1,000 events/s per worker. The records are an
    # ordered dict, so its last key is the same number in constant time.
    def newest(shard: Shard) -> int:
        return next(reversed(shard.records), 0)

    def oldest(shard: Shard) -> int:
        return next(iter(shard.records), 0)

    with (mock_aws(), mock.patch("moto.kinesis.models.utcnow", now), shared_objects(),
          mock.patch.object(Shard, "get_max_sequence_number", newest),
          mock.patch.object(Shard, "get_min_sequence_number", oldest)):
        yield


def worker_config(names: Names, cluster_prefix: str) -> WorkerConfig:
    """The AWS defaults of a generic carry-mode task (``infra/workers.py`` sets no timing variables), without the
    EMF metric lines (a thousand virtual workers in one process would print them to the console)."""
    return WorkerConfig(spec_version=None, control_table=names.control_table, leases_table=names.leases_table,
                        specs_bucket=names.specs_bucket, costs_bucket=names.costs_bucket,
                        output_bucket=names.output_bucket, quarantine_bucket=names.quarantine_bucket,
                        prefix=cluster_prefix, swap_mode=SwapMode.CARRY, metrics_interval_s=0)
