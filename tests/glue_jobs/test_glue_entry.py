"""Tests for glue_jobs.glue_entry: the code the Glue job runs (awsglue itself only exists in Glue)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from glue_jobs.glue_entry import config_from_job_args, glue_batch_functions, glue_records
from glue_jobs.snapshot import LocalStorage, read_snapshot

pytestmark = pytest.mark.spark


def test_glue_frame_with_a_single_raw_column_maps_to_records(spark) -> None:
    # GIVEN a frame like Glue's Kinesis source with inferSchema off (one raw string column)
    df = spark.createDataFrame([('{"a": 1}',)], "`$json$data_infer_schema$_temporary$` string")
    # WHEN mapped / THEN the raw text is the value and the stream names the source
    row = glue_records(df, "ingest").first()
    assert (row["value"], row["source"]) == ('{"a": 1}', "ingest")


def test_glue_frame_of_unknown_shape_is_a_clear_error(spark) -> None:
    # GIVEN a frame with several columns and no 'data' / WHEN mapped / THEN the error lists the columns
    df = spark.createDataFrame([(1, 2)], "x int, y int")
    with pytest.raises(ValueError, match=r"\['x', 'y'\]"):
        glue_records(df, "ingest")


def test_glue_batch_functions_write_snapshots_and_quarantine(spark, tmp_path: Path) -> None:
    # GIVEN job arguments and one micro-batch of raw records (two valid, one bad) and its windowed counts
    cfg = config_from_job_args({"snapshots": str(tmp_path), "zoom": "14", "grid_zoom": "10", "refine_events": "1"})
    on_snapshot, on_quarantine = glue_batch_functions(cfg)
    raw = spark.createDataFrame(
        [('{"event_id": "1", "entity_id": "u", "ts": 1700000041000, "lat": 1.0, "lon": 1.0}', "s/1"),
         ('{"event_id": "2", "entity_id": "u", "ts": 1700000042000, "lat": 1.0, "lon": 1.0}', "s/2"),
         ('{"event_id": 3', "s/3")], "value string, source string")
    fine = spark.createDataFrame(
        [(datetime(2023, 11, 14, 22, 14, tzinfo=UTC), datetime(2023, 11, 14, 22, 15, tzinfo=UTC),
          "12222222222222", 2)], "window_start timestamp, window_end timestamp, quadkey string, events long")
    # WHEN Glue would call them for batch 5
    on_quarantine(raw, 5)
    on_snapshot(fine, 5)
    # THEN the quarantine and a verified snapshot are written
    assert (tmp_path / "quarantine/batch=00000005/part-00000.jsonl").read_text().count("\n") == 1
    manifest, _ = read_snapshot(LocalStorage(tmp_path), "snapshots/window_end=2023-11-14T22-15-00Z/")
    assert (manifest["batch_id"], manifest["total_events"], manifest["rows"]) == (5, 2, 5)


def test_glue_job_arguments_are_checked() -> None:
    # GIVEN bad job arguments / WHEN parsed / THEN the argument and value are named
    with pytest.raises(ValueError, match="--snapshots is required"):
        config_from_job_args({})
    with pytest.raises(ValueError, match="--zoom must be an integer, got 'x'"):
        config_from_job_args({"snapshots": "s3://b", "zoom": "x"})
