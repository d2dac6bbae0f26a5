"""The documented AWS quotas the system's calls are held against, one row per quota, each citing its AWS page.

A :class:`Quota` is a rate: ``per_second`` units of ``unit`` in one ``scope`` (an account and region, a stream, a
shard, a table, a DynamoDB partition, an S3 prefix); token-bucket quotas (ECS, Fargate) also have a ``burst`` (the
bucket: the most in any one second; ``per_second`` is then the refill). Usage is recorded under the row's ``key``
(:mod:`geokernel.aws_budget.usage`).

Notes
-----
* Kinesis API limits are the API reference's own sentences (also in botocore's service model): e.g.
  ``DescribeStreamSummary`` "has a limit of 20 transactions per second per account".
* A DynamoDB item's key stands in for its partition (one item is always in one partition): the per-partition rows
  are checked per item, which finds hot items; several items of a small table may share a partition, so the
  table-level rows are checked too.
* The ECS API throttles by action category, one token bucket per category per account and region (the
  request-throttling page's table: bucket = burst, refill = sustained). The rows are keyed by the one action of each
  category the system calls; the other actions of those categories (``ListServices``, ``ListTaskDefinitions``,
  ``DeregisterTaskDefinition``, ``CreateService``, ``DeleteService``, ``GetTaskProtection``) are never called, so
  an action's count is its category's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from geokernel.errors import PartitionerError


class BudgetError(PartitionerError, ValueError):
    """A quota row or a usage record is malformed; the message names the bad value."""


class Scope(StrEnum):
    """What one quota is counted over."""

    ACCOUNT = "account"      # per account and region
    STREAM = "stream"        # per Kinesis stream
    SHARD = "shard"          # per Kinesis shard (key: "<stream>/<shard id>")
    TABLE = "table"          # per DynamoDB table
    PARTITION = "partition"  # per DynamoDB partition (key: "<table>#<item key>", an item stands in for it)
    PREFIX = "prefix"        # per S3 prefix (key: "<bucket>/<key up to its last '/'>")


class Unit(StrEnum):
    CALLS = "calls"
    RECORDS = "records"
    BYTES = "bytes"
    READ_UNITS = "read units"
    WRITE_UNITS = "write units"
    TASKS = "tasks"
    EXECUTIONS = "executions"


@dataclass(frozen=True)
class Quota:
    """One documented quota (see the module docstring)."""

    key: str
    title: str
    scope: Scope
    unit: Unit
    per_second: float | None
    source: str
    burst: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.per_second is not None and not self.per_second > 0:
            raise BudgetError(f"quota {self.key!r}: per_second must be positive, got {self.per_second!r}")
        if self.burst is not None and not self.burst > 0:
            raise BudgetError(f"quota {self.key!r}: burst must be positive, got {self.burst!r}")
        if not self.source.startswith("https://"):
            raise BudgetError(f"quota {self.key!r}: source must be an https URL, got {self.source!r}")


_KINESIS_API = "https://docs.aws.amazon.com/kinesis/latest/APIReference/API_{}.html"
_KINESIS_LIMITS = "https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html"
_DDB_PARTITION = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
_DDB_QUOTAS = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
_DDB_ON_DEMAND = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html"
_S3_PERF = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html"
_ECS_THROTTLE = "https://docs.aws.amazon.com/AmazonECS/latest/APIReference/request-throttling.html"
_FARGATE_THROTTLE = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html"
_LAMBDA_LIMITS = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
_EVENTS_QUOTAS = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html"


def _kinesis_call(op: str, rate: float, scope: Scope = Scope.ACCOUNT) -> Quota:
    return Quota(f"kinesis.{op}", f"Kinesis {op}", scope, Unit.CALLS, rate, _KINESIS_API.format(op))


QUOTAS: tuple[Quota, ...] = (
    # Kinesis control plane (per account unless said)
    _kinesis_call("DescribeStreamSummary", 20),
    _kinesis_call("DescribeStream", 10),
    _kinesis_call("ListShards", 1000, Scope.STREAM),
    _kinesis_call("CreateStream", 5),
    _kinesis_call("DeleteStream", 5),
    _kinesis_call("DescribeLimits", 1),
    _kinesis_call("ListStreams", 5),
    _kinesis_call("AddTagsToStream", 5),
    # Kinesis data plane (per shard)
    _kinesis_call("GetShardIterator", 5, Scope.SHARD),
    _kinesis_call("GetRecords", 5, Scope.SHARD),
    Quota("kinesis.GetRecords.bytes", "Kinesis read bytes", Scope.SHARD, Unit.BYTES, 2 * 1024 * 1024,
          _KINESIS_API.format("GetRecords"), note="each shard can read up to 2 MiB per second"),
    Quota("kinesis.PutRecords.records", "Kinesis records written", Scope.SHARD, Unit.RECORDS, 1000,
          _KINESIS_API.format("PutRecords"), note="1,000 records per second per shard, PutRecord and PutRecords"),
    Quota("kinesis.PutRecords.bytes", "Kinesis bytes written", Scope.SHARD, Unit.BYTES, 1024 * 1024,
          _KINESIS_API.format("PutRecords"), note="1 MB per second per shard (data plus partition keys)"),
    # DynamoDB (on-demand tables)
    Quota("dynamodb.read_units.partition", "DynamoDB reads of one partition", Scope.PARTITION, Unit.READ_UNITS,
          3000, _DDB_PARTITION, note="3,000 read units per second per partition (an item stands in for it)"),
    Quota("dynamodb.write_units.partition", "DynamoDB writes of one partition", Scope.PARTITION, Unit.WRITE_UNITS,
          1000, _DDB_PARTITION, note="1,000 write units per second per partition"),
    Quota("dynamodb.read_units.table", "DynamoDB reads of a new on-demand table", Scope.TABLE, Unit.READ_UNITS,
          12000, _DDB_ON_DEMAND, note="a new on-demand table sustains 12,000 reads/s (40,000 per table once scaled)"),
    Quota("dynamodb.write_units.table", "DynamoDB writes of a new on-demand table", Scope.TABLE, Unit.WRITE_UNITS,
          4000, _DDB_ON_DEMAND, note="a new on-demand table sustains 4,000 writes/s (40,000 per table once scaled)"),
    # S3
    Quota("s3.put.prefix", "S3 PUT/COPY/POST/DELETE per prefix", Scope.PREFIX, Unit.CALLS, 3500, _S3_PERF),
    Quota("s3.get.prefix", "S3 GET/HEAD per prefix", Scope.PREFIX, Unit.CALLS, 5500, _S3_PERF),
    # ECS and Fargate (token buckets: burst = bucket, per_second = refill)
    Quota("fargate.task_launches", "Fargate task launches", Scope.ACCOUNT, Unit.TASKS, 20, _FARGATE_THROTTLE,
          burst=100, note="on-demand tasks: a bucket of 100 refilled at 20 per second"),
    Quota("ecs.RegisterTaskDefinition", "ECS RegisterTaskDefinition", Scope.ACCOUNT, Unit.CALLS, 1, _ECS_THROTTLE,
          burst=20),
    Quota("ecs.DescribeTaskDefinition", "ECS DescribeTaskDefinition", Scope.ACCOUNT, Unit.CALLS, 20, _ECS_THROTTLE,
          burst=50, note="task definition read actions: a bucket of 50 refilled at 20 per second"),
    Quota("ecs.UpdateService", "ECS UpdateService", Scope.ACCOUNT, Unit.CALLS, 5, _ECS_THROTTLE, burst=50,
          note="service modify actions: a bucket of 50 refilled at 5 per second"),
    Quota("ecs.DescribeServices", "ECS DescribeServices", Scope.ACCOUNT, Unit.CALLS, 20, _ECS_THROTTLE, burst=100,
          note="service read actions: a bucket of 100 refilled at 20 per second"),
    Quota("ecs.UpdateTaskProtection", "ECS UpdateTaskProtection (through the agent)", Scope.ACCOUNT, Unit.CALLS,
          80, _ECS_THROTTLE, burst=200, note="task protection actions: a bucket of 200 refilled at 80 per second"),
    # EventBridge (the workers' geofence sink, GEOFENCE_EVENT_BUS: geo_service/adapters/eventbridge.py)
    Quota("events.PutEvents", "EventBridge PutEvents", Scope.ACCOUNT, Unit.CALLS, 10000, _EVENTS_QUOTAS,
          note="PutEvents throttle limit in transactions per second: 10,000 in us-east-1, us-west-2 and eu-west-1, "
               "2,400 in us-east-2, fewer in smaller regions (adjustable); up to 10 entries a call"),
    # Lambda
    Quota("lambda.concurrency", "Lambda concurrent executions", Scope.ACCOUNT, Unit.EXECUTIONS, 1000,
          _LAMBDA_LIMITS, note="1,000 per region by default (a level, not a rate: the peak is compared)"),
)

BY_KEY: dict[str, Quota] = {q.key: q for q in QUOTAS}

_DDB_WARM = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html"


#: The table rows whose quota a pre-warmed table raises (warm throughput sets writes and reads per second).
WARM_TABLE_ROWS = ("dynamodb.write_units.table", "dynamodb.read_units.table")


def warm_table(key: str, units_per_second: float) -> Quota:
    """The quota of row ``key`` (one of :data:`WARM_TABLE_ROWS`) for a table pre-warmed to ``units_per_second``."""
    if key not in WARM_TABLE_ROWS:
        raise BudgetError(f"warm_table: {key!r} is not a table row that warm throughput sets; "
                          f"one of {WARM_TABLE_ROWS}")
    return replace(BY_KEY[key], title=BY_KEY[key].title.replace("a new on-demand", "a pre-warmed"),
                   per_second=units_per_second, source=_DDB_WARM, note="warm throughput set when the table was created")
