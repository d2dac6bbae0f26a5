"""``python -m local.run --events FILE``: bad input exits 2 with one line; a small recorded log runs the whole loop."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local.config import parse_args
from local.recorded import BUILTIN_LOGS, builtin_path
from local.report.invariants import CAP_CHECK
from local.run import load_recorded, main

REPO = Path(__file__).resolve().parents[2]


def small_log(tmp_path: Path, rows: int) -> tuple[Path, int]:
    """The first ``rows`` rows of the built-in AIS log with two bad rows put in; returns the file and its bad rows."""
    lines = builtin_path(BUILTIN_LOGS["nyharbor"]).read_text().splitlines()[:rows + 1]
    lines[5] = lines[5].replace(",40.", ",400.", 1)  # latitude out of range
    lines.insert(9, "not,a,row")  # too few fields
    path = tmp_path / "harbor.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, 2


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--events", "missing.csv"], "'missing.csv' does not exist"),
    (["--events", "log.csv", "--time", "when"], "no column 'when' (--time)"),
    (["--events", "log.xml"], "unknown format"),
    (["--events", "builtin:nope"], "no such built-in log"),
    (["--events", "log.csv", "--lat", "y", "--dataset", "world"], "--dataset 'world' does not apply"),
])
def test_unusable_events_exit_2_with_one_line_and_write_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], fragment: str) -> None:
    # GIVEN a readable log without a 'when' column, in the working directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.csv").write_text("lat,lon,ts\n1,2,1700000000\n")
    (tmp_path / "log.xml").write_text("lat,lon,ts\n")
    # WHEN the run is asked for with an unusable --events
    code = main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    # THEN it exits 2 with one line naming the problem, and writes nothing
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "out").exists()


def test_load_recorded_uses_the_builtin_columns_and_sets_the_pace() -> None:
    # GIVEN --quick --events builtin:nyharbor
    cfg, (log, plan) = load_recorded(parse_args(["--quick", "--events", "builtin:nyharbor"]))
    # THEN the log's own columns were used and the whole hour plays in the quick run's 80 s
    assert len(log) == 8689 and plan.send == 8689 and cfg.duration_s == plan.duration_s == 80.0
    assert cfg.speed == pytest.approx(3599.0 / 80.0) and cfg.rate == pytest.approx(8689 / 80.0)
    # AND the cap follows the log's mean rate: a third of a window's events
    assert cfg.cap == pytest.approx(-(-8689 / 80.0 * cfg.window_s // 3))


def test_load_recorded_flags_override_the_builtin_columns() -> None:
    # GIVEN the built-in log with --entity naming another column WHEN loaded THEN that column is the entity
    _, (log, _) = load_recorded(parse_args(["--events", "builtin:nyharbor", "--entity", "VesselType"]))
    assert len(set(log.entity_id)) < 40


@pytest.mark.slow
@pytest.mark.spark
def test_a_small_recorded_log_runs_the_whole_loop(tmp_path: Path) -> None:
    # GIVEN 900 rows (about 6 recorded minutes) of real AIS positions with two bad rows
    path, bad = small_log(tmp_path, 900)
    out = tmp_path / "out"
    # WHEN the loop replays it in 20 s with 5 s windows through the stateful reference transform (its state must
    # follow every ship across borders and swaps: the oracle compares each record with one process)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "local.run", "--quick", "--events", str(path), "--lat", "LAT",
                           "--lon", "LON", "--time", "BaseDateTime", "--entity", "MMSI", "--duration", "20",
                           "--window", "5", "--transform", "transforms.geofence_state:GeofenceState",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=400)
    wall = time.monotonic() - started
    report = json.loads((out / "report.json").read_text())
    # THEN every invariant holds but the utilisation one: 20 s of 5 s windows with swaps measure few full
    # worker-windows, none on a loaded machine (the run says so and fails it; the quick run checks utilisation)
    failed = [c for c in report["invariants"] if not c["ok"] and not c["name"].startswith(CAP_CHECK)]
    assert proc.returncode in (0, 1) and not failed, \
        f"exit {proc.returncode}; failed: {failed}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    rec, d = report["recorded"], report["delivery"]
    # AND every good row was sent once, besides the warm-up's copies, and every event came out
    assert rec["recorded_sent"] == rec["good_rows"] == 900 - 1 and rec["bad_rows"] == bad
    assert d["sent"] == rec["recorded_sent"] + rec["warmup_copies"] and d["lost"] == 0 and d["unexpected"] == 0
    # AND the bad rows are in the quarantine, written by the replay and naming file and line
    assert report["quarantine"]["by_writer"] == {"replay": bad}
    text = (out / "report.txt").read_text()
    assert f"recorded events sent {rec['recorded_sent']} of 899 good rows" in text
    assert f"events in {d['sent']} ({rec['recorded_sent']} recorded + {rec['warmup_copies']} warm-up copies)" in text
    assert report["oracle"]["stateful"] and report["oracle"]["differing"] == 0
    print(f"recorded-log run: {wall:.0f}s wall")
