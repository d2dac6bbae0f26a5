"""Tests for glue_jobs.batch: streaming windows + watermark end to end, foreachBatch bodies, cost rates."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from glue_jobs.batch import JobConfig, parse_cost_rates, read_cost_rates, start_streaming
from glue_jobs.snapshot import LocalStorage, read_snapshot
from glue_jobs.transform import RollupSpec, WindowSpec
from partitioner.load.read import read_snapshot_rows
from tests.glue_jobs.conftest import spark4_only

pytestmark = pytest.mark.spark

#: The two end-to-end streaming runs below drive the batch body with Spark's own ``readStream``, as the EMR job does
#: (Spark 4.0). On the Spark 3.5 line (Glue 5.1, whose job Glue's ``forEachBatch`` drives) the gate runs the batch body
#: through tests/glue_jobs/test_glue_entry.py and the window state through test_window_state.py instead: these two
#: are the slowest of the line (150 s of a loaded CI's 460 s) and add no 3.5 path.
EMR_HARNESS = spark4_only("Spark's readStream drives the batch body on EMR (Spark 4.0) only")

BASE = 1_700_000_040  # a multiple of 60 s: windows start here


def _event(i: int, t: float, lon: float = 13.4, lat: float = 52.5) -> str:
    return json.dumps({"event_id": f"e{i}", "entity_id": f"u{i % 3}", "ts": int(t * 1000), "lat": lat, "lon": lon})


def _run_available_now(spark, inbox: Path, cfg: JobConfig, checkpoint: Path) -> list[str]:
    raw = spark.readStream.text(str(inbox)).select("value", F.input_file_name().alias("source"))
    lines: list[str] = []
    query = start_streaming(raw, cfg, str(checkpoint), trigger=None, progress=lines.append)
    query.awaitTermination(timeout=300)
    assert not query.isActive and query.exception() is None
    return lines


def _late_dropped(lines: list[str]) -> int:
    """Sum of the ``late_dropped=`` counts of the per-batch progress lines."""
    return sum(int(n) for line in lines for n in re.findall(r"late_dropped=(\d+)", line))


def _snapshots(out: Path) -> dict[str, dict]:
    storage = LocalStorage(out)
    found = {}
    for key in storage.list("snapshots/"):
        if key.endswith("_manifest.json"):
            manifest, text = read_snapshot(storage, key.rsplit("/", 1)[0])
            found[manifest["window_end"]] = {"manifest": manifest, "text": text}
    return found


@EMR_HARNESS
def test_streaming_windows_watermark_late_data_and_quarantine(spark, tmp_path: Path) -> None:
    # GIVEN a directory source and 60 s tumbling windows with a 60 s watermark
    inbox, out, ckpt = tmp_path / "inbox", tmp_path / "out", tmp_path / "ckpt"
    inbox.mkdir()
    cfg = JobConfig(out=str(out), window=WindowSpec("60 seconds", None, "60 seconds"),
                    rollup=RollupSpec(grid_zoom=10, zoom=14, refine_events=5))
    # first file: 10 events in window [0, 60) and one at 130 s (watermark -> 70 s)
    (inbox / "a.jsonl").write_text("\n".join([_event(i, BASE + 5 * i) for i in range(10)]
                                             + [_event(10, BASE + 130)]) + "\n")
    _run_available_now(spark, inbox, cfg, ckpt)
    # second file: a late event at 10 s (below the watermark), an in-time one at 100 s, one at 300 s
    # (watermark -> 240 s) and a bad record
    (inbox / "b.jsonl").write_text("\n".join([_event(11, BASE + 10), _event(12, BASE + 100),
                                              _event(13, BASE + 300), '{"lat": 1'] ) + "\n")
    # WHEN the stream processes what is available (then once more with nothing new, to flush windows)
    progress = _run_available_now(spark, inbox, cfg, ckpt)
    progress += _run_available_now(spark, inbox, cfg, ckpt)
    snaps = _snapshots(out)
    # THEN windows below the watermark are written once each, final, with the late event not counted
    assert sorted(snaps) == ["2023-11-14T22:15:00Z", "2023-11-14T22:16:00Z", "2023-11-14T22:17:00Z"]
    totals = {k: v["manifest"]["total_events"] for k, v in snaps.items()}
    assert totals == {"2023-11-14T22:15:00Z": 10, "2023-11-14T22:16:00Z": 1, "2023-11-14T22:17:00Z": 1}
    # AND the late event is counted as dropped by the watermark in the job's progress lines
    dropped = _late_dropped(progress)
    assert dropped == 1
    # AND the window at 300 s is still open (not written), the bad record is quarantined with its source
    quarantine = [json.loads(line) for f in (out / "quarantine").rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert [q["raw"] for q in quarantine] == ['{"lat": 1']
    assert quarantine[0]["reason"].startswith("unparsable_json: ")
    assert quarantine[0]["source"].endswith("b.jsonl")
    # AND the snapshot rows are a quadtree the partitioner reads: hot cells refined down to zoom 14
    counts = read_snapshot_rows(snaps["2023-11-14T22:15:00Z"]["text"], "test")
    assert counts.total == 10 and max(counts.zooms) == 14


@EMR_HARNESS
def test_one_streaming_query_reads_the_source_and_writes_quarantine_and_snapshots(spark, tmp_path: Path) -> None:
    # GIVEN a directory source (one source) and a running job with a processing-time trigger
    inbox, out, quarantine, ckpt = tmp_path / "inbox", tmp_path / "out", tmp_path / "quarantine", tmp_path / "ckpt"
    inbox.mkdir()
    cfg = JobConfig(out=str(out), quarantine=str(quarantine), window=WindowSpec("60 seconds", None, "60 seconds"),
                    rollup=RollupSpec(grid_zoom=10, zoom=14, refine_events=5))
    raw = spark.readStream.text(str(inbox)).select("value", F.input_file_name().alias("source"))
    lines: list[str] = []
    before = {q.id for q in spark.streams.active}
    start_streaming(raw, cfg, str(ckpt), trigger="1 second", progress=lines.append)
    started = [q for q in spark.streams.active if q.id not in before]
    try:
        # THEN exactly one streaming query reads the source (one reader per Kinesis shard)
        assert sorted(q.name for q in started) == ["georebal-aggregation"]
        # WHEN good and bad records arrive, then a later event closes the first window
        (inbox / "a.jsonl").write_text("\n".join([_event(i, BASE + 5 * i) for i in range(4)] + ["[1, 2]"]) + "\n")
        _wait_for(lambda: any("quarantined=" in line for line in lines), started[0])
        (inbox / "b.jsonl").write_text(_event(9, BASE + 200) + "\n")
        _wait_for(lambda: bool(_snapshots(out)), started[0])
    finally:
        for q in started:
            q.stop()
    # AND its one foreachBatch wrote the bad record to the quarantine and the good ones to the snapshot
    bad = [json.loads(line) for f in quarantine.rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(q["raw"], q["reason"].split(":")[0]) for q in bad] == [("[1, 2]", "not_an_object")]
    assert {k: v["manifest"]["total_events"] for k, v in _snapshots(out).items()} == {"2023-11-14T22:15:00Z": 4}


def _wait_for(done, query, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert query.isActive, f"the query stopped: {query.exception()}"
        assert time.monotonic() < deadline, "timed out waiting for the streaming query"
        time.sleep(0.5)


def cost_report(rates: dict[str, object], version: int = 1) -> str:
    """A cost report as a worker writes it (geokernel.contracts.cost.CostReportRecord)."""
    return json.dumps({"version": version, "worker": "w0001", "partition_ids": ["p0001"], "interval_s": 60.0,
                       "calibration": 0.01, "quadkey_zoom": 3, "rates": rates, "events": {}, "reported_at": 1.0})


def test_parse_cost_rates_accepts_reports_and_csv_and_names_bad_values() -> None:
    # GIVEN a cost report (CONTRACTS.md), JSON lines of reports and a CSV
    report = cost_report({"120": 1.5, "121": 0.5})
    later = cost_report({"120": 2.0}, version=2)
    # WHEN parsed
    # THEN rates come out by quadkey, later lines overriding earlier ones
    assert parse_cost_rates(report, "r.json") == {"120": 1.5, "121": 0.5}
    assert parse_cost_rates(report + "\n" + later + "\n", "r.jsonl") == {"120": 2.0, "121": 0.5}
    assert parse_cost_rates("quadkey,rate\n0,1.25\n", "r.csv") == {"0": 1.25}
    # AND bad content names the file, line and value
    with pytest.raises(ValueError, match=r"r.csv line 2: rate 'x' is not a number"):
        parse_cost_rates("quadkey,rate\n0,x\n", "r.csv")
    with pytest.raises(ValueError, match=r"quadkey '9'"):
        parse_cost_rates(cost_report({"9": 1.0}), "r.json")
    with pytest.raises(ValueError, match=r"r.json quadkey '1': rate must be a finite number >= 0, got -1"):
        parse_cost_rates(cost_report({"1": -1}), "r.json")
    # AND a report missing fields (hand-made, not a worker's) names what it lacks
    with pytest.raises(ValueError, match=r"r.json: cost report lacks \['version', 'worker'"):
        parse_cost_rates(json.dumps({"rates": {"1": 1.0}}), "r.json")


def test_read_cost_rates_from_a_directory_applies_reports_oldest_first(tmp_path: Path) -> None:
    # GIVEN two reports of one worker, the newer (by epoch in the name) overriding a rate, and a bad file
    d = tmp_path / "costs" / "v1" / "w0001"
    d.mkdir(parents=True)
    (d / "1700000100.json").write_text(cost_report({"120": 3.0}))
    (d / "1700000000.json").write_text(cost_report({"120": 1.0, "121": 2.0}))
    (d / "1700000200.json").write_text("{not json")
    # WHEN read leniently (as the streaming job does) / strictly (as the CLI does)
    rates = read_cost_rates(str(tmp_path / "costs"), strict=False, log=open("/dev/null", "w"))  # noqa: SIM115
    # THEN the newest rate wins and the bad file is skipped; strict mode names it
    assert rates == {"120": 3.0, "121": 2.0}
    with pytest.raises(ValueError, match=r"1700000200\.json"):
        read_cost_rates(str(tmp_path / "costs"))
    with pytest.raises(ValueError, match="'/nope'"):
        read_cost_rates("/nope")
