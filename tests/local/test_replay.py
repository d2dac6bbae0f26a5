"""local.replay.RecordedReplayer: a recorded log on its recorded clock, warm-up passes first, exactly once after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.events import ValidEvent, parse_event
from local.loops import FatalLoopError
from local.recorded import plan_replay, read_recorded
from local.replay import RecordedReplayer, put_all
from partitioner.load.eventcols import EventColumns

T0 = 1_700_000_000  # epoch seconds of the first recorded event
START = 1_000_000.0  # wall clock of the replay's first tick (a multiple of the 10 s window)


class FakeKinesis:
    """Records PutRecords; rejects the first record of the first ``reject`` calls."""

    def __init__(self, reject: int = 0) -> None:
        self.records: list[dict[str, Any]] = []
        self.reject = reject

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        if self.reject:
            self.reject -= 1
            self.records.extend(Records[1:])
            return {"FailedRecordCount": 1, "Records": [{"ErrorCode": "x"}] + [{}] * (len(Records) - 1)}
        self.records.extend(Records)
        return {"FailedRecordCount": 0, "Records": [{} for _ in Records]}

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(r["Data"]) for r in self.records]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def replayer(tmp_path: Path, offsets: list[int], speed: float | None = 10.0, cap: float | None = None,
             live: list[bool] | None = None) -> tuple[RecordedReplayer, FakeKinesis, Clock]:
    path = tmp_path / "log.csv"
    path.write_text("lat,lon,ts,entity_id\n" + "".join(f"1,2,{T0 + s},e{i % 3}\n" for i, s in enumerate(offsets)))
    log = read_recorded(path, EventColumns())
    plan = plan_replay(log, speed, cap, 180.0, 10.0)
    kinesis, clock = FakeKinesis(), Clock(START)
    state = live if live is not None else [True]
    r = RecordedReplayer(kinesis, "ingest", log, plan, live=lambda: state[0], align_s=10.0, clock=clock)
    return r, kinesis, clock


def run(r: RecordedReplayer, clock: Clock, until: float, tick: float = 0.5) -> None:
    while clock.now <= until and not r.done:
        r.step()
        clock.now += tick


def test_live_replay_sends_every_event_once_in_order_on_the_replay_clock(tmp_path: Path) -> None:
    # GIVEN a log of events recorded at 0..200 s replayed at 10x, the system already live
    r, kinesis, clock = replayer(tmp_path, [0, 20, 5, 100, 200, 200])
    # WHEN the replay runs to its end
    run(r, clock, START + 30)
    events = kinesis.events()
    # THEN every recorded event went out once, in recorded order, each stamped when it was due (offset / speed)
    assert r.done and r.recorded_sent == 6 and r.warmup_sent == 0 and r.duration_s == 20.0
    assert [e["event_id"] for e in events] == ["log.csv:2", "log.csv:4", "log.csv:3", "log.csv:5", "log.csv:6",
                                               "log.csv:7"]
    assert [e["ts"] for e in events] == [int((START + s / 10) * 1000) for s in (0, 5, 20, 100, 200, 200)]
    assert r.sent_ids == [e["event_id"] for e in events] and r.ended_at == START + 20
    # AND each is a valid ingest event keyed by its entity
    assert all(isinstance(parse_event(rec["Data"]), ValidEvent) for rec in kinesis.records)
    assert [rec["PartitionKey"] for rec in kinesis.records] == [e["entity_id"] for e in events]


def test_events_are_sent_when_due_not_before(tmp_path: Path) -> None:
    # GIVEN a live replay at 10x of events recorded at 0, 50 and 100 s
    r, kinesis, clock = replayer(tmp_path, [0, 50, 100])
    # WHEN 4.5 wall seconds have passed THEN only the event due at 0 s was sent
    run(r, clock, START + 4.5)
    assert [e["event_id"] for e in kinesis.events()] == ["log.csv:2"]
    clock.now = START + 4.5
    assert r.fraction == pytest.approx(0.45)
    # AND at 5 s the second one follows
    run(r, clock, START + 5.0)
    assert len(kinesis.events()) == 2 and not r.done


def test_duration_cap_stops_the_replay_and_leaves_later_events_unsent(tmp_path: Path) -> None:
    # GIVEN a 10x replay of a 400 s log capped at 15 s
    r, kinesis, clock = replayer(tmp_path, [0, 100, 150, 151, 400], cap=15.0)
    # WHEN it runs THEN it stops at 15 s having sent the events recorded in the first 150 s
    run(r, clock, START + 60)
    assert r.done and r.ended_at == START + 15 and r.recorded_sent == 3
    assert [e["event_id"] for e in kinesis.events()] == ["log.csv:2", "log.csv:3", "log.csv:4"]
    assert r.summary()["not_sent_after_duration_cap"] == 2


def test_warm_up_repeats_the_first_window_until_live_then_plays_the_log_once(tmp_path: Path) -> None:
    # GIVEN a 10x replay (a 10 s window holds 100 recorded seconds) of events at 0, 30, 99 and 150 s, not yet live
    live = [False]
    r, kinesis, clock = replayer(tmp_path, [0, 30, 99, 150], live=live)
    clock.now = START - 3  # not on a window boundary: the warm-up waits for one
    # WHEN it warms up for 25 s, then the system goes live
    run(r, clock, START + 24.5)
    assert r.warming_up and r.began_at == START
    live[0] = True
    run(r, clock, START + 60)
    ids = [e["event_id"] for e in kinesis.events()]
    # THEN the warm-up sent passes of the first window's three events (ids #warmup<k>), each pass one window long
    first = ["log.csv:2", "log.csv:3", "log.csv:4"]
    assert ids[:8] == [f"{i}#warmup{k}" for k in (1, 2) for i in first] + [f"{i}#warmup3" for i in first[:2]]
    assert kinesis.events()[3]["ts"] == int((START + 10) * 1000)
    # AND each pass's copies are entities of their own (no state carries from a copy), the same positions
    entities = [e["entity_id"] for e in kinesis.events()]
    assert entities[:8] == [f"e{i}#warmup{k}" for k in (1, 2) for i in range(3)] + ["e0#warmup3", "e1#warmup3"]
    assert [rec["PartitionKey"] for rec in kinesis.records] == entities
    assert {(e["lat"], e["lon"]) for e in kinesis.events()[:8]} == {(1.0, 2.0)}
    # AND then every recorded event once, with its own id and entity, on the replay clock started when live
    assert ids[8:] == [*first, "log.csv:5"] and entities[8:] == ["e0", "e1", "e2", "e0"] and r.started_at == START + 25
    assert r.recorded_sent == 4 and r.warmup_sent == 8 and r.warmup_passes == 3
    assert len(set(r.sent_ids)) == len(r.sent_ids) == 12


def test_warm_up_times_out(tmp_path: Path) -> None:
    # GIVEN a replay that never becomes live WHEN the warm-up outlasts its timeout THEN the loop fails
    r, _, clock = replayer(tmp_path, [0, 10], live=[False])
    r.warmup_timeout_s = 5.0
    with pytest.raises(FatalLoopError, match="no spec became active within 5s"):
        run(r, clock, START + 10)


def test_the_clock_waits_for_the_warm_up_backlog_to_come_out(tmp_path: Path) -> None:
    # GIVEN a replay that warmed up 25 s (8 warm-up copies sent), then went live while none of them had come out
    live = [False]
    r, _, clock = replayer(tmp_path, [0, 30, 99, 150], live=live)
    out: set[str] = set()
    r.out_ids, r.backlog_timeout_s = lambda: out, 30.0
    run(r, clock, START + 24.5)
    live[0] = True
    # WHEN 10 s pass with all but one copy out
    run(r, clock, START + 30)
    out.update(r.sent_ids[:7])
    run(r, clock, START + 35)
    # THEN the clock has not started; the warm-up goes on (a fourth pass) and the backlog is the 8 copies
    assert r.warming_up and r.live_at == START + 25 and r.backlog == 8 and r.warmup_passes == 4
    # WHEN the last copy comes out THEN the clock starts at the next tick, saying the backlog was out
    out.add(r.sent_ids[7])
    run(r, clock, START + 36)
    assert r.started_at == START + 35.5 and r.backlog_out and r.recorded_sent == 1


def test_the_clock_starts_anyway_when_the_backlog_does_not_come_out(tmp_path: Path) -> None:
    # GIVEN a live replay whose warm-up backlog never comes out, waiting at most 30 s for it
    live = [False]
    r, _, clock = replayer(tmp_path, [0, 30, 99, 150], live=live)
    r.out_ids, r.backlog_timeout_s = lambda: set(), 30.0
    run(r, clock, START + 24.5)
    live[0] = True
    # WHEN 40 s pass THEN the clock started 30 s after the first spec was active, saying the backlog was not out
    run(r, clock, START + 65)
    assert r.started_at == START + 55 and not r.backlog_out


def test_put_all_retries_rejected_records() -> None:
    # GIVEN a stream that rejects one record once
    kinesis = FakeKinesis(reject=1)
    # WHEN three records are put THEN all arrive after one retry
    assert put_all(kinesis, "s", [(b"1", "a"), (b"2", "b"), (b"3", "c")]) == 1
    assert sorted(r["Data"] for r in kinesis.records) == [b"1", b"2", b"3"]


def test_a_recorded_replay_sends_under_the_mapped_field_names(tmp_path: Path) -> None:
    # GIVEN a live replay whose loop reads a renamed schema (--event-fields)
    r, kinesis, clock = replayer(tmp_path, [0, 20])
    r.fields = EventFields.from_pairs("lat=latitude,lon=longitude,ts=time,event_id=id,entity_id=vehicle", "test")
    # WHEN it runs to its end
    run(r, clock, START + 10)
    events = kinesis.events()
    # THEN every event carries the mapped keys (and none of the canonical ones), parses under the mapping
    assert [sorted(e) for e in events] == [["id", "latitude", "longitude", "recorded_utc", "time", "vehicle"]] * 2
    assert all(isinstance(parse_event(rec["Data"], r.fields), ValidEvent) for rec in kinesis.records)
    # AND the partition keys and the ids counted as sent are the events' own
    assert [rec["PartitionKey"] for rec in kinesis.records] == [e["vehicle"] for e in events]
    assert r.sent_ids == [e["id"] for e in events] == ["log.csv:2", "log.csv:3"]
