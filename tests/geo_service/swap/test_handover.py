"""The per-record handover across a swap (``geo_service.swap.handover``): the gate, the gated reader, and a carried
slot that resumes before its old slot drained (real worker code in threads, moto server)."""

from __future__ import annotations

import json
import time

import pytest
from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active, set_plan, stream_manifest

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.consumer import KinesisRecord, ShardConsumer, shards_for_hash_key, worker_shards
from geo_service.pipeline.cost import Calibration
from geo_service.swap.handover import OPEN, CaughtUp, GatedReader, GateReading, HandoverGate, Place, SlotReader
from geo_service.worker import GeoWorker
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.model import shard_hash_key

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
def test_caught_up_only_moves_forward() -> None:
    # GIVEN a caught-up time of 10 s
    c = CaughtUp()
    c.advance(10.0)
    # WHEN an earlier time is reported, then a later one
    c.advance(5.0)
    after_earlier = c.at
    c.advance(12.5)
    # THEN it never moves back
    assert (after_earlier, c.at) == (10.0, 12.5)


# ---------------------------------------------------------------------------- HandoverGate
def test_the_gate_passes_what_arrived_a_margin_before_the_slowest_source() -> None:
    # GIVEN two old slots caught up to 100 s and 103 s, a 0.5 s margin
    reads: list[int] = []
    values = {"w0001": 100.0, "w0002": 103.0}

    def sources() -> GateReading:
        reads.append(1)
        return GateReading.of(values)

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
    gate = HandoverGate(lambda: reads.append(1) or GateReading(100.0), margin_s=0.5, refresh_s=0.0, timeout_s=60.0,
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
    gate = HandoverGate(lambda: GateReading.of(values), margin_s=0.5, refresh_s=0.0, timeout_s=60.0, clock=clock)
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
    gate = HandoverGate(lambda: GateReading(0.0), margin_s=0.5, refresh_s=0.0, timeout_s=30.0, clock=clock)
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
    return ShardConsumer(clients.kinesis, stream, shards_for_hash_key(stream_manifest(clients, stream), "0"), {},
                         min_interval_s=0.0)


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
    reader = GatedReader(consumer, HandoverGate(lambda: GateReading.of(caught_up), margin_s=0.1, refresh_s=0.0,
                                                timeout_s=60.0))
    # WHEN it polls
    first = reader.poll()
    # THEN only the records that arrived before the limit come out, and the rest is held (not at the tip)
    assert [json.loads(r.data)["i"] for r in first.records] == [0, 1, 2]
    assert reader.holding == 3 and first.millis_behind_latest >= 1 and not first.at_end
    assert first.checkpoint_at == first.records[-1].sequence_number
    # AND once processed, the slot is caught up to just before the first held record, not to the tip
    reader.processed()
    held_caught_up = reader.caught_up.at
    assert held_caught_up >= first.records[-1].arrival_s
    # WHEN it polls again with the source unchanged, nothing more passes and the stream is not read past the held
    again = reader.poll()
    assert again.records == () and reader.holding == 3
    # WHEN the old slot drained
    caught_up["w0001"] = OPEN
    rest = reader.poll()
    # THEN the held records come out in order, and the next call reads the stream again (at its tip, empty)
    assert [json.loads(r.data)["i"] for r in rest.records] == [3, 4, 5] and reader.holding == 0
    assert held_caught_up < rest.records[0].arrival_s
    reader.processed()
    tail = reader.poll()
    assert tail.records == () and tail.millis_behind_latest == 0 and reader.released == 6
    # AND a call that reached the tip catches the slot up to when that call started
    reader.processed()
    assert reader.caught_up.at == reader.called_at


def test_a_moved_cell_waits_for_its_old_slot_to_drain_and_its_entity_waits_behind_it(
        clients: Clients, resources: Resources) -> None:
    # GIVEN slot w0002's shard with four records all older than the gate's limit: car-a in a cell that w0001
    # owned in the old version, then car-b in a cell w0002 keeps, then car-a again, then car-c (kept)
    stream = f"{resources.prefix}-moved"
    consumer = _consumer(clients, stream)
    _put(clients, stream, 4, 0)
    time.sleep(0.3)
    places = {0: Place("car-a", "w0001"), 1: Place("car-b", "w0002"), 2: Place("car-a", "w0002"),
              3: Place("car-c", "w0002"), 4: Place("car-d", "w0002"), 5: Place("car-a", "w0002")}
    caught_up = {"w0001": time.time(), "w0002": time.time()}
    gate = HandoverGate(lambda: GateReading.of(caught_up), margin_s=0.1, refresh_s=0.0, timeout_s=60.0)
    reader = GatedReader(consumer, gate, own="w0002",
                         classify=lambda records: [places[json.loads(r.data)["i"]] for r in records])
    # WHEN it polls while w0001 is not drained
    first = reader.poll()
    reader.processed()
    # THEN the kept cells of other entities pass; the moved record and the same entity's later one wait
    assert [json.loads(r.data)["i"] for r in first.records] == [1, 3] and reader.holding == 2
    # AND the checkpoint does not move past the held record, the slot is caught up to just before it
    assert first.checkpoint_at is None and reader.caught_up.at < first.records[0].arrival_s
    # WHEN more records arrive behind the held ones (car-d in a kept cell, car-a again) and the old slots catch up
    _put(clients, stream, 2, 4)
    time.sleep(0.3)
    caught_up["w0002"] = caught_up["w0001"] = time.time()
    behind = reader.poll()
    # THEN the reader reads on past what it holds: car-d's kept cell does not wait for w0001's drain; car-a still waits
    assert [json.loads(r.data)["i"] for r in behind.records] == [4] and reader.holding == 3
    assert behind.checkpoint_at is None
    # WHEN w0001 drained
    caught_up["w0001"] = OPEN
    rest = reader.poll()
    # THEN car-a's records come out in their order and the checkpoint reaches the last record
    assert [json.loads(r.data)["i"] for r in rest.records] == [0, 2, 5]
    assert rest.checkpoint_at == rest.records[-1].sequence_number


# ---------------------------------------------------------------------------- a carried slot, end to end
def _event(spec_stream: str, clients: Clients, hash_key: str, i: int, version: int) -> str:
    ev = {"event_id": f"e{version}-{i:04d}", "entity_id": f"car-{i % 2}", "ts": 1_763_700_000_000 + i,
          "lat": PARIS[0], "lon": PARIS[1]}
    clients.kinesis.put_record(StreamName=spec_stream, Data=json.dumps(ev).encode(), PartitionKey=ev["entity_id"],
                               ExplicitHashKey=hash_key)
    return str(ev["event_id"])


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
    set_plan(clients, resources, 1, 2)
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
    rows = enriched_rows(clients, resources)
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
    lineages = worker_shards(stream_manifest(clients, stream), keys)
    assert len(lineages) == 2 and lineages[0][0].shard_id != lineages[1][0].shard_id
    for i in range(3):
        clients.kinesis.put_record(StreamName=stream, Data=json.dumps({"i": i}).encode(), PartitionKey="k",
                                   ExplicitHashKey=keys[0])
    reader = SlotReader([GatedReader(ShardConsumer(clients.kinesis, stream, lin, {}, min_interval_s=0.0),
                                     HandoverGate.opened()) for lin in lineages])
    # WHEN it polls once and the batch's output is "written"
    before = time.time()
    first = reader.poll()
    reader.processed()
    # THEN the records of the first shard come out, and the slot is not caught up: its second shard was not read
    assert [json.loads(r.data)["i"] for r in first.records] == [0, 1, 2] and reader.last == 0
    assert reader.caught_up_at == 0.0
    # WHEN it polls again: both shards are at their tip and empty
    second = reader.poll()
    reader.processed()
    # THEN the batch says "at the tip" for the slot and the caught-up time is past the first poll for both shards
    assert second.records == () and second.millis_behind_latest == 0 and not second.at_end
    assert reader.caught_up_at >= before
    # WHEN a record reaches the second shard
    clients.kinesis.put_record(StreamName=stream, Data=b'{"i": 9}', PartitionKey="k", ExplicitHashKey=keys[1])
    third = reader.poll()
    # THEN it is read from that shard's reader
    assert [json.loads(r.data)["i"] for r in third.records] == [9] and third.shard_id == lineages[1][0].shard_id
    assert reader.released == 4


def test_a_slot_reader_needs_a_shard_reader() -> None:
    # GIVEN / WHEN / THEN a slot reader without readers is refused, naming the problem
    with pytest.raises(ValueError, match="at least one shard reader"):
        SlotReader([])
