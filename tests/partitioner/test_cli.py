"""Tests for partitioner.cli (``python -m partitioner``): every command and its error messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from geokernel.partition_spec.parse import load_spec
from geokernel.partition_spec.rules import validate
from partitioner.cli import main
from partitioner.commands.demo import DEMO_MAX_LOAD, SAMPLE_COUNTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The bundled sample built once with the compact strategy."""
    out = tmp_path_factory.mktemp("cli") / "spec.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", str(DEMO_MAX_LOAD), "-o", str(out)]) == 0
    return out


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_build_writes_a_valid_spec_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "spec.json"
    # WHEN the sample is built
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(out), "--version", "7",
                 "--json", str(tmp_path / "m.json")]) == 0
    text = capsys.readouterr().out
    # THEN the spec is valid and the table and summary are printed
    spec = load_spec(out)
    assert validate(spec) == [] and spec.version == 7 and spec.max_load == 2500.0
    assert "Total partitions:" in text and "Cap (max load per worker): 2500" in text
    assert "Workers:" in text and "lower bound 12" in text and f"wrote {out}" in text
    assert json.loads((tmp_path / "m.json").read_text())["lower_bound"] == 12


def test_build_and_evaluate_report_regions_per_worker_and_the_specs_size(built, tmp_path, capsys):
    # GIVEN the sample built into a spec file
    size = built.stat().st_size
    # WHEN it is evaluated under the sample's load, with the metrics as JSON
    assert main(["evaluate", str(SAMPLE_COUNTS), str(built), "--json", str(tmp_path / "m.json")]) == 0
    text = capsys.readouterr().out
    m = json.loads((tmp_path / "m.json").read_text())
    # THEN the summary and the JSON give the regions per worker and the size of the spec's JSON as written
    per_worker: dict[str, int] = {}
    for p in load_spec(built).partitions:
        if not p.is_catch_all:
            per_worker[p.worker] = per_worker.get(p.worker, 0) + 1
    assert m["spec_bytes"] == size and f"spec {size / 1e6:.2f} MB of JSON" in text
    assert m["max_regions_per_worker"] == max(per_worker.values())
    assert f"per worker median {m['median_regions_per_worker']:g}, max {m['max_regions_per_worker']}" in text


def test_build_with_previous_reports_stability(built, tmp_path, capsys):
    out = tmp_path / "v2.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(out), "--previous", str(built)]) == 0
    text = capsys.readouterr().out
    assert load_spec(out).previous_version == 1
    assert "v1 -> v2:" in text and "keeps its partition and worker" in text


def test_build_packs_to_the_fill_and_refuses_one_outside_0_1(tmp_path, capsys):
    out = tmp_path / "filled.json"
    # WHEN the sample is built to fill 0.8 of max_load 2500
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "2500", "--fill", "0.8", "-o", str(out)]) == 0
    # THEN the spec states max_load 2500 and no worker holds more than 2000; a fill above 1 is refused naming it
    spec = load_spec(out)
    assert spec.max_load == 2500.0 and spec.source["fill"] == 0.8
    assert max(w.load for w in spec.workers) <= 2000.0 * (1 + 1e-9)
    with pytest.raises(SystemExit) as exc:
        main(["build", str(SAMPLE_COUNTS), "--max-load", "2500", "--fill", "1.5", "-o", str(out)])
    assert exc.value.code == 2 and "'1.5' must be a number in (0, 1]" in capsys.readouterr().err


def test_build_seed_strategy(tmp_path, capsys):
    out = tmp_path / "seed.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(out), "--strategy", "seed"]) == 0
    assert load_spec(out).strategy == "seed"
    assert "strategy seed" in capsys.readouterr().out


def test_evaluate_prints_table_and_metrics_json(built, tmp_path, capsys):
    assert main(["evaluate", str(SAMPLE_COUNTS), str(built), "--json", "-"]) == 0
    captured = capsys.readouterr()
    # THEN stdout holds only the JSON, and the table goes to stderr
    metrics = json.loads(captured.out)
    assert metrics["contiguous"] is True and metrics["max_utilisation"] <= 1.0 + 1e-9
    assert "Partition p0001" in captured.err


def test_evaluate_old_spec_under_new_load_shows_planned_to_actual(built, tmp_path, capsys):
    # GIVEN the sample with every weight doubled
    rows = SAMPLE_COUNTS.read_text().splitlines()[1:]
    doubled = "quadkey,weight\n" + "".join(f"{q},{2 * float(w)}\n" for q, w in (r.split(",") for r in rows))
    counts = write(tmp_path, "double.csv", doubled)
    assert main(["evaluate", counts, str(built)]) == 0
    out = capsys.readouterr().out
    # THEN the lines read planned -> actual and the overloaded workers are listed
    assert "->" in out and "of the cap)" in out and "Over the cap under this load:" in out


