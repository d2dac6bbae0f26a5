"""Tests for ``python -m partitioner simulate``: a tiny run end to end, and every bad input (exit 2, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from spec_factory import qk

from partitioner.cli import main

ROOT = Path(__file__).resolve().parents[3]
KEYS = {"worker_windows", "swap_worker_windows", "cost_ratio", "over_cap_windows", "worst_utilisation",
        "p99_utilisation", "redeploys", "moved_median", "moved_max", "seconds_per_window"}


@pytest.fixture
def windows(tmp_path: Path) -> Path:
    """Five windows of twelve cells whose load grows then falls."""
    d = tmp_path / "windows"
    d.mkdir()
    cells = [qk(100 + i, 200 + j, 12) for i in range(4) for j in range(3)]
    for t, scale in enumerate((10, 12, 15, 14, 11)):
        rows = "".join(f"{q},{scale * (1 + k % 3)}\n" for k, q in enumerate(cells))
        (d / f"w{t:02d}.csv").write_text("quadkey,weight\n" + rows, encoding="utf-8")
    return d


def test_a_run_prints_the_table_and_writes_json_and_figure(windows: Path, tmp_path: Path, capsys) -> None:
    out_json, out_png = tmp_path / "sim.json", tmp_path / "sim.png"
    # WHEN simulated with three strategies
    code = main(["simulate", str(windows), "--max-load", "100", "--window-s", "300", "--strategies",
                 "floor,static,default", "--json", str(out_json), "--plot", str(out_png)])
    # THEN it succeeds, prints one line per strategy, and writes {"strategies": {NAME: {...}}} and a PNG
    assert code == 0
    text = capsys.readouterr().out
    assert "default: cost" in text and "floor: cost 1.00x (whole)" in text
    doc = json.loads(out_json.read_text())
    assert list(doc["strategies"]) == ["floor", "static", "default"]
    for s in doc["strategies"].values():
        assert set(s) >= KEYS
    assert doc["strategies"]["floor"]["cost_ratio"] == {"whole": 1.0, "carry": 1.0}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("args", "needle"), [
    (["nowhere"], "'nowhere' is neither a directory nor a built-in scenario"),
    (["{dir}", "--window-s", "300"], "--max-load is required when WINDOWS is a directory"),
    # the busiest window holds 15 x 24 = 360 events: a fifth of it is suggested
    (["{dir}", "--window-s", "300"], "; e.g. --max-load 72 (about five workers at the busiest window)"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--strategies", "floor,magic"], "unknown strategy 'magic'"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--policy", '{"fill": 1}'], "unknown policy key 'fill'"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--json", "{tmp}/no/such/dir/out.json"], "does not exist"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--plot", "{tmp}/fig.jpg"], "must end in .png"),
    (["global-dy"], "neither a directory nor a built-in scenario"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--swap-timings", "{tmp}/none.json"], "cannot read it"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--swap-timings", "{tmp}/nulls.json"],
     "swap_timings.drain_s is None"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--swap-timings", "{tmp}/nulls.json", "--swap-s", "5"],
     "not both"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--crowds", "{tmp}/none.json"],
     "--crowds '{tmp}/none.json': cannot read"),
    (["{dir}", "--max-load", "100", "--window-s", "300", "--crowds", "{tmp}/crowds.json"],
     "--crowds {tmp}/crowds.json: crowd 0: crowd 'crowd 0': start must be before end, got 60.0 >= 60.0"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(windows: Path, tmp_path: Path, capsys, args, needle) -> None:
    (tmp_path / "nulls.json").write_text(json.dumps({"swap_timings": {"process_start_s": 2.0, "warm_up_s": 0.5,
                                                                       "drain_s": None}}))
    (tmp_path / "crowds.json").write_text(json.dumps([{"lat": 1, "lon": 2, "start": 60, "end": 60, "load_per_s": 1}]))
    before = sorted(tmp_path.rglob("*"))
    argv = ["simulate", *(a.replace("{dir}", str(windows)).replace("{tmp}", str(tmp_path)) for a in args)]
    if "--json" not in args:
        argv += ["--json", str(tmp_path / "x.json")]  # would be written if the run went ahead
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle.replace("{tmp}", str(tmp_path)) in err[0]
    assert sorted(tmp_path.rglob("*")) == before


def test_a_bad_window_file_is_named_with_its_line(windows: Path, capsys) -> None:
    (windows / "w03.csv").write_text("quadkey,weight\n0123,5\n01x3,7\n", encoding="utf-8")
    assert main(["simulate", str(windows), "--max-load", "100", "--window-s", "300"]) == 2
    err = capsys.readouterr().err
    assert "w03.csv line 3" in err and "'01x3'" in err


def test_the_module_entry_point_rejects_a_negative_latency() -> None:
    proc = subprocess.run([sys.executable, "-m", "partitioner", "simulate", "global-day", "--latency-s", "-1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--latency-s" in proc.stderr and "'-1' must be a finite number >= 0" in proc.stderr


def test_swap_timings_from_a_local_report_set_the_overlap(windows: Path, tmp_path: Path, capsys) -> None:
    # GIVEN a local loop report.json whose measured medians are start 2.2 s, warm-up 0.7 s, drain 4.8 s
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"swap_timings": {"process_start_s": 2.2, "warm_up_s": 0.7, "carry_prepare_s": 0.9,
                                                   "drain_s": 4.8, "handover_s": 5.3, "samples": {}}}))
    # WHEN simulated with --swap-timings
    code = main(["simulate", str(windows), "--max-load", "100", "--window-s", "300", "--strategies", "floor,default",
                 "--swap-timings", str(report)])
    # THEN the overlap is their sum, and the header says where it came from
    text = capsys.readouterr().out
    assert code == 0
    assert "swap overlap 7.7 s (measured by the local loop" in text and "drain 4.8 s" in text


def _crowd_day(d: Path) -> None:
    """Twelve 5-minute windows from 2026-05-16T14:00Z named as ``counts`` names them: twelve cells of 10 events, and
    from 14:35 a crowd of 70 on one of them."""
    d.mkdir()
    cells = [qk(100 + i, 200 + j, 12) for i in range(4) for j in range(3)]
    for t in range(12):
        rows = "".join(f"{q},{10 + (70 if t >= 7 and k == 5 else 0)}\n" for k, q in enumerate(cells))
        (d / f"20260516T14{5 * t:02d}00Z.csv").write_text("quadkey,weight\n" + rows, encoding="utf-8")


def test_a_declared_crowd_keeps_its_worker_under_the_cap_where_the_unannounced_one_overloads_it(tmp_path: Path,
                                                                                               capsys) -> None:
    # GIVEN a day whose crowd lands at 14:35 with 10 minutes to live, and the crowd declared for 14:35-15:00
    _crowd_day(tmp_path / "day")
    lat, lon = _centre(qk(101, 202, 12))
    fixtures = tmp_path / "crowds.json"
    fixtures.write_text(json.dumps([{"name": "match", "lat": lat, "lon": lon, "start": "2026-05-16T14:35:00Z",
                                     "end": "2026-05-16T15:00:00Z", "load_per_s": 70 / 300}]))
    worst = {}
    for declared in (False, True):
        out = tmp_path / f"sim-{declared}.json"
        argv = ["simulate", str(tmp_path / "day"), "--max-load", "100", "--window-s", "300", "--latency-s", "600",
                "--strategies", "default", "--json", str(out), *(["--crowds", str(fixtures)] if declared else [])]
        # WHEN simulated without and with the declaration
        assert main(argv) == 0
        worst[declared] = json.loads(out.read_text())["strategies"]["default"]["worst_utilisation"]
    # THEN the windows' file names set the clock (the run says so), and only the declared run stays under the cap
    assert "(window 0 starts 2026-05-16T14:00:00Z, from the windows' file names)" in capsys.readouterr().out
    assert worst[False] > 1.1 and worst[True] <= 1.0


def _centre(quadkey: str) -> tuple[float, float]:
    from geokernel.geo.tiles import bounds, quadkey_to_tile

    b = bounds(quadkey_to_tile(quadkey))
    return (b.south + b.north) / 2, (b.west + b.east) / 2
