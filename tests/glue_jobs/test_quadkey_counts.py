"""Tests for glue_jobs.quadkey_counts: the batch runner, its summary, and CLI argument errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geokernel.geo import tiles
from glue_jobs.batch import JobConfig
from glue_jobs.quadkey_counts import build_parser, config_from_args, format_summary, main, parse_duration, run_batch
from glue_jobs.snapshot import LocalStorage, read_snapshot
from glue_jobs.transform import RollupSpec, WindowSpec
from partitioner.load.read import read_snapshot_rows

pytestmark = pytest.mark.spark

SAMPLE = Path(__file__).resolve().parents[1] / "events" / "aggregation_sample.jsonl"


def test_run_batch_writes_snapshots_quarantine_and_a_summary(spark, tmp_path: Path) -> None:
    # GIVEN the sample events (5 valid in 2 windows, 4 bad, 1 blank line) and a cost file for one grid cell
    costs = tmp_path / "costs.csv"
    times_square = tiles.quadkey(tiles.tile(-73.9855, 40.7580, 10))
    costs.write_text(f"quadkey,rate\n{times_square},2.0\n")
    cfg = JobConfig(out=str(tmp_path / "out"), window=WindowSpec("60 seconds"),
                    rollup=RollupSpec(grid_zoom=10, zoom=15, refine_events=2), costs=str(costs))
    # WHEN the batch runs twice (a retry of batch 0)
    first = run_batch(spark, str(SAMPLE), cfg)
    again = run_batch(spark, str(SAMPLE), cfg)
    # THEN it read 9 records, quarantined 4 with their reasons and file:line sources
    assert (first.records, first.valid, first.windows) == (9, 5, 2)
    assert dict(first.report.quarantined) == {"lat_out_of_range": 1, "missing_field": 1, "unparsable_json": 1,
                                             "bad_timestamp": 1}
    bad = [json.loads(line) for line in Path(first.report.quarantine_uris[0]).read_text().splitlines()]
    assert sorted(b["source"].rsplit(":", 1)[1] for b in bad) == ["10", "7", "8", "9"]
    # AND each window's snapshot is verified, holds all its events, refines the hot cell, carries cost
    storage = LocalStorage(tmp_path / "out")
    manifest, text = read_snapshot(storage, "snapshots/window_end=2023-11-14T22-15-00Z/")
    assert manifest["total_events"] == 4 and manifest["has_cost"] is True
    rows = {line.split(",")[0]: line.split(",") for line in text.splitlines()[1:]}
    assert max(len(q) for q in rows) == 15
    assert read_snapshot_rows(text, "t", use_cost=False).total == 4
    london = tiles.quadkey(tiles.tile(-0.1246, 51.5007, 10))
    assert rows[london][2] == ""  # no rate known there
    assert float(rows[times_square][2]) == 2.0 * int(rows[times_square][1])
    # AND the retry rewrote nothing, and the summary says what happened
    assert all(s.skipped for s in again.report.snapshots)
    summary = format_summary(first)
    for text_ in ("events read: 9", "valid: 5", "quarantined: 4", "lat_out_of_range: 1", "windows: 2",
                  "window_end=2023-11-14T22-15-00Z", "z10="):
        assert text_ in summary


def test_run_batch_reports_a_missing_input_by_name(spark, tmp_path: Path) -> None:
    # GIVEN / WHEN / THEN a missing --events path is a clear error naming it
    with pytest.raises(FileNotFoundError, match=r"'/no/such/file\.jsonl'"):
        run_batch(spark, "/no/such/file.jsonl", JobConfig(out=str(tmp_path)))


@pytest.mark.parametrize("argv, message", [
    (["--window", "sixty"], "--window: expected a duration like 60s"),
    (["--grid-zoom", "19"], "grid_zoom=19"),
    (["--refine-events", "-1"], "-1"),
])
def test_cli_rejects_bad_flags_before_starting_spark(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a bad flag value / WHEN the CLI parses it / THEN exit code 2 and the value is named
    code = main(["--events", str(SAMPLE), "--out", "/tmp/x", *argv])
    assert code == 2
    assert message in capsys.readouterr().err


def test_durations_and_config_parse() -> None:
    # GIVEN CLI flags / WHEN parsed / THEN durations become Spark intervals and the rollup is checked
    assert parse_duration("60s", "--window") == "60 seconds"
    assert parse_duration("500ms", "--trigger") == "500 milliseconds"
    assert parse_duration("2 minutes", "--watermark") == "2 minutes"
    cfg = config_from_args(build_parser().parse_args(["--events", "x", "--out", "o", "--zoom", "16", "--slide", "30s"]))
    assert cfg.rollup == RollupSpec(12, 16, 500)
    assert cfg.window == WindowSpec("60 seconds", "30 seconds", "2 minutes")
