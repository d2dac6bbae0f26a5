"""Tests for partitioner.commands.counts: the real CLI on CSV, JSON lines and Parquet, then simulate on its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from partitioner.cli import main
from partitioner.load.eventcols import EventColumns
from partitioner.load.eventlog import CountOptions, check_rows, count_events
from partitioner.load.eventread import read_event_table
from tests.events.ts_units import EXPECTS, NOW_MS, WINDOW_S, Expect, window_start_ms

ROOT = Path(__file__).resolve().parents[3]


def _write_inputs(tmp_path: Path) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    csv = tmp_path / "a.csv"
    csv.write_text("who,y,x,when\nv1,51.5074,-0.1278,2024-05-01T00:00:10Z\nv2,51.5075,-0.1279,2024-05-01T00:01:10\n")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('{"who": "v1", "y": 48.8566, "x": 2.3522, "when": 1714521620000}\n\n'
                     '{"who": "v3", "y": 48.8567, "x": 2.3523, "when": 1714521740000}\n')
    parquet = tmp_path / "c.parquet"
    pq.write_table(pa.table({"who": ["v4"], "y": [52.52], "x": [13.405], "when": [1714521650000]}), parquet)
    return [csv, jsonl, parquet]


def test_cli_counts_three_formats_and_simulate_reads_the_windows(tmp_path: Path) -> None:
    # GIVEN a CSV (ISO times), a JSONL and a Parquet file (epoch ms) with their own column names
    files = _write_inputs(tmp_path)
    out = tmp_path / "windows"
    # WHEN the real command counts them in 60 s windows at zoom 14
    cmd = [sys.executable, "-m", "partitioner", "counts", *map(str, files), "--window-s", "60", "--zoom", "14",
           "--lat", "y", "--lon", "x", "--time", "when", "--entity", "who", "-o", str(out), "--keep-partial"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    # THEN it succeeds with one file per window (the partial edges kept), named by start, and 5 events counted
    assert done.returncode == 0, done.stderr
    assert "counted 5 events from 4 entities" in done.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == ["20240501T000000Z.csv", "20240501T000100Z.csv", "20240501T000200Z.csv"]
    total = sum(int(line.split(",")[1]) for p in out.iterdir() for line in p.read_text().splitlines()[1:])
    assert total == 5
    # AND simulate replays the directory unchanged
    assert main(["simulate", str(out), "--max-load", "2", "--window-s", "60", "-q"]) == 0


def test_partial_edge_windows_are_left_out_and_named(tmp_path: Path, capsys: object) -> None:
    # GIVEN a log from 00:00:40 to 00:03:05 (a third of its first minute, 5 s of its last) and one of 10 s
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n" + "".join(f"1,2,{1714521600 + s}\n" for s in (40, 50, 70, 100, 130, 170, 185)))
    short = tmp_path / "short.csv"
    short.write_text("lat,lon,ts\n1,2,1714521640\n1,2,1714521650\n")
    # WHEN counted in 60 s windows
    assert main(["counts", str(f), "--window-s", "60", "--zoom", "8", "-o", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out  # type: ignore[attr-defined]
    # THEN the first and last windows are left out and named with the share of them the log covers
    assert sorted(p.name for p in (tmp_path / "out").glob("*.csv")) == ["20240501T000100Z.csv", "20240501T000200Z.csv"]
    assert "2 windows of 60 s, 2 quadkey-windows" in said
    assert "left out the partial edge window(s) 20240501T000000Z (33 % of it in the log) and 20240501T000300Z (8 % of " \
           "it in the log)" in said
    # AND a log shorter than a window keeps its one window (leaving it out would leave nothing)
    assert main(["counts", str(short), "--window-s", "60", "--zoom", "8", "-o", str(tmp_path / "short"), "-q"]) == 0
    assert [p.name for p in (tmp_path / "short").glob("*.csv")] == ["20240501T000000Z.csv"]


def test_a_bad_row_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    # GIVEN a CSV whose third line has an unparseable time
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n1,2,1714521620000\n1,2,yesterday\n")
    out = tmp_path / "out"
    # WHEN counted
    done = subprocess.run([sys.executable, "-m", "partitioner", "counts", str(f), "--window-s", "60", "--zoom", "8",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, check=False)
    # THEN exit 2, one line naming file:line and the value, and no directory
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {f} line 3: bad_timestamp: ts 'yesterday' is neither an epoch "
                                                "number nor an ISO-8601 date-time (a date and a time)"]
    assert not out.exists()


def test_skip_bad_writes_the_rest_a_summary_and_the_quarantine(tmp_path: Path, capsys: object) -> None:
    # GIVEN a CSV with two bad rows of different reasons
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n1,2,1714521620000\n100,2,1714521620000\n1,2,\n")
    out = tmp_path / "out"
    # WHEN counted with --skip-bad
    status = main(["counts", str(f), "--window-s", "60", "--zoom", "8", "-o", str(out), "--skip-bad", "-q"])
    # THEN it succeeds, summarises the reasons on stderr and quarantines both rows
    assert status == 0
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "skipped 2 bad rows" in err and "lat_out_of_range 1" in err and "bad_timestamp 1" in err
    records = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [r["source"] for r in records] == [f"{f}:3", f"{f}:4"]
    assert sorted(p.name for p in out.glob("*.csv")) == ["20240501T000000Z.csv"]


def test_columns_name_the_columns_of_a_headerless_file(tmp_path: Path) -> None:
    # GIVEN a taxi log without a header line (T-Drive: id, time, lon, lat)
    f = tmp_path / "taxi.csv"
    f.write_text("1,2008-02-02 15:36:08,116.51172,39.92123\n2,2008-02-02 15:36:58,116.51135,39.93883\n")
    out = tmp_path / "out"
    # WHEN counted with --columns naming them THEN it writes the window
    assert main(["counts", str(f), "--columns", "entity_id,ts,lon,lat", "--window-s", "60", "--zoom", "8",
                 "-o", str(out), "-q"]) == 0
    assert [p.name for p in out.iterdir() if p.suffix == ".csv"] == ["20080202T153600Z.csv"]
    # AND without them the command exits 2 naming --columns
    assert main(["counts", str(f), "--window-s", "60", "--zoom", "8", "-o", str(tmp_path / "o2"), "-q"]) == 2
    assert not (tmp_path / "o2").exists()


def _one_event_file(tmp_path: Path, e: Expect, fmt: str) -> Path:
    """The case's event as the only row of a JSON lines file (ts as JSON) or a CSV file (ts as its text)."""
    doc = e.event()
    f = tmp_path / f"case.{fmt}"
    if fmt == "jsonl":
        f.write_text(json.dumps(doc) + "\n")
    else:
        ts = doc["ts"] if isinstance(doc["ts"], str) else json.dumps(doc["ts"])
        f.write_text(f"entity_id,lat,lon,ts\n{doc['entity_id']},{doc['lat']},{doc['lon']},{ts}\n")
    return f


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("expect", EXPECTS, ids=[e.id for e in EXPECTS])
def test_the_shared_time_unit_table(tmp_path: Path, expect: Expect, fmt: str) -> None:
    # GIVEN a case of the one table of event times (tests/events/ts_units.json) as a recorded log's only row
    f = _one_event_file(tmp_path, expect, fmt)
    # WHEN counts checks it with --ts-unit the case's unit, its clock at the table's now
    rows = check_rows(read_event_table(f, EventColumns()), EventColumns(), expect.unit, NOW_MS)
    # THEN it is valid with the table's event time, or a bad row with the table's reason
    ms = int(rows.ms[0]) if rows.ok[0] else None
    assert expect.verdict(ms, None if rows.ok[0] else rows.bad[0].reason) is None, \
        expect.verdict(ms, None if rows.ok[0] else rows.bad[0].reason)
    # AND a valid one is counted in the table's window
    if expect.window is not None:
        r = count_events([f], EventColumns(), CountOptions(WINDOW_S, 8, expect.unit, now_ms=NOW_MS))
        assert int(r.counts.window[0]) * r.counts.window_ms == window_start_ms(expect.window)


