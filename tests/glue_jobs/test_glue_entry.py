"""Tests for glue_jobs.glue_entry: the code the Glue job runs (awsglue itself only exists in Glue)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.events import REQUIRED_FIELDS
from glue_jobs.emr_entry import connector_options
from glue_jobs.events import classify_events
from glue_jobs.glue_entry import (
    config_from_job_args,
    glue_batch_function,
    glue_connector_options,
    glue_event_schema,
    glue_kinesis_options,
    glue_records,
)
from glue_jobs.snapshot import LocalStorage, read_snapshot

pytestmark = pytest.mark.spark
EVENTS = Path(__file__).resolve().parents[1] / "events"


def recorded_glue_frame(spark: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The recorded frame of Glue's Kinesis source in its documented shape (tests/events/glue_kinesis_frame.json)."""
    recorded = json.loads((EVENTS / "glue_kinesis_frame.json").read_text())
    rows = recorded["rows"]
    columns = ["event_id", "entity_id", "ts", "lat", "lon", "__src_timestamp"]
    values = [tuple(datetime.fromisoformat(r[c]) if c == "__src_timestamp" else r[c] for c in columns)
              for r in rows]
    return spark.createDataFrame(values, recorded["schema"]), rows


def test_the_glue_source_declares_the_schema_its_reference_requires() -> None:
    # GIVEN the Kinesis options THEN inferSchema off comes with a DDL schema of the event fields and arrival times
    opts = glue_kinesis_options("arn:aws:kinesis:eu-west-1:123456789012:stream/georebal-ingest")
    assert (opts["classification"], opts["inferSchema"], opts["addRecordTimestamp"]) == ("json", "false", "true")
    assert opts["schema"] == glue_event_schema() == (
        "`event_id` STRING, `entity_id` STRING, `ts` STRING, `lat` DOUBLE, `lon` DOUBLE")
    assert [f.split("` ")[0].strip("`") for f in opts["schema"].split(", ")] == list(REQUIRED_FIELDS)


def test_a_recorded_glue_frame_is_validated_like_the_raw_records(spark) -> None:
    # GIVEN a recorded frame of the documented shape (one column per schema field, __src_timestamp)
    df, rows = recorded_glue_frame(spark)
    # WHEN mapped to records and classified by the shared validation (keyed by source: stream/arrival time)
    out = {r["source"]: r for r in classify_events(glue_records(df, "ingest")).collect()}
    got = {r["event_id"] or r["sent"]: out[f"ingest/{r['__src_timestamp'][:-1]}Z"] for r in rows}
    # THEN the valid events are valid, with their fields
    assert got["e1"]["reason"] is None and got["e2"]["reason"] is None
    assert (got["e1"]["event_id"], got["e1"]["lat"], got["e1"]["lon"]) == ("e1", 52.52, 13.4)
    # AND the bad ones are quarantined as the raw text would be (out of range), or as missing fields
    assert got["e3"]["reason"].startswith("lat_out_of_range")
    assert got["e4"]["reason"].startswith("missing_field")
    assert got['{"event_id": 5']["reason"].startswith("missing_field") and len(out) == len(rows)


def test_glue_frame_of_unknown_shape_is_a_clear_error(spark) -> None:
    # GIVEN a frame without the schema's columns / WHEN mapped / THEN the error lists what is missing and present
    df = spark.createDataFrame([(1, 2)], "x int, y int")
    with pytest.raises(ValueError, match=r"missing \['event_id', 'entity_id', 'ts', 'lat', 'lon'\] in \['x', 'y'\]"):
        glue_records(df, "ingest")


def test_the_glue_batch_function_writes_quarantine_and_snapshots_from_one_frame(spark, tmp_path: Path) -> None:
    # GIVEN job arguments and one micro-batch of raw records: two valid in one window, one bad, and one event
    # ten minutes later whose watermark (10 min - 2 min) closes the first window
    cfg = config_from_job_args({"snapshots": str(tmp_path), "zoom": "14", "grid_zoom": "10", "refine_events": "1"})
    on_batch = glue_batch_function(cfg, str(tmp_path / "ckpt"))
    raw = spark.createDataFrame(
        [('{"event_id": "1", "entity_id": "u", "ts": 1700000041000, "lat": 1.0, "lon": 1.0}', "s/1"),
         ('{"event_id": "2", "entity_id": "u", "ts": 1700000042000, "lat": 1.0, "lon": 1.0}', "s/2"),
         ('{"event_id": 3', "s/3"),
         ('{"event_id": "4", "entity_id": "u", "ts": 1700000641000, "lat": 1.0, "lon": 1.0}', "s/4")],
        "value string, source string")
    # WHEN Glue would call it for batch 5
    on_batch(raw, 5)
    # THEN the quarantine and a verified snapshot of the closed window are written; the later window stays open
    assert (tmp_path / "quarantine/batch=00000005/part-00000.jsonl").read_text().count("\n") == 1
    manifest, _ = read_snapshot(LocalStorage(tmp_path), "snapshots/window_end=2023-11-14T22-15-00Z/")
    assert (manifest["batch_id"], manifest["total_events"], manifest["rows"]) == (5, 2, 5)
    assert len(list((tmp_path / "snapshots").iterdir())) == 1


