"""The per-record handover across a swap (``geo_service.handover``): the gate, the gated reader, and a carried
slot that resumes before its old slot drained (real worker code in threads, moto server)."""

from __future__ import annotations

import json
import time
from typing import Any

from geo_testkit import Resources, make_spec, publish_spec, set_active, set_plan

from geo_service.aws import Clients
from geo_service.consumer import Batch, KinesisRecord, ShardConsumer, shards_for_hash_key, worker_shards
from geo_service.cost import Calibration
from geo_service.handover import OPEN, CaughtUp, GatedReader, HandoverGate, SlotReader
from geo_service.lease import LeaseManager
from geo_service.worker import GeoWorker
from partitioner.spec import shard_hash_key
from partitioner.tiles import quadkey, tile

PARIS = (48.8566, 2.3522)
FRANCE_Z5 = quadkey(tile(PARIS[1], PARIS[0], 5))
FAST_CAL = Calibration(seconds_per_unit=0.004)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(arrival_s: float, seq: int = 1) -> KinesisRecord:
    return KinesisRecord(shard_id="s", sequence_number=str(seq), partition_key="k", data=b"{}", arrival_s=arrival_s)


# ---------------------------------------------------------------------------- CaughtUp
def test_a_poll_that_reached_the_tip_catches_up_to_when_it_started() -> None:
    # GIVEN a slot caught up to 10 s
    c = CaughtUp()
    c.polled(10.0, Batch("s", (), millis_behind_latest=0, at_end=False))
    # WHEN a later call that reached the tip returns records
    c.polled(12.5, Batch("s", (_record(12.0),), millis_behind_latest=0, at_end=False))
    # THEN everything that arrived before the call started is processed
    assert c.at == 12.5


def test_a_poll_behind_the_tip_catches_up_only_to_its_last_record_and_never_moves_back() -> None:
    # GIVEN a slot caught up to 5 s
    c = CaughtUp()
    c.polled(5.0, Batch("s", (), millis_behind_latest=0, at_end=False))
    # WHEN a call behind the tip returns records up to 8 s, then an empty one behind the tip, then an older one
    c.polled(20.0, Batch("s", (_record(7.0), _record(8.0)), millis_behind_latest=3000, at_end=False))
    after_records = c.at
    c.polled(21.0, Batch("s", (), millis_behind_latest=1, at_end=False))
    c.polled(2.0, Batch("s", (), millis_behind_latest=0, at_end=False))
    # THEN it claims just under its last record's arrival (a later record may share that millisecond), and keeps it
    assert after_records == 8.0 - 0.001 and c.at == after_records


# ---------------------------------------------------------------------------- HandoverGate
def test_the_gate_passes_what_arrived_a_margin_before_the_slowest_source() -> None:
    # GIVEN two old slots caught up to 100 s and 103 s, a 0.5 s margin
    reads: list[int] = []
    values = {"w0001": 100.0, "w0002": 103.0}

    def sources() -> dict[str, float]:
        reads.append(1)
        return dict(values)

    clock = Clock()
    gate = HandoverGate(sources, margin_s=0.5, refresh_s=1.0, timeout_s=60.0, clock=clock)
    # WHEN a record that arrived at 101 s asks
    state = gate.state(need=101.0)
    # THEN the limit is the slowest source minus the margin: the record waits
    assert (state.limit, state.open) == (99.5, False)
    # WHEN asked again within the refresh period, the sources are not read again
    values["w0001"] = 104.0
    assert gate.state(need=101.0).limit == 99.5 and len(reads) == 1
    # WHEN the refresh period passed
    clock.now = 1.0
    # THEN the new caught-up times count
    assert gate.state(need=101.0).limit == 103.0 - 0.5 and len(reads) == 2


def test_the_gate_does_not_read_the_sources_for_a_record_it_already_passes() -> None:
    # GIVEN a gate whose limit is 99.5 s
    reads: list[int] = []
    clock = Clock()
    gate = HandoverGate(lambda: reads.append(1) or {"w0001": 100.0}, margin_s=0.5, refresh_s=0.0, timeout_s=60.0,
                        clock=clock)
    gate.state(need=101.0)
    # WHEN records below the limit ask
    for _ in range(3):
        gate.state(need=90.0)
    # THEN nothing is read again
    assert len(reads) == 1


def test_a_source_that_has_not_published_holds_everything_until_every_source_drained() -> None:
    # GIVEN one old slot caught up, one that never published (0)
    values = {"w0001": 100.0, "w0002": 0.0}
    clock = Clock()
    gate = HandoverGate(lambda: dict(values), margin_s=0.5, refresh_s=0.0, timeout_s=60.0, clock=clock)
    # WHEN a record asks
    state = gate.state(need=50.0)
    # THEN nothing passes
    assert state.limit < 0 and not state.open
    # WHEN both drained
    values.update(w0001=OPEN, w0002=OPEN)
    # THEN the gate opens for good
    assert gate.state(need=50.0).open and gate.is_open and not gate.timed_out


