"""lambdas.router: the router's puts to a geo stream fail per record and keep each entity's order
(lambdas.router.waves): a stand-in stream fails every third record it is given."""

from __future__ import annotations

import json
from typing import Any

from geokernel.contracts.spec_pointer import spec_key
from geokernel.geo.tiles import Tile, bounds
from geokernel.partition_spec.model import Spec
from lambdas.router.routing import InputRecord, RoutingTable, route_batch
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import QuarantineSink
from tests.lambdas.conftest import Aws, make_spec


def activate(aws: Aws, spec: Spec) -> None:
    """Publish ``spec``, create its stream (one shard per worker) and point 'active' at it."""
    aws.specs.put_new(spec)
    aws.streams.create(spec.stream_name or "", len(spec.workers))
    aws.control.put("active", {"version": spec.version, "spec_key": spec_key(spec.version),
                               "stream_name": spec.stream_name, "flipped_at": "2026-11-21T10:00:00Z"})


class PartlyThrottledKinesis:
    """Kinesis answering PutRecords with a per-record throttle on every third record, keeping what it wrote in order.

    moto never fails single records of a PutRecords call, so this one path uses a stand-in client
    that returns the documented response shape (``Records[i].ErrorCode``).
    """

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.written: list[str] = []  # the event ids the stream holds, in write order

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(len(Records))
        out = []
        for i, rec in enumerate(Records):
            if (sum(self.calls[:-1]) + i) % 3 == 0:
                out.append({"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "Rate exceeded"})
            else:
                out.append({"SequenceNumber": "1", "ShardId": "shardId-0"})
                self.written.append(json.loads(rec["Data"])["event_id"])
        return {"FailedRecordCount": sum("ErrorCode" in r for r in out), "Records": out}


def _events(n: int, entity: Any) -> list[InputRecord]:
    b = bounds(Tile(2000, 1300, 12))
    return [InputRecord(f"seq-{i}", json.dumps({"event_id": f"e{i}", "entity_id": entity(i), "ts": 1795255500005,
                                                "lat": (b.south + b.north) / 2, "lon": b.west + 0.01}).encode(), "t")
            for i in range(n)]


def test_per_record_put_failures_are_reported_exactly(aws: Aws) -> None:
    # GIVEN 700 valid events of 700 entities (one wave, two PutRecords calls) and a stream that throttles every
    # third record
    spec = make_spec(1)
    activate(aws, spec)
    kinesis = PartlyThrottledKinesis()
    # WHEN routed
    res = route_batch(_events(700, lambda i: f"x{i}"), RoutingTable(spec, "georebal-geo-v1"), GeoStreams(kinesis),
                      QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    # THEN exactly the throttled records are reported, in order, and the rest counted as routed
    assert kinesis.calls == [500, 200]
    assert res.failed_ids == tuple(f"seq-{i}" for i in range(700) if i % 3 == 0)
    assert res.routed == 700 - len(res.failed_ids)


def test_an_entity_whose_put_failed_sends_nothing_later_in_the_batch(aws: Aws) -> None:
    # GIVEN 12 events of 3 entities, interleaved (e0 of a, e1 of b, e2 of c, e3 of a, ...), and a stream that fails
    # every third record it is given: the first wave holds e0, e1, e2 (e0 fails)
    spec = make_spec(1)
    activate(aws, spec)
    kinesis = PartlyThrottledKinesis()
    # WHEN routed
    res = route_batch(_events(12, lambda i: "abc"[i % 3]), RoutingTable(spec, "georebal-geo-v1"), GeoStreams(kinesis),
                      QuarantineSink(aws.clients.s3, aws.cfg.quarantine_bucket, "r"))
    # THEN the puts went in waves of one record per entity, an entity whose record failed put nothing after it, and
    # every entity's records reached the stream in its own order (on a retry the event source re-delivers from the
    # first failed record, so the failed ones come after what was written, in order)
    assert max(kinesis.calls) <= 3
    for entity in "abc":
        mine = [f"e{i}" for i in range(12) if "abc"[i % 3] == entity]
        written = [e for e in kinesis.written if e in mine]
        assert written == mine[:len(written)], (entity, written)
    failed = {int(f.split("-")[1]) for f in res.failed_ids}
    assert failed == {i for i in range(12) if f"e{i}" not in kinesis.written}
    assert 0 in failed and 3 in failed  # a's first failed, so its second was never put
