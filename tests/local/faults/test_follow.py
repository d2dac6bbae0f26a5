"""local.faults.follow: the armed faults polled and announced while the loop runs, and their table at the end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from local.config import RunConfig
from local.faults.follow import fault_pending, fault_table, poll_faults, snapshot_fault_open
from local.faults.record import FaultRecord
from local.state import RunState


class Fault:
    """An injector that fires on its second poll and breaks a promise on its third."""

    def __init__(self, name: str, deadline_s: float) -> None:
        self.record = FaultRecord(name, deadline_s=deadline_s)
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1
        if self.polls == 2:
            self.record.injected_at, self.record.target, self.record.leases = 1000.0, "pid 7", ("v1#w0001",)
        if self.polls == 3:
            self.record.problems.append("a duplicate published v3")


def test_polling_announces_each_injection_and_each_broken_promise_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN one armed fault WHEN polled four times
    state = RunState(config=RunConfig(out=tmp_path), started_at=990.0, workdir=tmp_path)
    state.faults = [Fault("worker-kill", deadline_s=20.0)]
    for _ in range(4):
        poll_faults(state)
    # THEN the timeline says when it fired and what it broke, once each
    said = [line.split("] ", 1)[1] for line in state.events_log]
    assert said == ["FAULT worker-kill: pid 7 killed (no swap in flight), holding v1#w0001",
                    "FAULT worker-kill: BROKEN: a duplicate published v3"]
    assert capsys.readouterr().out.count("FAULT") == 2


def test_the_table_fails_the_run_for_a_fault_that_did_not_recover_in_time(tmp_path: Path) -> None:
    # GIVEN a fault recovered in time and one still open past its deadline
    state = RunState(config=RunConfig(out=tmp_path), started_at=990.0, workdir=tmp_path)
    state.output = SimpleNamespace(records=[])
    done = FaultRecord("spark-kill", injected_at=1000.0, detected_at=1001.0, recovered_at=1030.0, deadline_s=60.0)
    late = FaultRecord("stream-throttle", injected_at=1000.0, deadline_s=5.0)
    state.faults = [SimpleNamespace(record=done), SimpleNamespace(record=late)]
    # THEN the tail no longer waits for it
    assert not fault_pending(state)
    # WHEN the table is written THEN faults.json has both rows and the run fails naming the late one
    fault_table(state)
    rows = json.loads((tmp_path / "faults.json").read_text())
    assert [(r["fault"], r["within_deadline"]) for r in rows] == [("spark-kill", True), ("stream-throttle", False)]
    assert state.failure == ("fault(s) not injected or not recovered within their deadline: stream-throttle "
                             "(see faults.json)")
    assert any("fault table" in line for line in state.events_log)


def test_only_an_open_snapshot_fault_keeps_the_snapshot_notifications_on(tmp_path: Path) -> None:
    # GIVEN an open stream throttle and a snapshot fault injected just now
    state = RunState(config=RunConfig(out=tmp_path), started_at=990.0, workdir=tmp_path)
    now = time.time()
    throttle = FaultRecord("stream-throttle", injected_at=now, deadline_s=60.0)
    dup = FaultRecord("snapshot-dup", injected_at=now, detected_at=now, deadline_s=60.0)
    state.faults = [SimpleNamespace(record=throttle), SimpleNamespace(record=dup)]
    # THEN the snapshot fault keeps them on
    assert snapshot_fault_open(state)
    # WHEN it recovered THEN nothing does (the throttle does not need a judged window)
    dup.recovered_at = now + 1.0
    assert not snapshot_fault_open(state) and fault_pending(state)
    # AND one past its deadline does not either
    state.faults = [SimpleNamespace(record=FaultRecord("snapshot-corrupt", injected_at=now - 100.0, deadline_s=60.0))]
    assert not snapshot_fault_open(state)
