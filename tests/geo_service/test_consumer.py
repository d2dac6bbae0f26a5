"""Locating a worker's shard by hash key and polling it from a checkpoint (moto Kinesis)."""

from __future__ import annotations

import uuid

import pytest

from geo_service.aws import Clients
from geo_service.consumer import ShardConsumer, ShardNotFound, StreamNotReady, shards_for_hash_key
from partitioner.spec import shard_hash_key


def _stream(clients: Clients, shards: int) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    clients.kinesis.create_stream(StreamName=name, ShardCount=shards)
    clients.kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    return name


def _put(clients: Clients, stream: str, hash_key: str, payloads: list[str]) -> list[str]:
    return [clients.kinesis.put_record(StreamName=stream, Data=p.encode(), PartitionKey="k",
                                       ExplicitHashKey=hash_key)["SequenceNumber"] for p in payloads]


def _drain(consumer: ShardConsumer, polls: int = 10) -> list[str]:
    got: list[str] = []
    for _ in range(polls):
        got.extend(r.data.decode() for r in consumer.poll().records)
    return got


def test_each_worker_hash_key_lands_in_its_own_shard(clients: Clients) -> None:
    # GIVEN a 4-shard stream (one per worker, as the deployer creates it)
    stream = _stream(clients, 4)
    # WHEN the shard of each worker's hash key is looked up
    found = [shards_for_hash_key(clients.kinesis, stream, shard_hash_key(i, 4)) for i in range(4)]
    # THEN each worker gets exactly one shard, all different, and its key is inside the range
    assert all(len(f) == 1 for f in found)
    assert len({f[0].shard_id for f in found}) == 4
    assert all(f[0].starting_hash_key <= int(shard_hash_key(i, 4)) <= f[0].ending_hash_key
               for i, f in enumerate(found))


def test_consumer_reads_only_its_shard_and_resumes_after_the_checkpoint(clients: Clients) -> None:
    # GIVEN a 2-shard stream with records for both workers
    stream = _stream(clients, 2)
    key0, key1 = shard_hash_key(0, 2), shard_hash_key(1, 2)
    seqs = _put(clients, stream, key0, ["a", "b", "c"])
    _put(clients, stream, key1, ["x", "y"])
    shards = shards_for_hash_key(clients.kinesis, stream, key0)
    # WHEN worker 0 reads from the start, and a successor resumes after the checkpoint of "b"
    first = _drain(ShardConsumer(clients.kinesis, stream, shards, {}))
    resumed = _drain(ShardConsumer(clients.kinesis, stream, shards, {shards[0].shard_id: seqs[1]}))
    # THEN worker 0 sees only its records, in order, and the successor only what follows the checkpoint
    assert first == ["a", "b", "c"]
    assert resumed == ["c"]


def test_empty_poll_reports_caught_up(clients: Clients) -> None:
    # GIVEN a consumer on an empty shard
    stream = _stream(clients, 1)
    consumer = ShardConsumer(clients.kinesis, stream, shards_for_hash_key(clients.kinesis, stream, "0"), {})
    # WHEN it polls
    batch = consumer.poll()
    # THEN there are no records and it is not behind
    assert batch.records == () and batch.millis_behind_latest == 0 and not batch.at_end


def test_split_shard_is_read_parent_first_then_child(clients: Clients) -> None:
    # GIVEN a 1-shard stream with records, then split, then more records for the same key
    stream = _stream(clients, 1)
    key = str(3 * (1 << 126))  # in the upper half
    _put(clients, stream, key, ["old1", "old2"])
    parent = shards_for_hash_key(clients.kinesis, stream, key)[0].shard_id
    clients.kinesis.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(1 << 127))
    _put(clients, stream, key, ["new1"])
    # WHEN the key's shards are read
    shards = shards_for_hash_key(clients.kinesis, stream, key)
    consumer = ShardConsumer(clients.kinesis, stream, shards, {})
    got = _drain(consumer)
    # THEN the closed parent comes first and the child follows
    assert [s.closed for s in shards] == [True, False] and shards[0].shard_id == parent
    assert got == ["old1", "old2", "new1"]


def test_missing_stream_is_not_ready_and_missing_key_is_named(clients: Clients) -> None:
    # GIVEN no stream named "nope", and a stream
    stream = _stream(clients, 1)
    # WHEN / THEN looking up a missing stream says not ready; an out-of-space key is named
    with pytest.raises(StreamNotReady, match="'nope' does not exist"):
        shards_for_hash_key(clients.kinesis, "nope", "0")
    with pytest.raises(ShardNotFound, match=str(1 << 129)):
        shards_for_hash_key(clients.kinesis, stream, str(1 << 129))
