"""Tests for glue_jobs.window_state: append-mode windows kept across micro-batches of the one query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from glue_jobs.batch import JobConfig, stream_batch_fn
from glue_jobs.events import classify_events, valid_events
from glue_jobs.transform import RollupSpec, WindowSpec, aggregate_cells
from glue_jobs.window_state import STATE_KEY, WindowStateError, WindowStore, interval_ms
from tests.glue_jobs.conftest import spark4_only

pytestmark = pytest.mark.spark

BASE = 1_700_000_040  # a multiple of 60 s
SLIDING = WindowSpec("60 seconds", "30 seconds", "45 seconds")
SCHEMA = "value string, source string"


def _event(i: int, t: float, lon: float = 13.4, lat: float = 52.5) -> tuple[str, str]:
    body = {"event_id": f"e{i}", "entity_id": f"u{i % 3}", "ts": int(t * 1000), "lat": lat, "lon": lon}
    return json.dumps(body), f"test/{i}"


def _fine(spark, records: list[tuple[str, str]], window: WindowSpec):
    valid = valid_events(classify_events(spark.createDataFrame(records, SCHEMA)))
    stats = valid.agg(F.max(F.unix_millis("ts"))).first()
    return aggregate_cells(valid, window, 14), stats[0] if stats else None


def _rows(df) -> set[tuple]:
    return {(r["window_start"], r["window_end"], r["quadkey"], r["events"]) for r in df.collect()}


@spark4_only("runs on the Spark 4.0 line (the gate's time); on 3.5 the retried-batch test merges four batches "
             "through the same WindowStore.advance")
def test_windows_merged_over_batches_equal_one_batch_aggregation(spark, tmp_path: Path) -> None:
    # GIVEN sliding windows and events spread over three micro-batches, a little out of order and one late
    batches = [
        [_event(0, BASE + 1), _event(1, BASE + 20, lon=13.41), _event(2, BASE + 50)],
        [_event(3, BASE + 40), _event(4, BASE + 95, lon=13.41), _event(5, BASE + 110)],
        [_event(6, BASE + 5), _event(7, BASE + 110), _event(8, BASE + 200)],  # e6: both its windows closed (wm 65 s)
    ]
    store = WindowStore(str(tmp_path / "windows"), SLIDING.watermark)
    emitted: list = []
    steps = []
    # WHEN each batch is merged into the store
    for batch_id, records in enumerate(batches):
        fine, max_ms = _fine(spark, records, SLIDING)
        steps.append(store.advance(spark, fine, max_ms, batch_id, lambda final: emitted.extend(final.collect())))
    # THEN the emitted windows are exactly the one-shot counts of the on-time events, for every closed window
    everything, _ = _fine(spark, [r for b in batches for r in b if r[1] != "test/6"], SLIDING)
    watermark_us = (BASE + 200 - 45) * 1_000_000
    expected = _rows(everything.where(F.unix_micros("window_end") <= watermark_us))
    got = {(r["window_start"], r["window_end"], r["quadkey"], r["events"]) for r in emitted}
    assert got == expected and len(got) > 4
    # AND each window came out once, the late event is reported (in both its windows), the watermark advanced
    assert len(emitted) == len(got)
    assert [s.late_events for s in steps] == [0, 0, 2]
    assert [s.watermark_ms for s in steps] == [(BASE + 5) * 1000, (BASE + 65) * 1000, watermark_us // 1000]


def test_a_retried_batch_starts_from_the_same_state_and_rewrites_nothing(spark, tmp_path: Path) -> None:
    # GIVEN the job's batch function and two batches, the second closing the first's window
    cfg = JobConfig(out=str(tmp_path / "out"), window=WindowSpec("60 seconds", None, "60 seconds"),
                    rollup=RollupSpec(grid_zoom=10, zoom=14, refine_events=5))
    lines: list[str] = []
    on_batch = stream_batch_fn(cfg, str(tmp_path / "ckpt" / "windows"), lines.append)
    first = spark.createDataFrame([_event(i, BASE + i) for i in range(3)], SCHEMA)
    second = spark.createDataFrame([_event(9, BASE + 300), ('{"x"', "test/bad")], SCHEMA)
    on_batch(first, 0)
    on_batch(second, 1)
    # WHEN Spark re-runs batch 1 after a crash (same id, same records), then runs batch 2
    on_batch(second, 1)
    on_batch(spark.createDataFrame([_event(10, BASE + 301)], SCHEMA), 2)
    # THEN the retry emitted the same snapshot (skipped as unchanged) and wrote the same quarantine
    snaps = [line for line in lines if " snapshot " in line]
    assert len(snaps) == 2 and "events=3" in snaps[0] and snaps[1].endswith("(unchanged retry, skipped)")
    assert len(list((tmp_path / "out" / "quarantine").rglob("*.jsonl"))) == 1
    # AND the state after batch 2 still holds the open window's events (retry did not double them)
    state = json.loads((tmp_path / "ckpt" / "windows" / STATE_KEY).read_text())
    assert (state["current"]["batch"], state["previous"]["batch"], state["current"]["rows"]) == (2, 1, 1)
    kept = spark.read.parquet(str(tmp_path / "ckpt" / "windows" / f"slot={state['current']['slot']}"))
    assert kept.agg(F.sum("events")).first()[0] == 2


def test_state_of_a_later_batch_is_refused(spark, tmp_path: Path) -> None:
    # GIVEN a state committed by batch 3 (and 2 before it)
    store = WindowStore(str(tmp_path), "1 minute")
    fine, max_ms = _fine(spark, [_event(0, BASE)], SLIDING)
    for batch_id in (2, 3):
        store.advance(spark, fine, max_ms, batch_id, lambda final: None)
    # WHEN a batch older than both asks for its base / THEN the error names the state and the batch
    assert store.base(3).batch == 2 and store.base(4).batch == 3
    with pytest.raises(WindowStateError, match=r"window state of batch 3 is newer than batch 1"):
        store.base(1)


def test_interval_ms_reads_spark_intervals_and_names_bad_ones() -> None:
    # GIVEN interval strings / WHEN read / THEN milliseconds, or an error naming the setting and value
    assert (interval_ms("2 minutes"), interval_ms("1 second"), interval_ms("500 milliseconds")) == (120_000, 1000, 500)
    with pytest.raises(ValueError, match=r"watermark: expected .* got '2m'"):
        interval_ms("2m", "watermark")
