"""local.report.finish: the whole report of a hand-made run, its sections in order, its files and its exit code."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from local.aws import EmbeddedAws, Names
from local.config import EventsOptions, RunConfig
from local.observe import ControlObserver
from local.recorded import plan_replay, read_recorded
from local.replay import RecordedReplayer
from local.report.finish import finish
from local.report.product import Kept
from local.state import RunState
from partitioner.load.eventcols import EventColumns

T0 = 1_800_000_000.0
SECTIONS = ("UTILISATION AT THE WORKERS", "TIMELINE", "THE SNAPSHOT'S ESTIMATE", "PARTITION TABLES", "FLIPS",
            "QUARANTINED EVENTS", "EVENTS IN vs OUT", "SWAPS", "ORACLE (", "OUTPUT AS A DATA PRODUCT (", "INVARIANTS", "WHAT THIS RUN SHOWED",
            "SUMMARY", "RESULT: FAILED")


def loop(name: str, **fields: Any) -> Any:
    return SimpleNamespace(name=name, errors=[], fatal=None, **fields)


def quiet_run(out: Path) -> RunState:
    """A run that sent nothing and saw no flip: every invariant holds but the cap, which measured no worker-window."""
    # No request is made: the observer's clients are only created.
    observer = ControlObserver(EmbeddedAws("http://127.0.0.1:9", Names("georebal-test"), server=None))
    state = RunState(config=RunConfig(out=out), started_at=T0, workdir=out / "work", observer=observer,
                     finished_at=T0 + 90.0, drained_cleanly=True, events_log=["[   1.0s] started"])
    state.replayer = loop("replayer", sent_ids=[], sent_events=[], sent_seconds={}, bad_sent={"nan": 1},
                          started_at=T0 + 10, ended_at=T0 + 70, live_at=None, began_at=T0 + 5, backlog=0)
    state.output = SimpleNamespace(records=[], processed=[], problems=[], enriched=[])
    state.live["kept"] = [Kept("output", "georebal-test-output", 0, 0), Kept("snapshots", "georebal-test-snapshots", 0, 0)]
    state.notifier = loop("notifier", invocations=[])
    state.router = loop("router", records_in=0, invocations=0, failed_items=0, gave_up=0, environments=[])
    return state


def test_the_report_lays_out_every_section_in_order_and_fails_on_the_broken_invariant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a run that measured no worker-window WHEN the report is written
    code = finish(quiet_run(tmp_path))
    # THEN it exits 1, naming the one invariant that broke
    text = (tmp_path / "report.txt").read_text()
    assert code == 1 and text.rstrip("\n") == capsys.readouterr().out.rstrip("\n")
    failed = [line for line in text.splitlines() if line.startswith("  [FAIL]")]
    assert len(failed) == 1 and "no worker-window measured" in failed[0]
    # AND every section is there, in order
    at = [text.index(title) for title in SECTIONS]
    assert at == sorted(at)
    # AND the oracle's one-line summary and the data product's (no hour: nothing was sent) come right before the result
    assert text.splitlines()[-3].startswith("ORACLE OK: geo_service.pipeline.transform:ReverseGeocoder (stateless): 0 events")
    assert text.splitlines()[-2] == "OUTPUT AS A DATA PRODUCT: the oracle expects no event, no hour to query"
    # AND report.json holds the same verdict and every section as data
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["ok"] is False and [i["ok"] for i in doc["invariants"]].count(False) == 1
    assert {"config", "timeline", "specs", "flips", "utilisation", "delivery", "swaps", "swap_timings",
            "demonstrated", "oracle", "data_product"} <= doc.keys() and doc["oracle"]["ok"] is True
    assert doc["data_product"]["ok"] is True and doc["data_product"]["hours"] == []
    assert doc["timeline"] == ["[   1.0s] started"] and doc["bad_injected"] == {"nan": 1}


def test_a_section_that_cannot_be_written_fails_the_run_but_not_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the spec sections' library broken
    def broken(state: RunState) -> Any:
        raise RuntimeError("no plot for you")

    monkeypatch.setattr("local.report.specs.write", broken)
    # WHEN the report is written THEN the rest of it is, and the failure is an invariant naming the cause
    assert finish(quiet_run(tmp_path)) == 1
    text = (tmp_path / "report.txt").read_text()
    assert "SPEC SECTIONS FAILED" in text and "INVARIANTS" in text
    assert "[FAIL] the report was written completely: spec sections (tables, comparisons, maps, GeoJSON) failed: " \
           "RuntimeError: no plot for you" in text


def test_a_recorded_replay_reports_its_log_its_bad_rows_and_its_warm_up_copies(tmp_path: Path) -> None:
    # GIVEN a quiet run whose replay was a recorded log (one bad row) that sent its two good rows and three copies
    log_file = tmp_path / "day.csv"
    log_file.write_text("lat,lon,ts\n1,2,1700000000\n1,2,1700000060\n1,999,1700000000\n")
    log = read_recorded(log_file, EventColumns())
    plan = plan_replay(log, None, 30.0, 180.0, 10.0)
    state = quiet_run(tmp_path)
    state.config = RunConfig(out=tmp_path, events=EventsOptions(str(log_file)))
    r = RecordedReplayer(None, "ingest", log, plan)
    r.sent_ids = ["a#warmup1", "b#warmup1", "a#warmup2", "a", "b"]
    r.recorded_sent, r.warmup_sent, r.warmup_passes, r.started_at, r.ended_at = 2, 3, 2, T0 + 10, T0 + 40
    state.replayer = r
    # WHEN the report is written
    finish(state)
    text = (tmp_path / "report.txt").read_text()
    doc = json.loads((tmp_path / "report.json").read_text())
    # THEN it names the log, its bad rows (no injected ones) and events in as recorded + warm-up copies
    assert f"recorded log {str(log_file)!r}" in text.splitlines()[2]
    assert "QUARANTINED EVENTS (the recorded log's bad rows" in text and "bad rows: 1 {'lon_out_of_range': 1}" in text
    assert "recorded events sent 2 of 2 good rows (each once) + 3 warm-up copies of the log's first window (2 passes" in text
    assert "events in 5 (2 recorded + 3 warm-up copies), out 0 unique" in text
    assert doc["recorded"]["recorded_sent"] == 2 and doc["recorded"]["warmup_copies"] == 3
    assert doc["recorded"]["bad_by_reason"] == {"lon_out_of_range": 1}
    # AND it says which clock ts is on, and that the default transform measures no time of its own
    clocks = next(line for line in text.splitlines() if line.startswith("  clocks: "))
    assert clocks == f"  clocks: {doc['recorded']['clocks']}" and "an event's ts is its replay time" in clocks
    assert "ReverseGeocoder declares no time_setting" in clocks


def test_a_run_that_failed_before_the_loop_started_still_writes_its_report(tmp_path: Path) -> None:
    # GIVEN a run whose start failed: no observer, no replay, no output, the failure recorded
    state = RunState(config=RunConfig(out=tmp_path), started_at=T0, workdir=tmp_path / "work", finished_at=T0 + 4.0,
                     events_log=["[   1.0s] starting"])
    state.failure = "ImportError: cannot import name 'X' from 'moto'"
    # WHEN the report is written
    code = finish(state)
    # THEN it says the run failed (exit 1) and names the failure, instead of a traceback of its own
    doc = json.loads((tmp_path / "report.json").read_text())
    assert code == 1 and doc["ok"] is False
    assert "ImportError: cannot import name 'X' from 'moto'" in (tmp_path / "report.txt").read_text()
    assert doc["swaps"] == []
