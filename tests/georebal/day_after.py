"""Fakes for the day-after tools' tests (locate, replay, redrive): a deployment in moto (its stack outputs, ingest
stream, control and leases tables, specs bucket, failure queue), a live spec and its geo stream, a clock that jumps,
and a Kinesis client that refuses some records (per-record ``ErrorCode``) the way a throttled shard does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from geokernel.contracts.control import ControlKey
from geokernel.contracts.spec_pointer import ActivePointer, spec_key
from geokernel.contracts.stream import StreamManifest
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.rules import check
from geokernel.partition_spec.shards import with_shards
from georebal.aws import Session
from georebal.cli import main, make_parser
from georebal.errors import GeorebalError
from georebal.exits import EXIT_ERROR
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import SpecStore
from tests.geokernel.spec_factory import make_spec
from tests.georebal.smoke_fakes import REGION, moto_aws

PREFIX = "dayafter"
STACK = f"{PREFIX}-geo-rebalancer"
OUTPUTS = {"IngestStreamName": f"{PREFIX}-ingest", "ControlTable": f"{PREFIX}-control",
           "SpecsBucket": f"{PREFIX}-specs", "LeasesTable": f"{PREFIX}-leases",
           "QuarantineBucket": f"{PREFIX}-quarantine"}
#: (name, lat, lon): Berlin's cell is one worker's, Paris's is split by entity over two, London is in the catch-all.
PLACES = (("Berlin", 52.52, 13.405), ("Paris", 48.8566, 2.3522), ("London", 51.5072, -0.1276))


def cell(lat: float, lon: float) -> str:
    """The zoom-10 quadkey of a point."""
    return quadkey(tile(lon, lat, 10))


def day_spec(version: int = 3, shards_per_worker: int = 2) -> Spec:
    """Three workers of ``shards_per_worker`` shards: w1 owns Berlin's cell and the catch-all, w2 and w3 each half of
    Paris's cell's entities."""
    (_, blat, blon), (_, plat, plon), _ = PLACES
    spec = make_spec([("p0001", "w1", [cell(blat, blon)], 100.0),
                      ("p0002", "w2", [cell(plat, plon)], 50.0, (0, 32768)),
                      ("p0003", "w3", [cell(plat, plon)], 50.0, (32768, 65536))], 1000, version=version)
    return check(with_shards(spec, shards_per_worker).replace(stream_name=f"{PREFIX}-geo-v{version}"))


@dataclass
class Deployment:
    """The moto resources of one deployment, its stack outputs (``outputs``) and clients (``aws``)."""

    aws: Session
    outputs: dict[str, str]

    def client(self, service: str) -> Any:
        return self.aws.client(service)

    def run(self, *args: str, clock: Any = None, aws: Any = None) -> int:
        """``python -m georebal ARGS`` against this moto account (or ``aws``), with ``clock`` when given (the
        command's own keyword; errors printed as :func:`georebal.cli.main` prints them)."""
        session = aws or self.aws
        if clock is None:
            return main(list(args), aws=lambda region, profile: session)
        parsed = make_parser().parse_args(list(args))
        try:
            status: int = parsed.func(parsed, lambda region, profile: session, clock=clock)
        except GeorebalError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        return status

    @property
    def ingest(self) -> str:
        return self.outputs["IngestStreamName"]

    @property
    def queue(self) -> str:
        return self.outputs["RouterFailureQueue"]

    def activate(self, spec: Spec) -> None:
        """Publish ``spec`` as the deployer does: the spec object, its geo stream and manifest, the active pointer."""
        specs = SpecStore(self.client("s3"), self.outputs["SpecsBucket"])
        specs.put_new(spec)
        streams = GeoStreams(self.client("kinesis"))
        name = str(spec.stream_name)
        streams.create(name, spec.shard_count)
        specs.put_stream_manifest(StreamManifest(spec.version, name, streams.shards(name)))
        pointer = ActivePointer(spec.version, spec_key(spec.version), name, "2026-05-16T14:00:00Z")
        ControlTable(self.client("dynamodb"), self.outputs["ControlTable"]).put(ControlKey.ACTIVE, pointer.to_item())

    def put_lease(self, key: str, owner: str | None, expires_at: float, *, ready: bool = True) -> None:
        item: dict[str, Any] = {"lease_key": {"S": key}, "expires_at": {"N": str(expires_at)},
                                "ready": {"BOOL": ready}, "drained": {"BOOL": False}, "released": {"BOOL": False}}
        if owner is not None:
            item["owner"] = {"S": owner}
        self.client("dynamodb").put_item(TableName=self.outputs["LeasesTable"], Item=item)

    def read_shard(self, stream: str, shard_id: str) -> list[dict[str, Any]]:
        """Every record of one shard, oldest first."""
        kinesis = self.client("kinesis")
        it = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard_id,
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out: list[dict[str, Any]] = []
        while True:
            answer = kinesis.get_records(ShardIterator=it, Limit=10_000)
            out += answer["Records"]
            if not answer["Records"]:
                return out
            it = answer["NextShardIterator"]

    def read_stream(self, stream: str) -> dict[str, list[dict[str, Any]]]:
        """Every record of every shard (shard id -> records, oldest first)."""
        shards = self.client("kinesis").list_shards(StreamName=stream)["Shards"]
        return {s["ShardId"]: self.read_shard(stream, s["ShardId"]) for s in shards}


def make_deployment(*, ingest_shards: int = 2) -> Deployment:
    """A deployment in moto (call inside ``mock_aws``): its stack (outputs only) and the resources they name."""
    aws = moto_aws()
    outputs = dict(OUTPUTS)
    aws.client("kinesis").create_stream(StreamName=outputs["IngestStreamName"], ShardCount=ingest_shards)
    for table, key in ((outputs["ControlTable"], "pk"), (outputs["LeasesTable"], "lease_key")):
        aws.client("dynamodb").create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                                            BillingMode="PAY_PER_REQUEST")
    for bucket in (outputs["SpecsBucket"], outputs["QuarantineBucket"]):
        aws.client("s3").create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    outputs["RouterFailureQueue"] = aws.client("sqs").create_queue(QueueName=f"{PREFIX}-router-failures")["QueueUrl"]
    template = {"Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
                "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
    aws.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    return Deployment(aws, outputs)


def event(event_id: str, entity: str, lat: float, lon: float, ts: int = 1_778_940_000_000) -> dict[str, Any]:
    return {"event_id": event_id, "entity_id": entity, "ts": ts, "lat": lat, "lon": lon}


def events(n: int, entities: int = 7) -> list[dict[str, Any]]:
    """``n`` events over ``entities`` entities, in turn over :data:`PLACES`."""
    out = []
    for i in range(n):
        _, lat, lon = PLACES[i % len(PLACES)]
        out.append(event(f"ev-{i:04d}", f"ent-{i % entities}", round(lat + i * 1e-5, 6), lon))
    return out


def put_events(kinesis: Any, stream: str, evs: Sequence[dict[str, Any]]) -> None:
    """Put ``evs`` in order, each with its entity id as partition key (a producer)."""
    for ev in evs:
        kinesis.put_record(StreamName=stream, Data=json.dumps(ev, separators=(",", ": ")).encode(),
                          PartitionKey=ev["entity_id"])


@dataclass
class FakeClock:
    """Epoch seconds that move only by :meth:`sleep`."""

    t: float
    sleeps: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@dataclass
class Refusing:
    """A Kinesis client that refuses, in each of its first ``calls`` PutRecords calls, the records ``refuse`` picks
    (``ProvisionedThroughputExceededException``, not written) and writes the others, as a throttled shard does."""

    inner: Any
    refuse: Callable[[int, int, dict[str, Any]], bool]  # (call number from 1, index in the call, record)
    calls: int = 1_000_000
    made: int = 0
    refused: int = 0

    def put_records(self, **kw: Any) -> dict[str, Any]:
        self.made += 1
        records = kw["Records"]
        bad = {i for i, r in enumerate(records) if self.made <= self.calls and self.refuse(self.made, i, r)}
        self.refused += len(bad)
        good = [r for i, r in enumerate(records) if i not in bad]
        answers = iter(self.inner.put_records(StreamName=kw["StreamName"], Records=good)["Records"] if good else [])
        out = [{"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded for shard"}
               if i in bad else next(answers) for i in range(len(records))]
        return {"FailedRecordCount": len(bad), "Records": out}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class WithClient:
    """A session whose ``client(service)`` is ``replaced[service]`` when there is one (a wrapped client)."""

    inner: Session
    replaced: dict[str, Any]

    @property
    def region(self) -> str:
        return self.inner.region

    def client(self, service: str) -> Any:
        return self.replaced.get(service) or self.inner.client(service)
