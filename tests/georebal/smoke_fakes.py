"""Fakes for the smoke tests: a deployment's resources in moto, a clock that jumps, a runner that records the cdk
commands (writing what ``cdk deploy`` would: the outputs file and the template) and a pipeline that does what the
deployed system would (a spec goes live, the probes come out enriched) when the clock says it is time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from geokernel.contracts.enriched import EnrichedRecord, encode_lines, enriched_key
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.stream import geo_stream_name
from geokernel.events import ValidEvent, parse_event
from georebal.aws import Session
from georebal.smoke.plan import SmokePlan

REGION = "eu-central-1"  # the region of the recorded "default" account (tests/events/quotas/)
PREFIX = "georebal-smoke-ab12c"
STACK = f"{PREFIX}-geo-rebalancer"
LOG_GROUPS = {name: f"/aws/{name.lower()}/{PREFIX}" for name in (
    "LogGroupRouter", "LogGroupPartitioner", "LogGroupDeployer", "LogGroupHooks", "LogGroupWorkers",
    "LogGroupAggregation")}


def moto_aws() -> Session:
    """georebal's own session class over moto (call inside ``mock_aws``)."""
    return Session(boto3.Session(region_name=REGION))


def make_deployment(aws: Session, prefix: str = PREFIX) -> dict[str, str]:
    """A deployment's resources in moto; returns its stack outputs (as ``cdk deploy --outputs-file`` writes them)."""
    stream, table, bucket = f"{prefix}-ingest", f"{prefix}-control", f"{prefix}-output"
    aws.client("kinesis").create_stream(StreamName=stream, ShardCount=1)
    aws.client("dynamodb").create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                        BillingMode="PAY_PER_REQUEST")
    aws.client("s3").create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    queue = aws.client("sqs").create_queue(QueueName=f"{prefix}-router-failures")["QueueUrl"]
    logs = aws.client("logs")
    for group in LOG_GROUPS.values():
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName="main")
    return {"IngestStreamName": stream, "ControlTable": table, "OutputBucket": bucket, "RouterFailureQueue": queue,
            "SpecsBucket": f"{prefix}-specs", **LOG_GROUPS}


def log(aws: Session, output: str, message: str, at_s: float) -> None:
    """One log line in the log group of stack output ``output``, at epoch second ``at_s``."""
    aws.client("logs").put_log_events(logGroupName=LOG_GROUPS[output], logStreamName="main",
                                      logEvents=[{"timestamp": int(at_s * 1000), "message": message}])


@dataclass
class FakeClock:
    """Epoch seconds that move only by :meth:`sleep`, which then runs ``hooks`` (the fake pipeline)."""

    t: float
    sleeps: list[float] = field(default_factory=list)
    hooks: list[Callable[[float], None]] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.sleeps.append(seconds)
        for hook in self.hooks:
            hook(self.t)


@dataclass
class FakeRunner:
    """Records each command; ``cdk deploy`` writes the outputs file and the template, exits ``deploy_status``."""

    plan: SmokePlan
    outputs: Mapping[str, str]
    deploy_status: int = 0
    destroy_status: int = 0
    template: Mapping[str, Any] = field(default_factory=lambda: {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}})
    calls: list[tuple[list[str], Path, dict[str, str]]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> int:
        self.calls.append((list(argv), cwd, dict(env)))
        if argv[1] == "deploy":
            self.plan.assembly.mkdir(parents=True, exist_ok=True)
            self.plan.template_file.write_text(json.dumps(self.template))
            self.plan.outputs_file.write_text(json.dumps({self.plan.stack_name: dict(self.outputs)}))
            return self.deploy_status
        return self.destroy_status

    @property
    def verbs(self) -> list[str]:
        return [argv[1] for argv, _, _ in self.calls]


@dataclass
class FakePipeline:
    """What the deployed system does, in moto: ``live_after`` seconds after ``start`` the deployer creates geo
    stream v1 and flips ``active``; from then on each step the workers read the ingest stream from its start and
    write every valid event enriched, except the ``drop`` ids, and ``twice`` ids once more."""

    aws: Session
    outputs: Mapping[str, str]
    start: float
    live_after: float
    prefix: str = PREFIX
    fields: EventFields = DEFAULT_EVENT_FIELDS
    drop: frozenset[str] = frozenset()
    twice: frozenset[str] = frozenset()
    live: bool = False
    _iterator: str | None = None
    _flushes: int = 0

    def __call__(self, now: float) -> None:
        if not self.live and now - self.start >= self.live_after:
            self.go_live(now)
        if self.live:
            self.work(now)

    def go_live(self, now: float) -> None:
        stream = geo_stream_name(self.prefix, 1)
        self.aws.client("kinesis").create_stream(StreamName=stream, ShardCount=1)
        item = {"pk": {"S": "active"}, "version": {"N": "1"}, "spec_key": {"S": "specs/v00000001.json"},
                "stream_name": {"S": stream}, "flipped_at": {"S": "2026-01-01T00:00:00Z"}}
        self.aws.client("dynamodb").put_item(TableName=self.outputs["ControlTable"], Item=item)
        self.live = True

    def work(self, now: float) -> None:
        events = self.read_ingest()
        if not events:
            return
        records = [e for e in events if e.event_id not in self.drop] + [e for e in events if e.event_id in self.twice]
        body = encode_lines([json.dumps(EnrichedRecord(e.event_id, 1, "p0", "0", False, fields=e.fields).to_dict())
                             for e in records])
        self._flushes += 1
        key = enriched_key(int(now * 1000), 1, "0", int(now * 1000) + self._flushes)
        self.aws.client("s3").put_object(Bucket=self.outputs["OutputBucket"], Key=key, Body=body)

    def read_ingest(self) -> list[ValidEvent]:
        kinesis = self.aws.client("kinesis")
        if self._iterator is None:
            shard = kinesis.list_shards(StreamName=self.outputs["IngestStreamName"])["Shards"][0]["ShardId"]
            self._iterator = kinesis.get_shard_iterator(StreamName=self.outputs["IngestStreamName"], ShardId=shard,
                                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out: list[ValidEvent] = []
        while True:
            page = kinesis.get_records(ShardIterator=self._iterator, Limit=10000)
            self._iterator = page["NextShardIterator"]
            for record in page["Records"]:
                event = parse_event(record["Data"], self.fields)
                assert isinstance(event, ValidEvent), event  # the smoke run's events are valid ones
                assert record["PartitionKey"] == event.entity_id
                out.append(event)
            if not page["Records"]:
                return out