def test_the_gate_opens_after_its_timeout_and_says_so() -> None:
    # GIVEN a source that never catches up
    clock = Clock()
    gate = HandoverGate(lambda: {"w0001": 0.0}, margin_s=0.5, refresh_s=0.0, timeout_s=30.0, clock=clock)
    assert not gate.state(need=1.0).open
    # WHEN the timeout passes
    clock.now = 30.5
    # THEN the gate opens and reports that it timed out
    state = gate.state(need=1.0)
    assert state.open and state.timed_out and gate.timed_out


def test_an_opened_gate_passes_everything() -> None:
    # GIVEN / WHEN a gate made open (no swap into this version)
    gate = HandoverGate.opened()
    # THEN it passes any record
    assert gate.is_open and gate.state(need=1e12).limit == OPEN


# ---------------------------------------------------------------------------- GatedReader on a real stream
def _consumer(clients: Clients, stream: str) -> ShardConsumer:
    clients.kinesis.create_stream(StreamName=stream, ShardCount=1)
    clients.kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    return ShardConsumer(clients.kinesis, stream, shards_for_hash_key(clients.kinesis, stream, "0"), {})


def _put(clients: Clients, stream: str, n: int, start: int) -> None:
    for i in range(start, start + n):
        clients.kinesis.put_record(StreamName=stream, Data=json.dumps({"i": i}).encode(), PartitionKey=f"k{i}")


def test_the_gated_reader_releases_the_prefix_that_arrived_before_the_limit_and_holds_the_rest(
        clients: Clients, resources: Resources) -> None:
    # GIVEN a shard with 3 records, then (after a pause) 3 more, and a gate caught up to the pause
    stream = f"{resources.prefix}-gated"
    consumer = _consumer(clients, stream)
    _put(clients, stream, 3, 0)
    time.sleep(0.3)
    mid = time.time()
    time.sleep(0.3)
    _put(clients, stream, 3, 3)
    caught_up = {"w0001": mid}
    reader = GatedReader(consumer, HandoverGate(lambda: dict(caught_up), margin_s=0.1, refresh_s=0.0,
                                                timeout_s=60.0))
    # WHEN it polls
    first = reader.poll()
    # THEN only the records that arrived before the limit come out, and the rest is held (not at the tip)
    assert [json.loads(r.data)["i"] for r in first.records] == [0, 1, 2]
    assert reader.holding == 3 and first.millis_behind_latest >= 1 and not first.at_end
    # WHEN it polls again with the source unchanged, nothing more passes and the stream is not read past the held
    again = reader.poll()
    assert again.records == () and reader.holding == 3
    # WHEN the old slot drained
    caught_up["w0001"] = OPEN
    rest = reader.poll()
    # THEN the held records come out in order, and the next call reads the stream again (at its tip, empty)
    assert [json.loads(r.data)["i"] for r in rest.records] == [3, 4, 5] and reader.holding == 0
    tail = reader.poll()
    assert tail.records == () and tail.millis_behind_latest == 0 and reader.released == 6


# ---------------------------------------------------------------------------- a carried slot, end to end
def _event(spec_stream: str, clients: Clients, hash_key: str, i: int, version: int) -> str:
    ev = {"event_id": f"e{version}-{i:04d}", "entity_id": f"car-{i % 2}", "ts": 1_763_700_000_000 + i,
          "lat": PARIS[0], "lon": PARIS[1]}
    clients.kinesis.put_record(StreamName=spec_stream, Data=json.dumps(ev).encode(), PartitionKey=ev["entity_id"],
                               ExplicitHashKey=hash_key)
    return str(ev["event_id"])


def _rows(clients: Clients, res: Resources) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for obj in clients.s3.list_objects_v2(Bucket=res.output_bucket, Prefix="enriched/").get("Contents", []):
        body = clients.s3.get_object(Bucket=res.output_bucket, Key=obj["Key"])["Body"].read().decode()
        rows += [json.loads(line) for line in body.splitlines() if line]
    return rows


