"""The router paces a backlog (lambdas.runtime.pacing): measured at the geo shard, by when its records arrived."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from typing import Any

from geokernel.geo.tiles import Tile, bounds
from lambdas.router import handler as router_handler
from lambdas.runtime.pacing import PACED_SHARE, SHARD_RECORDS_PER_S
from tests.lambdas.conftest import CTX, Aws, make_spec
from tests.lambdas.test_router import activate

INGEST = "georebal-ingest"


def ingest_batch(n: int, arrived: float) -> dict[str, Any]:
    """``n`` events of one worker's partition, as the event source mapping delivers them from ingest shard 0."""
    b = bounds(Tile(2000, 1300, 12))
    out = []
    for i in range(n):
        ev = {"event_id": f"e{i}", "entity_id": f"x{i % 50}", "ts": 1795255500005, "lat": (b.south + b.north) / 2,
              "lon": (b.west + b.east) / 2}
        out.append({"kinesis": {"partitionKey": ev["entity_id"], "sequenceNumber": str(10**20 + i),
                                "data": base64.b64encode(json.dumps(ev).encode()).decode(),
                                "approximateArrivalTimestamp": arrived},
                    "eventSource": "aws:kinesis", "eventID": f"shardId-000000000000:{10**20 + i}",
                    "eventSourceARN": f"arn:aws:kinesis:us-east-1:123456789012:stream/{INGEST}"})
    return {"Records": out}


def arrivals_per_second(aws: Aws, stream: str) -> Counter[tuple[str, int]]:
    """Records per (shard, whole second of their ApproximateArrivalTimestamp) in ``stream``."""
    k = aws.clients.kinesis
    out: Counter[tuple[str, int]] = Counter()
    for shard in k.list_shards(StreamName=stream)["Shards"]:
        it = k.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            resp = k.get_records(ShardIterator=it, Limit=1000)
            out.update((shard["ShardId"], int(r["ApproximateArrivalTimestamp"].timestamp())) for r in resp["Records"])
            it = resp.get("NextShardIterator") if resp["Records"] else None
    return out


def test_a_backlog_reaches_its_geo_shard_at_the_routers_share(aws: Aws) -> None:
    # GIVEN an active spec, a two-shard ingest stream (two routers share each geo shard) and a batch of 400 events
    # for one worker that arrived a minute ago (a backlog: before the fix it went out in one PutRecords call)
    activate(aws, make_spec(1))
    aws.clients.kinesis.create_stream(StreamName=INGEST, ShardCount=2)
    router_handler.runtime.cache_clear()
    # WHEN the router handles it
    t0 = time.monotonic()
    out = router_handler.handler(ingest_batch(400, time.time() - 60), CTX)
    took = time.monotonic() - t0
    # THEN every record is routed, and no second of the geo shard's arrivals holds more than one router's share
    assert out == {"batchItemFailures": []}
    per_second = arrivals_per_second(aws, "georebal-geo-v1")
    assert sum(per_second.values()) == 400
    assert max(per_second.values()) <= SHARD_RECORDS_PER_S * PACED_SHARE / 2
    # AND it took about 400 records at that rate, not longer
    assert 1.5 < took < 6.0


def test_a_fresh_batch_is_not_paced(aws: Aws) -> None:
    # GIVEN the same 400 events, arrived just now (the steady state)
    activate(aws, make_spec(1))
    aws.clients.kinesis.create_stream(StreamName=INGEST, ShardCount=2)
    router_handler.runtime.cache_clear()
    # WHEN handled THEN they go out at once, in one second, with no wait
    t0 = time.monotonic()
    assert router_handler.handler(ingest_batch(400, time.time() - 0.5), CTX) == {"batchItemFailures": []}
    assert time.monotonic() - t0 < 1.5
    assert sum(arrivals_per_second(aws, "georebal-geo-v1").values()) == 400