def test_glue_job_arguments_are_checked() -> None:
    # GIVEN bad job arguments / WHEN parsed / THEN the argument and value are named
    with pytest.raises(ValueError, match="--snapshots is required"):
        config_from_job_args({})
    with pytest.raises(ValueError, match="--zoom must be an integer, got 'x'"):
        config_from_job_args({"snapshots": "s3://b", "zoom": "x"})


RENAMED = EventFields(event_id="id", entity_id="vehicle", ts="time", lat="latitude", lon="longitude")


def test_the_glue_schema_and_arguments_follow_the_event_fields() -> None:
    # GIVEN job arguments with an event field mapping (one key holding a backtick)
    mapping = EventFields(lat="latitude", lon="long`itude")
    cfg = config_from_job_args({"snapshots": "s3://b", "event_fields": mapping.to_json()})
    # THEN the job config carries it and the source schema declares the producer's keys, quoted
    assert cfg.event_fields == mapping
    assert glue_kinesis_options("arn", cfg.event_fields)["schema"] == (
        "`event_id` STRING, `entity_id` STRING, `ts` STRING, `latitude` DOUBLE, `long``itude` DOUBLE")
    # AND a bad mapping is named with its argument
    with pytest.raises(ValueError, match=r"--event_fields: unknown event field 'x'"):
        config_from_job_args({"snapshots": "s3://b", "event_fields": '{"x": "y"}'})


def test_a_renamed_glue_frame_is_validated_with_the_mapping(spark, tmp_path: Path) -> None:
    # GIVEN one micro-batch under a producer's keys, as Glue's frame (one column per mapped key)
    cfg = config_from_job_args({"snapshots": str(tmp_path), "zoom": "14", "grid_zoom": "10", "refine_events": "1",
                                "event_fields": RENAMED.to_json()})
    df = spark.createDataFrame([("1", "u", "1700000041000", 1.0, 1.0), ("2", "u", "1700000042000", 95.0, 1.0),
                                ("4", "u", "1700000641000", 1.0, 1.0)],
                               "id string, vehicle string, time string, latitude double, longitude double")
    # WHEN mapped to records and run through the batch function
    glue_batch_function(cfg, str(tmp_path / "ckpt"))(glue_records(df, "ingest", cfg.event_fields), 3)
    # THEN the out-of-range event is quarantined naming the producer's key, and the closed window counts one event
    (line,) = (tmp_path / "quarantine/batch=00000003/part-00000.jsonl").read_text().splitlines()
    assert json.loads(line)["reason"].startswith("lat_out_of_range: latitude=95.0")
    manifest, _ = read_snapshot(LocalStorage(tmp_path), "snapshots/window_end=2023-11-14T22-15-00Z/")
    assert manifest["total_events"] == 1


def test_the_connector_reader_is_told_the_stream_and_region_of_the_arn() -> None:
    # GIVEN the stack's stream ARN (the job's --stream_arn)
    arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/georebal-ingest"
    # WHEN the connector's options are made from it
    opts = glue_connector_options(arn)
    # THEN they name the stream and region, as the EMR entry's, from the oldest record (a run's own checkpoint)
    assert opts == connector_options("georebal-ingest", "eu-west-1", None, "TRIM_HORIZON")
    # AND something else is refused naming the argument and the value
    with pytest.raises(ValueError, match=r"--stream_arn must be a Kinesis stream ARN .*'arn:aws:s3:::bucket'"):
        glue_connector_options("arn:aws:s3:::bucket")
    # AND the argument is one the job accepts
    assert config_from_job_args({"snapshots": "s3://b", "kinesis_connector_jar": "s3://j/c.jar"}).out == "s3://b"
