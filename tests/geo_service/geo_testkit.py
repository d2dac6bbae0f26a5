"""Helpers for the worker tests: per-test resource names, test specs, the active pointer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from geo_service.adapters.aws import Clients
from geo_service.runtime.config import WorkerConfig
from geokernel.contracts.control import ControlKey
from geokernel.contracts.enriched import ENRICHED_PREFIX, decode_lines, parse_enriched_key
from geokernel.contracts.plan import SwapHead
from geokernel.contracts.stream import StreamManifest, stream_manifest_key
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams


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
            "get_records_interval_s": 0.05, "output_flush_s": 0.1,
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
    """Write the spec object and (optionally) create its geo stream with each worker's shards (``shard_count``)
    and publish the stream's manifest, as the deploy controller does once the stream is ACTIVE."""
    clients.s3.put_object(Bucket=res.specs_bucket, Key=f"specs/v{spec.version:08d}.json", Body=spec.to_json())
    if create_stream:
        assert spec.stream_name is not None
        create_stream_with_manifest(clients, res, spec.stream_name, spec.version, spec.shard_count)


def create_stream_with_manifest(clients: Clients, res: Resources, stream: str, version: int, shards: int) -> None:
    """Create ``stream`` and publish its shard manifest for ``version`` in the specs bucket."""
    clients.kinesis.create_stream(StreamName=stream, ShardCount=shards)
    clients.kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    publish_manifest(clients, res, stream, version)


def stream_manifest(clients: Clients, stream: str, version: int = 1) -> StreamManifest:
    """The stream's shards as the deploy controller lists them (``ListShards``)."""
    return StreamManifest(version=version, stream_name=stream, shards=GeoStreams(clients.kinesis).shards(stream))


def publish_manifest(clients: Clients, res: Resources, stream: str, version: int) -> None:
    """Write the stream's manifest where workers look for it (``streams/v<version>.json`` in the specs bucket)."""
    manifest = stream_manifest(clients, stream, version)
    clients.s3.put_object(Bucket=res.specs_bucket, Key=stream_manifest_key(version), Body=manifest.to_json())


def set_active(clients: Clients, res: Resources, version: int) -> None:
    clients.dynamodb.put_item(TableName=res.control_table, Item={
        "pk": {"S": "active"}, "version": {"N": str(version)},
        "spec_key": {"S": f"specs/v{version:08d}.json"}, "stream_name": {"S": f"{res.prefix}-geo-v{version}"},
        "flipped_at": {"S": "2026-11-21T00:00:00Z"}})




def set_plan(clients: Clients, res: Resources, from_version: int | None, to_version: int,
             status: str = "started", mode: str = "carry") -> None:
    """Write control ``pk="swap"``, the plan's head every worker reads, as the deploy controller does.

    The ``updated_at`` of each call is later than the one before (workers never go back to an older head)."""
    global _PLAN_WRITES
    _PLAN_WRITES += 1
    head = SwapHead(from_version=from_version, to_version=to_version, mode=mode, status=status,
                    updated_at=float(_PLAN_WRITES))
    ControlTable(clients.dynamodb, res.control_table).put(ControlKey.SWAP, head.to_item())


_PLAN_WRITES = 0


def enriched_rows(clients: Clients, res: Resources, version: int | None = None) -> list[dict[str, Any]]:
    """Every enriched output record the workers wrote so far (of spec ``version`` only, when given)."""
    rows: list[dict[str, Any]] = []
    for obj in clients.s3.list_objects_v2(Bucket=res.output_bucket, Prefix=ENRICHED_PREFIX).get("Contents", []):
        key = parse_enriched_key(obj["Key"])
        if version is None or key.version == version:
            body = clients.s3.get_object(Bucket=res.output_bucket, Key=obj["Key"])["Body"].read()
            rows += [json.loads(line) for line in decode_lines(body, obj["Key"])]
    return rows
