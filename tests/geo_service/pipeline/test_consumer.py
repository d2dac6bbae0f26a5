"""Locating a worker's shard by hash key and polling it from a checkpoint (moto Kinesis)."""

from __future__ import annotations

import uuid
from collections import Counter
from itertools import pairwise

import pytest
from geo_testkit import Resources, make_spec, publish_manifest, publish_spec, stream_manifest

from geo_service.adapters.aws import Clients
from geo_service.adapters.timebase import SYSTEM
from geo_service.pipeline.consumer import CallSpacing, ShardConsumer, ShardNotFound, shard_lineages, shards_for_hash_key
from geokernel.partition_spec.model import shard_hash_key


def _stream(clients: Clients, shards: int) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    clients.kinesis.create_stream(StreamName=name, ShardCount=shards)
    clients.kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    return name


def _put(clients: Clients, stream: str, hash_key: str, payloads: list[str]) -> list[str]:
    return [clients.kinesis.put_record(StreamName=stream, Data=p.encode(), PartitionKey="k",
                                       ExplicitHashKey=hash_key)["SequenceNumber"] for p in payloads]


def _consumer(clients: Clients, stream: str, shards: list, checkpoint: dict[str, str]) -> ShardConsumer:
    return ShardConsumer(clients.kinesis, stream, shards, checkpoint, min_interval_s=0.0)


def _drain(consumer: ShardConsumer, polls: int = 10) -> list[str]:
    got: list[str] = []
    for _ in range(polls):
        got.extend(r.data.decode() for r in consumer.poll().records)
    return got


def test_each_worker_hash_key_lands_in_its_own_shard(clients: Clients) -> None:
    # GIVEN a 4-shard stream (one per worker, as the deployer creates it)
    stream = _stream(clients, 4)
    # WHEN the shard of each worker's hash key is looked up
    manifest = stream_manifest(clients, stream)
    found = [shards_for_hash_key(manifest, shard_hash_key(i, 4)) for i in range(4)]
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
    shards = shards_for_hash_key(stream_manifest(clients, stream), key0)
    # WHEN worker 0 reads from the start, and a successor resumes after the checkpoint of "b"
    first = _drain(_consumer(clients, stream, shards, {}))
    resumed = _drain(_consumer(clients, stream, shards, {shards[0].shard_id: seqs[1]}))
    # THEN worker 0 sees only its records, in order, and the successor only what follows the checkpoint
    assert first == ["a", "b", "c"]
    assert resumed == ["c"]


def test_empty_poll_reports_caught_up(clients: Clients) -> None:
    # GIVEN a consumer on an empty shard
    stream = _stream(clients, 1)
    consumer = _consumer(clients, stream, shards_for_hash_key(stream_manifest(clients, stream), "0"), {})
    # WHEN it polls
    batch = consumer.poll()
    # THEN there are no records and it is not behind
    assert batch.records == () and batch.millis_behind_latest == 0 and not batch.at_end


def test_split_shard_is_read_parent_first_then_child(clients: Clients) -> None:
    # GIVEN a 1-shard stream with records, then split, then more records for the same key
    stream = _stream(clients, 1)
    key = str(3 * (1 << 126))  # in the upper half
    _put(clients, stream, key, ["old1", "old2"])
    parent = shards_for_hash_key(stream_manifest(clients, stream), key)[0].shard_id
    clients.kinesis.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(1 << 127))
    _put(clients, stream, key, ["new1"])
    # WHEN the key's shards are read
    shards = shards_for_hash_key(stream_manifest(clients, stream), key)
    consumer = _consumer(clients, stream, shards, {})
    got = _drain(consumer)
    # THEN the closed parent comes first and the child follows
    assert [s.closed for s in shards] == [True, False] and shards[0].shard_id == parent
    assert got == ["old1", "old2", "new1"]


def test_a_key_outside_every_shard_is_named(clients: Clients) -> None:
    # GIVEN a stream's manifest WHEN a key outside the hash-key space is looked up THEN the error names it
    manifest = stream_manifest(clients, _stream(clients, 1))
    with pytest.raises(ShardNotFound, match=str(1 << 129)):
        shards_for_hash_key(manifest, str(1 << 129))