def test_ts_unit_is_the_deployments_setting_and_time_unit_its_old_name(tmp_path: Path, capsys: object) -> None:
    # GIVEN a log stamped in epoch seconds (issue #56: counts read it as seconds, the deployed parts as 1970 ms)
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n1,2,1733574037\n1,2,1733574097\n")
    # WHEN counted with --ts-unit s, and with the old --time-unit ms
    assert main(["counts", str(f), "--window-s", "60", "--zoom", "8", "--ts-unit", "s", "--keep-partial",
                 "-o", str(tmp_path / "s"), "-q"]) == 0
    status = main(["counts", str(f), "--window-s", "60", "--zoom", "8", "--time-unit", "ms", "-o", str(tmp_path / "ms")])
    # THEN seconds count in their 2024 windows; read as ms the first row is refused with the router's reason
    assert sorted(p.name for p in (tmp_path / "s").glob("*.csv")) == ["20241207T122000Z.csv", "20241207T122100Z.csv"]
    assert status == 2
    assert f"{f} line 2: bad_timestamp: ts 1733574037 read as ms is 1970-01-21T01:32:54Z, outside the plausible " \
           "window [2000-01-01, now + 1 day]; set ts_unit (event field mapping) to 's' or 'auto'" in \
           capsys.readouterr().err  # type: ignore[attr-defined]
