"""Routing with state handoff (lambdas.router.stateful): numbers, stamps, markers, retries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from geokernel.contracts.handoff import Marker, decode_marker, is_marker, split_stamped
from geokernel.contracts.stream import ShardRange, partition_hash_key
from geokernel.events import ValidEvent, parse_event
from lambdas.router.ledger import LedgerEntry, LedgerStore, RouterLedger, Target, inherit
from lambdas.router.stateful import Routed, ingest_order, route_stamped
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.kinesis import GeoStreams, PutEntry

A = Target("geo-v1", "0", "v1#w-a")
B = Target("geo-v1", "100", "v1#w-b")
C = Target("geo-v2", "0", "v2#w-a")


class Streams:
    """Geo streams in memory: what was put where, and which puts fail (by entity, once each)."""

    def __init__(self, fail: Sequence[str] = (), gone: Sequence[str] = ()) -> None:
        self.put: list[tuple[str, str, bytes]] = []
        self.fail = list(fail)
        self.gone = set(gone)

    def put_records(self, name: str, entries: Sequence[PutEntry]) -> list[int]:
        if name in self.gone:
            return list(range(len(entries)))
        bad = []
        for i, e in enumerate(entries):
            if e.partition_key in self.fail:
                self.fail.remove(e.partition_key)
                bad.append(i)
            else:
                self.put.append((name, e.explicit_hash_key, e.data))
        return bad

    def status(self, name: str) -> str | None:
        return None if name in self.gone else "ACTIVE"


def event(entity: str, i: int) -> ValidEvent:
    raw = json.dumps({"event_id": f"{entity}-{i}", "entity_id": entity, "lat": 1.0, "lon": 2.0,
                      "ts": "2026-01-01T00:00:00Z"}).encode()
    ev = parse_event(raw)
    assert isinstance(ev, ValidEvent), ev
    return ev


def item(entity: str, i: int, target: Target, seq: int) -> Routed:
    return Routed(str(seq), (seq, 0), event(entity, i), target)


def stamps(streams: Streams) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, key, data in streams.put:
        if is_marker(data):
            out.append((f"{name}/{key}", decode_marker(data)))
        else:
            stamp, body = split_stamped(data)
            out.append((f"{name}/{key}", (json.loads(body)["event_id"], stamp)))
    return out


def test_events_are_numbered_per_entity_and_stamped_with_the_previous_slot() -> None:
    # GIVEN an entity that moves from slot a to slot b, and one that stays
    ledger, streams = RouterLedger(), Streams()
    items = [item("e1", 1, A, 1), item("e2", 1, A, 2), item("e1", 2, B, 3), item("e2", 2, A, 4)]
    # WHEN the batch is routed
    failed, routed, _ = route_stamped(items, streams, ledger)  # type: ignore[arg-type]
    # THEN every event is put once, numbered, and the mover's marker sits in slot a's shard before its event in b
    assert (failed, routed) == ([], 4)
    got = stamps(streams)
    assert [g for g in got if not isinstance(g[1], Marker)] == [
        ("geo-v1/0", ("e1-1", split_stamped(streams.put[0][2])[0])), ("geo-v1/0", ("e2-1", got[1][1][1])),
        ("geo-v1/100", ("e1-2", got[3][1][1])), ("geo-v1/0", ("e2-2", got[4][1][1]))]
    assert got[2] == ("geo-v1/0", Marker("e1", 1, "v1#w-b"))
    assert [s[1][1].n for s in got if not isinstance(s[1], Marker)] == [1, 1, 2, 2]
    assert got[3][1][1].prev == "v1#w-a" and got[4][1][1].prev == "v1#w-a" and got[0][1][1].prev is None
    assert ledger.entries["e1"] == LedgerEntry(2, (3, 0), B)


def test_a_failed_put_stops_the_entity_and_a_retry_routes_the_rest_once() -> None:
    # GIVEN the first put of e1 fails
    ledger, streams = RouterLedger(), Streams(fail=["e1"])
    items = [item("e1", 1, A, 1), item("e2", 1, A, 2), item("e1", 2, A, 3)]
    # WHEN the batch is routed, then retried from the failed record as the event source mapping does
    failed, routed, reasons = route_stamped(items, streams, ledger)  # type: ignore[arg-type]
    again, routed2, _ = route_stamped(items, streams, ledger)  # type: ignore[arg-type]
    # THEN e1's later event was not put before its first, nothing is put twice, and the numbers have no gap
    assert failed == ["1", "3"] and routed == 1 and reasons
    assert again == [] and routed2 == 3
    got = [(eid, st.n) for _, (eid, st) in stamps(streams)]
    assert got == [("e2-1", 1), ("e1-1", 1), ("e1-2", 2)]


def test_a_marker_to_a_deleted_stream_is_not_needed() -> None:
    # GIVEN an entity last routed to version 1, whose stream is gone (its slots drained and wrote final states)
    ledger = RouterLedger({"e1": LedgerEntry(4, (1, 0), A)})
    streams = Streams(gone=["geo-v1"])
    # WHEN its next event goes to version 2
    failed, routed, _ = route_stamped([item("e1", 5, C, 2)], streams, ledger)  # type: ignore[arg-type]
    # THEN it is put, stamped n=5 after slot v1#w-a
    assert (failed, routed) == ([], 1)
    assert [(eid, st.n, st.prev) for _, (eid, st) in stamps(streams)] == [("e1-5", 5, "v1#w-a")]


def test_ledger_round_trips_through_json_and_orders_kpl_sub_records() -> None:
    ledger = RouterLedger({"e": LedgerEntry(3, (17, 2), B), "f": LedgerEntry(1, (18, 0), A), "g": LedgerEntry(2, (9, 0), B)})
    text = ledger.to_json()
    assert RouterLedger.from_json(text, "x").entries == ledger.entries
    assert json.loads(text)["targets"] == [["geo-v1", "100", "v1#w-b"], ["geo-v1", "0", "v1#w-a"]]  # each once
    # a ledger saved in the earlier layout (each row naming its target) still reads
    old = json.dumps({"entities": {"e": [3, 17, 2, "geo-v1", "100", "v1#w-b"]}})
    assert RouterLedger.from_json(old, "x").entries == {"e": LedgerEntry(3, (17, 2), B)}
    with pytest.raises(AdapterError, match="'s3://b/k' is not a ledger"):
        RouterLedger.from_json('{"targets": [], "entities": {"e": [1, 2, 0, 5]}}', "s3://b/k")
    assert ingest_order("17", "arn/shard-0/17/sub=2") == (17, 2) < ingest_order("17", "arn/shard-0/17/sub=10")


def test_the_ledger_store_starts_empty_saves_once_when_changed_and_a_new_instance_reads_it(aws: Any) -> None:
    # GIVEN a ledger store on the specs bucket and no ledger yet for the shard
    store = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket)
    ledger = store.load("ingest", "shard-0")
    assert ledger.entries == {}
    # WHEN one entity is routed and the ledger saved (twice: the second has nothing new)
    ledger.entries["e"] = LedgerEntry(2, (9, 0), A)
    ledger.dirty = True
    store.save("ingest", "shard-0", ledger)
    store.save("ingest", "shard-0", ledger)
    # THEN it was written once, at the shard's key, and a cold instance reads the same entries back
    assert store.saves == 1
    assert aws.clients.s3.head_object(Bucket=aws.cfg.specs_bucket, Key="router-ledger/ingest/shard-0.json")
    again = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket).load("ingest", "shard-0")
    assert again.entries == {"e": LedgerEntry(2, (9, 0), A)}


def test_a_child_shard_after_a_split_goes_on_numbering_its_entities_from_the_parents_ledger(aws: Any) -> None:
    # GIVEN an ingest stream of one shard whose ledger holds 40 entities
    kinesis = aws.clients.kinesis
    kinesis.create_stream(StreamName="ingest-split", ShardCount=1)
    (parent,) = kinesis.list_shards(StreamName="ingest-split")["Shards"]
    store = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket, GeoStreams(kinesis).shards)
    ledger = store.load("ingest-split", parent["ShardId"])
    for i in range(40):
        ledger.entries[f"ent-{i}"] = LedgerEntry(i + 3, (1000 + i, 0), A)
    ledger.dirty = True
    store.save("ingest-split", parent["ShardId"], ledger)
    # WHEN the shard is split in half (as an on-demand stream does by itself)
    kinesis.split_shard(StreamName="ingest-split", ShardToSplit=parent["ShardId"], NewStartingHashKey=str(2 ** 127))
    children = [ShardRange.from_list_shards(s) for s in kinesis.list_shards(StreamName="ingest-split")["Shards"]
                if s.get("ParentShardId") == parent["ShardId"]]
    assert len(children) == 2
    # THEN each child's first ledger (a cold instance, none stored yet) holds exactly the entities it will receive,
    # with their numbers, and every record of the child counts as new
    cold = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket, GeoStreams(kinesis).shards)
    got = {c.shard_id: cold.load("ingest-split", c.shard_id) for c in children}
    for child in children:
        mine = {e for e in ledger.entries if child.holds(partition_hash_key(e))}
        assert set(got[child.shard_id].entries) == mine
        assert all(got[child.shard_id].entries[e] == LedgerEntry(ledger.entries[e].n, (0, 0), A) for e in mine)
        assert got[child.shard_id].dirty
    assert sum(len(g.entries) for g in got.values()) == 40 and cold.inherited == 2


def test_an_event_after_a_split_gets_the_next_number_not_one() -> None:
    # GIVEN entity e1 routed three times on the parent shard, then the child ledger inherited from it
    parent, streams = RouterLedger(), Streams()
    route_stamped([item("e1", i, A, seq=i) for i in range(3)], streams, parent)  # type: ignore[arg-type]
    whole = ShardRange("shardId-1", 0, 2 ** 128 - 1, 0, parents=("shardId-0",))
    child = inherit(whole, [parent])
    # WHEN its next event arrives on the child shard, with a sequence number lower than the parent's
    route_stamped([item("e1", 3, A, seq=1)], streams, child)  # type: ignore[arg-type]
    # THEN it is put as event 4 of e1 (a worker that applied 1..3 runs it, it is not skipped as a copy)
    assert [s[1][1].n for s in stamps(streams)] == [1, 2, 3, 4]


def test_a_merge_takes_each_parents_entities_and_a_ledger_with_nothing_to_inherit_is_clean() -> None:
    # GIVEN two parent ledgers with an entity each, and one entity in both (the higher number wins)
    left = RouterLedger({"a": LedgerEntry(5, (9, 0), A), "both": LedgerEntry(2, (9, 0), A)})
    right = RouterLedger({"b": LedgerEntry(7, (3, 1), B), "both": LedgerEntry(6, (3, 0), B)})
    merged = ShardRange("shardId-2", 0, 2 ** 128 - 1, 0, parents=("shardId-0", "shardId-1"))
    # WHEN the merged child inherits THEN it has all three, places reset
    got = inherit(merged, [left, right]).entries
    assert got == {"a": LedgerEntry(5, (0, 0), A), "b": LedgerEntry(7, (0, 0), B), "both": LedgerEntry(6, (0, 0), B)}
    # AND a child of empty parents starts clean (nothing to save)
    assert not inherit(merged, [RouterLedger()]).dirty


def test_an_environment_whose_cached_ledger_went_stale_reads_the_newer_one_and_numbers_on(aws: Any) -> None:
    # GIVEN two execution environments of the router (Lambda runs a shard's invocations in any of them)
    env1 = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket)
    env2 = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket)
    streams = Streams()

    def invoke(env: LedgerStore, seqs: range) -> None:
        ledger = env.load("ingest", "shard-0")
        route_stamped([item("e1", s, A, seq=s) for s in seqs], streams, ledger)  # type: ignore[arg-type]
        env.save("ingest", "shard-0", ledger)

    # WHEN the shard's batches go to env1, then env2, then env1 again (its cache last saw event 2)
    invoke(env1, range(1, 3))
    env1.load("ingest", "shard-0").gone_streams.add("geo-v0")  # env1 found a deleted stream
    invoke(env2, range(3, 5))
    invoke(env1, range(5, 6))
    # THEN the numbers go on 1..5 (env1 did not number event 5 as 3, which the worker would skip as a copy)
    assert [s[1][1].n for s in stamps(streams)] == [1, 2, 3, 4, 5]
    # AND env1 made one conditional read per invocation, its unchanged cache answered by 304 without a parse
    assert (env1.reads, env1.saves, env2.reads, env2.saves) == (3, 2, 1, 1)
    again = env1.load("ingest", "shard-0")
    assert again.entries["e1"].n == 5 and env1.reads == 4
    # AND the ledger it read anew still knows the deleted stream (not asked about again)
    assert again.gone_streams == {"geo-v0"}


def test_a_ledger_written_meanwhile_by_another_invocation_is_not_overwritten(aws: Any) -> None:
    # GIVEN two environments that both loaded the shard's ledger (two concurrent invocations of one shard)
    env1 = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket)
    env2 = LedgerStore(aws.clients.s3, aws.cfg.specs_bucket)
    first, second = env1.load("ingest", "shard-1"), env2.load("ingest", "shard-1")
    first.entries["e"] = LedgerEntry(1, (1, 0), A)
    second.entries["e"] = LedgerEntry(1, (2, 0), B)
    first.dirty = second.dirty = True
    env1.save("ingest", "shard-1", first)
    # WHEN the second saves over it THEN the save fails naming the cause, and the first's ledger stays
    with pytest.raises(AdapterError, match="written by another invocation"):
        env2.save("ingest", "shard-1", second)
    assert LedgerStore(aws.clients.s3, aws.cfg.specs_bucket).load("ingest", "shard-1").entries["e"].target == A


def test_a_rollback_undoes_the_batch_under_way_and_nothing_before_it() -> None:
    # GIVEN a ledger with e1's entry from an earlier batch, then a batch that moves e1 and adds e2
    ledger = RouterLedger({"e1": LedgerEntry(4, (1, 0), A)})
    ledger.begin_batch()
    ledger.record("e1", LedgerEntry(5, (2, 0), B))
    ledger.record("e1", LedgerEntry(6, (3, 0), B))
    ledger.record("e2", LedgerEntry(1, (4, 0), B))
    assert ledger.entries["e1"].n == 6 and ledger.dirty
    # WHEN the flip fence fails the batch and the ledger rolls back
    ledger.rollback()
    # THEN e1 is as before the batch, e2 is gone, and the ledger is saved again
    assert ledger.entries == {"e1": LedgerEntry(4, (1, 0), A)} and ledger.dirty
    # AND a later batch's rollback leaves what an acknowledged batch recorded
    ledger.begin_batch()
    ledger.record("e3", LedgerEntry(1, (5, 0), C))
    ledger.begin_batch()
    ledger.rollback()
    assert set(ledger.entries) == {"e1", "e3"}