def test_diff_with_and_without_counts(built, tmp_path, capsys):
    assert main(["diff", str(built), str(built), "--counts", str(SAMPLE_COUNTS)]) == 0
    out = capsys.readouterr().out
    assert "partitions added (0): -" in out and "100.0% of load keeps its partition and worker" in out
    assert main(["diff", str(built), str(built)]) == 0
    assert "estimated from the old spec's recorded loads" in capsys.readouterr().out


def test_geojson_to_file_and_stdout(built, tmp_path, capsys):
    out = tmp_path / "s.geojson"
    assert main(["geojson", str(built), "-o", str(out)]) == 0
    fc = json.loads(out.read_text())
    assert fc["type"] == "FeatureCollection" and len(fc["features"]) == len(load_spec(built).partitions)
    capsys.readouterr()
    assert main(["geojson", str(built)]) == 0
    assert json.loads(capsys.readouterr().out)["type"] == "FeatureCollection"


def test_plot_writes_png_and_mismatch(built, tmp_path):
    out, bars = tmp_path / "map.png", tmp_path / "bars.png"
    assert main(["plot", str(built), str(SAMPLE_COUNTS), "-o", str(out), "--mismatch", str(bars)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and bars.stat().st_size > 1000


def test_policy_command(built, tmp_path, capsys):
    assert main(["policy", str(built), str(built), str(SAMPLE_COUNTS), "--now", "2026-11-21T12:00:00Z",
                 "--last-published", "2026-11-21T11:00:00Z", "--json", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("decision: KEEP") or out.startswith("decision: REDEPLOY")
    assert "redeploy" in json.loads((tmp_path / "d.json").read_text())


def test_demo_writes_spec_geojson_and_map(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "Total partitions:" in out and "Seed strategy on the same load:" in out
    for name in ("spec.json", "spec.geojson", "map.png"):
        assert (tmp_path / "demo" / name).stat().st_size > 0
    assert validate(load_spec(tmp_path / "demo" / "spec.json")) == []


@pytest.mark.parametrize(("text", "needles"), [
    ("quadkey,weight\n0123,5\n01x3,2\n", ["line 3", "'01x3'"]),
    ("quadkey,weight\n0123,5\n0120,-2\n", ["line 3", "weight -2.0 is negative"]),
    ("quadkey,weight\n0123,nan\n", ["line 2", "not finite"]),
    ("quadkey,weight\n0123,5\n01201,2\n", ["line 3", "'01201'", "mixed zooms"]),
    ("", ["empty"]),
    ("quadkey,weight\n", ["no data rows"]),
    ("qk,w\n0123,1\n", ["line 1", "header"]),
])
def test_bad_counts_exit_2_with_one_line_naming_value_and_line(tmp_path, capsys, text, needles):
    counts = write(tmp_path, "bad.csv", text)
    # WHEN a bad counts file is built (mixed zooms rejected with --single-zoom)
    status = main(["build", counts, "--max-load", "10", "-o", str(tmp_path / "o.json"), "--single-zoom"])
    err = capsys.readouterr().err
    # THEN exit 2 with a single error line naming the file, line and value
    assert status == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "bad.csv" in err
    for needle in needles:
        assert needle in err
    assert not (tmp_path / "o.json").exists()


def test_missing_and_invalid_spec_files_exit_2(tmp_path, capsys):
    assert main(["geojson", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
    bad = write(tmp_path, "bad.json", '{"format": "geo-rebalancer.spec/1", "version": "7"}')
    assert main(["evaluate", str(SAMPLE_COUNTS), bad]) == 2
    assert "'version' must be an integer, got '7'" in capsys.readouterr().err


def test_bad_options_exit_2(built, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["build", str(SAMPLE_COUNTS), "--max-load", "-5", "-o", "x.json"])
    assert exc.value.code == 2 and "'-5' must be a positive finite number" in capsys.readouterr().err
    assert main(["plot", str(built), "-o", str(tmp_path / "map.jpg")]) == 2
    assert "must end in .png" in capsys.readouterr().err
    assert main(["policy", str(built), str(built), str(SAMPLE_COUNTS), "--policy", '{"high_watermark": 2}']) == 2
    assert "--policy: policy high_watermark must be in (0, 1], got 2" in capsys.readouterr().err
    assert main(["policy", str(built), str(built), str(SAMPLE_COUNTS), "--now", "yesterday"]) == 2
    assert "--now 'yesterday' is not an ISO-8601 timestamp" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["build", "evaluate", "diff", "geojson", "plot", "policy", "demo"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0 and "usage: partitioner " + command in capsys.readouterr().out


def test_python_dash_m_entry_point():
    r = subprocess.run([sys.executable, "-m", "partitioner", "build", "missing.csv", "--max-load", "5", "-o",
                        "x.json"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: cannot read counts file 'missing.csv'")