def test_polls_closer_than_the_spacing_make_no_call(clients: Clients) -> None:
    # GIVEN a consumer that may call GetRecords at most once per 0.5 s, on a fake clock, and a record
    stream = _stream(clients, 1)
    _put(clients, stream, "0", ["a"])
    now = [100.0]
    calls: list[int] = []
    clients.kinesis.meta.events.register("before-call.kinesis.GetRecords", lambda **kw: calls.append(1))
    consumer = ShardConsumer(clients.kinesis, stream, shards_for_hash_key(stream_manifest(clients, stream), "0"), {},
                             min_interval_s=0.5, clock=lambda: now[0])
    # WHEN it polls three times 0.3 s apart
    batches = []
    for _ in range(3):
        batches.append(consumer.poll())
        now[0] += 0.3
    # THEN only the first and third polls called Kinesis; the second is a spaced batch that claims nothing
    assert [b.spaced for b in batches] == [False, True, False] and len(calls) == 2
    assert [r.data for r in batches[0].records] == [b"a"] and batches[1].millis_behind_latest >= 1


def test_two_consumers_of_one_shard_in_a_process_share_the_spacing(clients: Clients) -> None:
    # GIVEN two consumers of the same shard (a carried slot's reader prepared ahead and the slot's own) sharing the
    # process's spacing map, on a fake clock
    stream = _stream(clients, 1)
    now = [100.0]
    calls: list[int] = []
    clients.kinesis.meta.events.register("before-call.kinesis.GetRecords", lambda **kw: calls.append(1))
    shards = shards_for_hash_key(stream_manifest(clients, stream), "0")
    spacing = CallSpacing()
    first, second = (ShardConsumer(clients.kinesis, stream, shards, {}, min_interval_s=0.5, clock=lambda: now[0],
                                   spacing=spacing) for _ in range(2))
    # WHEN both poll in the same instant, then again 0.5 s later
    polled = [first.poll().spaced, second.poll().spaced]
    now[0] += 0.5
    polled += [second.poll().spaced, first.poll().spaced]
    # THEN one call per 0.5 s reached the shard, whichever consumer made it
    assert polled == [False, True, False, True] and len(calls) == 2


def test_the_spacing_counts_from_when_a_slow_call_returned(clients: Clients) -> None:
    # GIVEN a consumer spaced at 0.5 s whose first poll also fetches an iterator, and every Kinesis call takes 0.3 s
    # on a fake clock; the times the GetRecords calls were sent are recorded
    stream = _stream(clients, 1)
    now = [99.8]
    sent: list[float] = []

    def slow(**_: object) -> None:
        now[0] += 0.3

    def send(**_: object) -> None:
        sent.append(now[0])
        slow()

    clients.kinesis.meta.events.register("before-call.kinesis.GetShardIterator", slow)
    clients.kinesis.meta.events.register("before-call.kinesis.GetRecords", send)
    consumer = ShardConsumer(clients.kinesis, stream, shards_for_hash_key(stream_manifest(clients, stream), "0"), {},
                             min_interval_s=0.5, clock=lambda: now[0])
    # WHEN it polls every 0.1 s for 3 s, as a busy poll loop would
    for _ in range(30):
        consumer.poll()
        now[0] += 0.1
    # THEN consecutive calls were sent at least 0.5 s apart, so no wall-clock second holds three of them (the first
    # call, sent 0.3 s late after GetShardIterator, used to share a second with the next two)
    gaps = [b - a for a, b in pairwise(sent)]
    per_second = Counter(int(t) for t in sent)
    assert len(sent) >= 3 and min(gaps) >= 0.5 - 1e-9 and max(per_second.values()) <= 2, (sent, per_second)


def test_a_slot_waits_for_its_stream_manifest_then_finds_its_shard(clients: Clients, resources: Resources) -> None:
    # GIVEN a published spec whose stream exists but whose manifest is not published yet
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec, create_stream=False)
    clients.kinesis.create_stream(StreamName=spec.stream_name, ShardCount=1)
    stop = SYSTEM.event()
    waits: list[str] = []

    def publish_on_second_wait(why: str) -> None:
        waits.append(why)
        if len(waits) == 2:
            publish_manifest(clients, resources, str(spec.stream_name), 1)

    # WHEN the slot looks for its shards
    lineages = shard_lineages(clients.s3, resources.specs_bucket, spec, "w0001", stop=stop, retry_s=0.01,
                              on_wait=publish_on_second_wait)
    # THEN it waited (naming why) until the manifest came, then found its one shard
    assert len(waits) == 2 and "manifest" in waits[0]
    assert lineages is not None and len(lineages) == 1 and len(lineages[0]) == 1
    # AND a stopped search returns None without waiting
    stop.set()
    assert shard_lineages(clients.s3, resources.specs_bucket, spec, "w0002", stop=stop, retry_s=10.0) is None
