"""A worker owning k = 2 shards (moto): the router's keys keep an entity on one shard, the worker reads both."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.worker import GeoWorker
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.shards import with_shards
from lambdas.router.routing import RoutingTable

PARIS = (48.8566, 2.3522)
LYON = (45.7640, 4.8357)
NEW_YORK = (40.7128, -74.0060)
TOKYO = (35.6762, 139.6503)
FRANCE_Z5 = quadkey(tile(PARIS[1], PARIS[0], 5))
FAST_CAL = Calibration(seconds_per_unit=0.004)


def _events(n: int) -> list[dict[str, Any]]:
    points = [PARIS, LYON, NEW_YORK, TOKYO]
    return [{"event_id": f"e{i:05d}", "entity_id": f"car-{i % 16}", "ts": 1_763_700_000_000 + i,
             "lat": points[i % 4][0], "lon": points[i % 4][1]} for i in range(n)]


def _route(clients: Clients, spec: Spec, events: list[dict[str, Any]]) -> None:
    """Put each event with the ExplicitHashKey the router's table gives it (in order, one entity after another)."""
    assert spec.stream_name is not None
    table = RoutingTable(spec, spec.stream_name)
    keys = table.hash_keys_for([e["lon"] for e in events], [e["lat"] for e in events], [e["entity_id"] for e in events])
    for ev, key in zip(events, keys, strict=True):
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(),
                                   PartitionKey=ev["entity_id"], ExplicitHashKey=key)


def _shard_of_each_event(clients: Clients, stream: str) -> dict[str, tuple[str, str]]:
    """event_id -> (shard id, entity id), read straight from every shard of the stream."""
    out: dict[str, tuple[str, str]] = {}
    for shard in clients.kinesis.list_shards(StreamName=stream)["Shards"]:
        it = clients.kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                                ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for r in clients.kinesis.get_records(ShardIterator=it, Limit=10000)["Records"]:
            ev = json.loads(r["Data"])
            out[ev["event_id"]] = (shard["ShardId"], ev["entity_id"])
    return out


def test_two_shards_per_worker_keep_each_entity_on_one_shard_and_process_every_event_once(
        clients: Clients, resources: Resources) -> None:
    # GIVEN spec v1 (w0001 France, w0002 the rest) whose workers own 2 shards each: a 4-shard stream
    spec = with_shards(make_spec(1, [[FRANCE_Z5], [""]], stream_name=f"{resources.prefix}-geo-v1"), 2)
    assert spec.shard_count == 4 and all(len(w.shard_keys) == 2 for w in spec.workers)
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    workers = [GeoWorker(resources.config(1), clients, calibration=FAST_CAL) for _ in range(2)]
    for w in workers:
        w.start()
    statuses = [w.wait_ready(timeout=60) for w in workers]
    by_slot = {s.worker_id: w for s, w in zip(statuses, workers, strict=True)}
    assert sorted(by_slot) == ["w0001", "w0002"]

    # WHEN 200 events of 16 entities are routed with the router's keys
    events = _events(200)
    _route(clients, spec, events)
    by_slot["w0001"].run_until(lambda s: s.events_out == 100, 30)
    by_slot["w0002"].run_until(lambda s: s.events_out == 100, 30)

    # THEN every entity's events sit on one shard, and each worker's entities use both of its shards
    placed = _shard_of_each_event(clients, spec.stream_name or "")
    shards_of: dict[str, set[str]] = defaultdict(set)
    for shard, entity in placed.values():
        shards_of[entity].add(shard)
    assert len(placed) == 200 and all(len(s) == 1 for s in shards_of.values())
    assert len({shard for shard, _ in placed.values()}) == 4
    # AND every event is processed exactly once, by the worker owning its partition
    out = enriched_rows(clients, resources)  # only v1 in this test
    assert sorted(r["event_id"] for r in out) == sorted(e["event_id"] for e in events)
    assert not any(r["stray"] for r in out)
    # AND each entity's events come out in the order they were put (one shard, one reader, in sequence)
    seen: dict[str, list[int]] = defaultdict(list)
    for r in out:
        seen[r["entity_id"]].append(r["ts"])
    assert all(ts == sorted(ts) for ts in seen.values())

    # WHEN the active pointer moves on
    set_active(clients, resources, 2)
    finals = [w.run_until(lambda s: s.finished, timeout=30) for w in workers]
    # THEN both drain and each lease checkpoints both of its shards
    assert [f.state for f in finals] == ["drained", "drained"]
    reader = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 3.0)
    for slot in ("w0001", "w0002"):
        st = reader.read(slot)
        assert st is not None and st.drained and len(st.checkpoint) == 2
