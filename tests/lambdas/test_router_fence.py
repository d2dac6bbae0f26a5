"""The router's flip fence (lambdas.router.routing.fence_flip): a batch routed by a version that stopped being active
while its records were put is reported failed, and its re-delivery goes to the new version's stream (moto Kinesis)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from geokernel.contracts.env import EnvVar
from geokernel.contracts.handoff import event_bytes, is_marker
from lambdas.router import handler as router_handler
from lambdas.router.routing import RouteResult, fence_flip
from lambdas.runtime.kinesis import GeoStreams
from tests.lambdas.conftest import CTX, Aws, load_event, make_spec
from tests.lambdas.test_router import activate


@pytest.mark.parametrize("state_handoff", [False, True])
def test_a_flip_during_the_puts_fails_the_batch_and_its_redelivery_goes_to_the_new_stream(
        aws: Aws, monkeypatch: pytest.MonkeyPatch, state_handoff: bool) -> None:
    # GIVEN v1 active (with state handoff: the ingest stream the ledger lists) and v2 flipped active while the
    # router's puts to v1's stream are under way (blue may drain before they land)
    if state_handoff:
        monkeypatch.setenv(EnvVar.STATE_HANDOFF, "1")
        aws.clients.kinesis.create_stream(StreamName="georebal-ingest", ShardCount=1)
    v1 = make_spec(1)
    activate(aws, v1)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    put = GeoStreams.put_records
    flips: list[int] = []

    def put_then_flip(self: GeoStreams, stream: str, entries: Any) -> list[int]:
        failed = put(self, stream, entries)
        if not flips:
            flips.append(2)
            activate(aws, v2)
        return failed

    monkeypatch.setattr(GeoStreams, "put_records", put_then_flip)
    router_handler.runtime.cache_clear()
    event = load_event("kinesis_ingest_batch.json")
    seqs = [r["kinesis"]["sequenceNumber"] for r in event["Records"]]
    # WHEN the router handles the batch, and the event source mapping re-delivers what it reported failed
    first = router_handler.handler(event, CTX)
    again = router_handler.handler(event, CTX)
    # THEN the first try reports its 4 valid records failed (they are on v1's stream, perhaps never read there)
    assert [f["itemIdentifier"] for f in first["batchItemFailures"]] == seqs[:4]
    # AND the re-delivery routes all 4 by v2 (stamped anew with state handoff) and reports nothing failed
    assert again == {"batchItemFailures": []}
    assert sorted(event_ids(aws, "georebal-geo-v1")) == sorted(event_ids(aws, "georebal-geo-v2")) == \
        ["e-0001", "e-0002", "e-0003", "e-0004"]


def event_ids(aws: Aws, name: str) -> list[str]:
    """The event ids of the stream's events (stamped or not; markers left out)."""
    k, out = aws.clients.kinesis, []
    for shard in k.list_shards(StreamName=name)["Shards"]:
        it = k.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = k.get_records(ShardIterator=it, Limit=1000)["Records"]
        out += [json.loads(event_bytes(r["Data"]))["event_id"] for r in records if not is_marker(r["Data"])]
    return out


def test_the_flip_fence_keeps_a_batch_whose_version_is_still_active() -> None:
    # GIVEN a batch routed by v3 that put two records
    result = RouteResult(("9",), 2, 1, 3, (), ("1", "2"))
    # WHEN the active version read after the puts is still v3, or the batch put nothing
    # THEN the result is unchanged; when it moved, both records are failed with the reason
    assert fence_flip(result, 3) is result
    assert fence_flip(RouteResult((), 0, 1, 3), 4).failed_ids == ()
    moved = fence_flip(result, 4)
    assert (moved.failed_ids, moved.routed, moved.put_ids) == (("9", "1", "2"), 0, ())
    assert "active moved from v3 to v4" in moved.reasons[-1]
