"""Helpers for the worker tests: per-test resource names, test specs, the active pointer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from geo_service.aws import Clients
from geo_service.config import WorkerConfig
from partitioner.spec import Partition, Spec, Worker, shard_hash_key


@dataclass(frozen=True)
class Resources:
    """Uniquely named tables and buckets for one test."""

    prefix: str
    control_table: str
    leases_table: str
    specs_bucket: str
    costs_bucket: str
    output_bucket: str

    def config(self, version: int, **overrides: Any) -> WorkerConfig:
        """A fast worker config (short lease, quiet period and polls) for ``version`` (``whole`` mode unless overridden)."""
        base: dict[str, Any] = {
            "spec_version": version, "control_table": self.control_table, "leases_table": self.leases_table,
            "specs_bucket": self.specs_bucket, "costs_bucket": self.costs_bucket,
            "output_bucket": self.output_bucket, "prefix": self.prefix, "lease_s": 3.0, "drain_quiet_s": 0.6,
            "cost_report_interval_s": 60.0, "poll_interval_s": 0.05, "active_poll_s": 0.1, "swap_mode": "whole",
        }
        base.update(overrides)
        return WorkerConfig(**base)


def make_spec(version: int, regions: list[list[str]], stream_name: str, previous: int | None = None) -> Spec:
    """A valid spec: worker ``i`` owns one partition listing ``regions[i]``; the last region must hold ``""``."""
    n = len(regions)
    workers = tuple(Worker(id=f"w{i + 1:04d}", load=1.0, hash_key=shard_hash_key(i, n)) for i in range(n))
    parts = tuple(Partition(id=f"p{i + 1:04d}", worker=f"w{i + 1:04d}", quadkeys=tuple(r), load=1.0)
                  for i, r in enumerate(regions))
    return Spec(version=version, max_load=10.0, partitions=parts, workers=workers, previous_version=previous,
                created_at="2026-11-21T00:00:00Z", strategy="test", stream_name=stream_name)


def publish_spec(clients: Clients, res: Resources, spec: Spec, create_stream: bool = True) -> None:
    """Write the spec object and (optionally) create its geo stream with each worker's shards (``shard_count``)."""
    clients.s3.put_object(Bucket=res.specs_bucket, Key=f"specs/v{spec.version:08d}.json", Body=spec.to_json())
    if create_stream:
        assert spec.stream_name is not None
        clients.kinesis.create_stream(StreamName=spec.stream_name, ShardCount=spec.shard_count)
        clients.kinesis.get_waiter("stream_exists").wait(StreamName=spec.stream_name,
                                                         WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})


def set_active(clients: Clients, res: Resources, version: int) -> None:
    clients.dynamodb.put_item(TableName=res.control_table, Item={
        "pk": {"S": "active"}, "version": {"N": str(version)},
        "spec_key": {"S": f"specs/v{version:08d}.json"}, "stream_name": {"S": f"{res.prefix}-geo-v{version}"},
        "flipped_at": {"S": "2026-11-21T00:00:00Z"}})




def set_plan(clients: Clients, res: Resources, from_version: int | None, to_version: int, kept: list[str],
             status: str = "started", mode: str = "carry") -> None:
    """Write control ``pk="plan"`` as the deploy controller does (``lambdas/deploy/plan.py`` ``plan_item``)."""
    clients.dynamodb.put_item(TableName=res.control_table, Item={
        "pk": {"S": "plan"}, "from_version": {"N": str(from_version)} if from_version else {"NULL": True},
        "to_version": {"N": str(to_version)}, "mode": {"S": mode}, "kept": {"L": [{"S": w} for w in kept]},
        "started": {"L": []}, "stopped": {"L": []}, "status": {"S": status}})


def enriched_rows(clients: Clients, res: Resources) -> list[dict[str, Any]]:
    """Every enriched output record the workers wrote so far."""
    rows: list[dict[str, Any]] = []
    for obj in clients.s3.list_objects_v2(Bucket=res.output_bucket, Prefix="enriched/").get("Contents", []):
        body = clients.s3.get_object(Bucket=res.output_bucket, Key=obj["Key"])["Body"].read().decode()
        rows += [json.loads(line) for line in body.splitlines() if line]
    return rows
