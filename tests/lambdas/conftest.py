"""Shared fixtures for the Lambda tests: moto (in-process) with the project's buckets, tables and ECS service."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import MockAWS

from geokernel.partition_spec.model import Spec
from glue_jobs.snapshot import S3Storage, SnapshotMeta, SnapshotRow, write_snapshot
from lambdas.runtime.clients import Clients, make_clients
from lambdas.runtime.config import LambdaConfig
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import SpecStore
from partitioner.builders import build_spec
from partitioner.load.counts import counts_from_pairs

EVENTS_DIR = Path(__file__).resolve().parents[1] / "events"
REGION = "us-east-1"
ENV = {
    "GEO_PREFIX": "georebal",
    "CONTROL_TABLE": "georebal-control",
    "LEASES_TABLE": "georebal-leases",
    "SNAPSHOTS_BUCKET": "georebal-snapshots",
    "SPECS_BUCKET": "georebal-specs",
    "COSTS_BUCKET": "georebal-costs",
    "QUARANTINE_BUCKET": "georebal-quarantine",
    "OUTPUT_BUCKET": "georebal-output",
    "MAX_LOAD": "1000",
    "GRID_ZOOM": "12",
    "ECS_CLUSTER": "georebal",
    "ECS_SERVICE": "georebal-geo-workers",
    "GEO_STREAM_KMS_KEY": "alias/georebal-geo-streams",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "POWERTOOLS_METRICS_NAMESPACE": "GeoRebalancer",
    "POWERTOOLS_DEV": "false",
}


@dataclass(frozen=True)
class FakeLambdaContext:
    """The Lambda context attributes Powertools reads (the runtime's object is not available in tests)."""

    function_name: str = "georebal-test"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:georebal-test"
    aws_request_id: str = "7f1c1a1e-0000-4000-8000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


CTX = FakeLambdaContext()


def load_event(name: str) -> dict[str, Any]:
    """Return a recorded event from ``tests/events/``."""
    data: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return data


@dataclass
class Aws:
    """The moto account the tests run against."""

    clients: Clients
    cfg: LambdaConfig

    @property
    def control(self) -> ControlTable:
        return ControlTable(self.clients.dynamodb, self.cfg.control_table)

    @property
    def leases(self) -> LeaseTable:
        return LeaseTable(self.clients.dynamodb, self.cfg.leases_table)

    @property
    def specs(self) -> SpecStore:
        return SpecStore(self.clients.s3, self.cfg.specs_bucket)

    @property
    def streams(self) -> GeoStreams:
        return GeoStreams(self.clients.kinesis, self.cfg.geo_stream_kms_key)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        resp = self.clients.s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for o in resp.get("Contents", []))

    def stream_names(self) -> list[str]:
        return sorted(self.clients.kinesis.list_streams()["StreamNames"])

    def put_lease(self, version: int, worker: str, *, owner: str | None = "task-1", expires_in: float = 30.0,
                  ready: bool = True, drained: bool = False, now: float | None = None) -> None:
        import time

        item: dict[str, Any] = {"lease_key": {"S": f"v{version}#{worker}"},
                                "expires_at": {"N": str((now or time.time()) + expires_in)},
                                "ready": {"BOOL": ready}, "drained": {"BOOL": drained},
                                "released": {"BOOL": drained}}
        if owner:
            item["owner"] = {"S": owner}
        self.clients.dynamodb.put_item(TableName=self.cfg.leases_table, Item=item)


@pytest.fixture(scope="module")
def moto_module() -> Iterator[tuple[MockAWS, Clients]]:
    """One in-process moto per test module (clients are costly to build); each test resets its data."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in ENV.items():
            mp.setenv(k, v)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        with mock_aws() as mock:
            yield mock, make_clients(LambdaConfig.from_env())


@pytest.fixture
def aws(moto_module: tuple[MockAWS, Clients], monkeypatch: pytest.MonkeyPatch) -> Aws:
    """GIVEN a fresh moto account with the project's buckets, tables and ECS service (env vars set)."""
    mock, c = moto_module
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    mock.reset()
    cfg = LambdaConfig.from_env()
    for b in (cfg.snapshots_bucket, cfg.specs_bucket, cfg.costs_bucket, cfg.quarantine_bucket, cfg.output_bucket):
        c.s3.create_bucket(Bucket=b)
    for table, key in ((cfg.control_table, "pk"), (cfg.leases_table, "lease_key")):
        c.dynamodb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                                BillingMode="PAY_PER_REQUEST")
    kms = boto3.client("kms", region_name=REGION)
    kms.create_alias(AliasName=str(cfg.geo_stream_kms_key), TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
    c.ecs.create_cluster(clusterName=cfg.ecs_cluster)
    c.ecs.register_task_definition(family="georebal-geo-worker", networkMode="awsvpc",
                                   requiresCompatibilities=["FARGATE"], cpu="512", memory="1024",
                                   containerDefinitions=[{"name": "worker", "image": "geo-worker:latest",
                                                          "essential": True,
                                                          "environment": [{"name": "GEO_PREFIX",
                                                                           "value": "georebal"}]}])
    c.ecs.create_service(cluster=cfg.ecs_cluster, serviceName=cfg.ecs_service,
                         taskDefinition="georebal-geo-worker", desiredCount=0)
    return Aws(c, cfg)


def grid_counts(cells: dict[tuple[int, int], float], zoom: int = 12, base: tuple[int, int] = (2000, 1300)) -> Any:
    """Counts over zoom-``zoom`` tiles at offsets from ``base`` (x, y)."""
    from geokernel.geo.tiles import Tile, quadkey

    pairs = [(quadkey(Tile(base[0] + dx, base[1] + dy, zoom)), w) for (dx, dy), w in cells.items()]
    return counts_from_pairs(pairs, "test-grid")


def make_spec(version: int, loads: Sequence[float] = (600, 600, 600), max_load: float = 1000.0,
              previous: Spec | None = None, prefix: str = "georebal") -> Spec:
    """Build a real spec (partitioner.builders) over a row of hot-ish cells."""
    cells = {(i * 4, 0): w for i, w in enumerate(loads)}
    return build_spec(grid_counts(cells), max_load, previous=previous, version=version,
                      stream_name=f"{prefix}-geo-v{version}", created_at="2026-11-21T00:00:00Z")


def write_test_snapshot(aws: Aws, rows: Sequence[tuple[str, int, float | None]], window_end: datetime,
                        batch_id: int = 1) -> str:
    """Write a snapshot with the aggregation job's real writer; return the manifest key."""
    storage = S3Storage(aws.cfg.snapshots_bucket, "", aws.clients.s3)
    meta = SnapshotMeta(window_end - timedelta(minutes=5), window_end, 12, 18, 500, batch_id)
    result = write_snapshot(storage, sorted(SnapshotRow(q, e, c) for q, e, c in rows), meta, rows_per_file=3)
    return str(result.manifest_key)


def snapshot_rows(cells: dict[tuple[int, int], int]) -> list[tuple[str, int, float | None]]:
    from geokernel.geo.tiles import Tile, quadkey

    return [(quadkey(Tile(2000 + dx, 1300 + dy, 12)), e, None) for (dx, dy), e in cells.items()]


def t(minutes: int) -> datetime:
    return datetime(2026, 11, 21, 10, 0, tzinfo=UTC) + timedelta(minutes=minutes)