def test_a_kept_cell_resumes_on_the_new_stream_before_its_old_slot_drained(clients: Clients,
                                                                           resources: Resources) -> None:
    # GIVEN v1 active with one slot (France and the rest) served by a carry-mode worker with a long quiet period,
    # and a started plan keeping the slot in v2
    v1 = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    v2 = make_spec(2, [[""]], stream_name=f"{resources.prefix}-geo-v2", previous=1)
    for s in (v1, v2):
        publish_spec(clients, resources, s)
    set_active(clients, resources, 1)
    cfg = resources.config(1, swap_mode="carry", worker_id="w0001", drain_quiet_s=6.0, handover_margin_s=0.2)
    a = GeoWorker(cfg, clients, calibration=FAST_CAL)
    a.wait_ready(timeout=60)
    key = v1.worker("w0001").hash_key
    sent = [_event(str(v1.stream_name), clients, key, i, 1) for i in range(4)]
    a.run_until(lambda s: s.events_out == 4, timeout=30)
    set_plan(clients, resources, 1, 2, ["w0001"])
    a.run_until(lambda s: s.next_version == 2, timeout=30)
    reader = LeaseManager(clients.dynamodb, resources.leases_table, 2, "reader", 3.0)
    deadline = time.monotonic() + 30
    while not ((st := reader.read("w0001")) and st.ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    # WHEN the pointer flips, a stale router puts two more v1 records, then the new stream gets the entity's next ones
    set_active(clients, resources, 2)
    sent += [_event(str(v1.stream_name), clients, key, i, 1) for i in range(4, 6)]
    flipped = time.monotonic()
    sent += [_event(str(v2.stream_name), clients, key, i, 2) for i in range(6, 10)]
    # THEN the same process processes the v2 records while its v1 slot is still draining (no wait for the drain)
    a.run_until(lambda s: s.events_out == 10, timeout=30)
    resumed_s = time.monotonic() - flipped
    old = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 3.0).read("w0001")
    assert old is not None and not old.drained and resumed_s < cfg.drain_quiet_s
    # AND every event came out once, every v1 record processed before any v2 record
    rows = _rows(clients, resources)
    assert sorted(r["event_id"] for r in rows) == sorted(sent)
    assert max(r["processed_at"] for r in rows if r["spec_version"] == 1) < \
        min(r["processed_at"] for r in rows if r["spec_version"] == 2)
    assert {r["owner"] for r in rows} == {a.owner}
    # AND once the quiet period passed, the old slot drained and the worker serves the carried slot alone
    st2 = a.run_until(lambda s: s.version == 2 and s.carried == 1, timeout=30)
    assert st2.state == "ready"
    a.stop()


# ---------------------------------------------------------------------------- a slot of two shards
def test_a_two_shard_slot_is_caught_up_only_as_far_as_its_slowest_shard(clients: Clients,
                                                                         resources: Resources) -> None:
    # GIVEN a 2-shard stream (one worker owning both) with 3 records on the first shard, read by one SlotReader
    stream = f"{resources.prefix}-two"
    clients.kinesis.create_stream(StreamName=stream, ShardCount=2)
    clients.kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    keys = [shard_hash_key(0, 2), shard_hash_key(1, 2)]
    lineages = worker_shards(clients.kinesis, stream, keys)
    assert len(lineages) == 2 and lineages[0][0].shard_id != lineages[1][0].shard_id
    for i in range(3):
        clients.kinesis.put_record(StreamName=stream, Data=json.dumps({"i": i}).encode(), PartitionKey="k",
                                   ExplicitHashKey=keys[0])
    caught_up = CaughtUp(2)
    reader = SlotReader([GatedReader(ShardConsumer(clients.kinesis, stream, lin, {}), HandoverGate.opened())
                         for lin in lineages], caught_up)
    # WHEN it polls once and the batch's output is "written"
    before = time.time()
    first = reader.poll()
    caught_up.polled(reader.called_at, first, reader.last)
    # THEN the records of the first shard come out, and the slot is not caught up: its second shard was not read
    assert [json.loads(r.data)["i"] for r in first.records] == [0, 1, 2] and reader.last == 0
    assert caught_up.at == 0.0
    # WHEN it polls again: both shards are at their tip and empty
    second = reader.poll()
    caught_up.polled(reader.called_at, second, reader.last)
    # THEN the batch says "at the tip" for the slot and the caught-up time is past the first poll for both shards
    assert second.records == () and second.millis_behind_latest == 0 and not second.at_end
    assert caught_up.at >= before
    # WHEN a record reaches the second shard
    clients.kinesis.put_record(StreamName=stream, Data=b'{"i": 9}', PartitionKey="k", ExplicitHashKey=keys[1])
    third = reader.poll()
    # THEN it is read from that shard's reader
    assert [json.loads(r.data)["i"] for r in third.records] == [9] and third.shard_id == lineages[1][0].shard_id
    assert reader.released == 4


def test_caught_up_is_the_minimum_over_its_shards() -> None:
    c = CaughtUp(2)
    empty = Batch(shard_id="s", records=(), millis_behind_latest=0, at_end=False)
    c.polled(10.0, empty, 0)
    assert c.at == 0.0
    c.polled(7.0, empty, 1)
    assert c.at == 7.0 and c.parts == 2
