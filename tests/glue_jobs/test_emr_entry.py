"""Tests for glue_jobs.emr_entry: connector options, record mapping and argument handling."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from glue_jobs.emr_entry import CONNECTOR_FORMAT, build_parser, config_from_args, connector_options, connector_records
from glue_jobs.events import classify_events

pytestmark = pytest.mark.spark


def test_connector_options_name_the_bundled_connector_settings() -> None:
    # GIVEN a stream and region / WHEN options are built / THEN they use the aws-kinesis connector's option names
    opts = connector_options("ingest", "eu-west-1", None)
    assert CONNECTOR_FORMAT == "aws-kinesis"
    assert opts == {"kinesis.streamName": "ingest", "kinesis.region": "eu-west-1",
                    "kinesis.endpointUrl": "https://kinesis.eu-west-1.amazonaws.com",
                    "kinesis.consumerType": "GetRecords", "kinesis.startingPosition": "TRIM_HORIZON"}
    with pytest.raises(ValueError, match="'YESTERDAY'"):
        connector_options("ingest", "eu-west-1", None, "YESTERDAY")


def test_connector_rows_become_value_and_source_records(spark) -> None:
    # GIVEN rows shaped like the connector's (data binary, streamName, partitionKey, sequenceNumber, ts)
    df = spark.createDataFrame(
        [(bytearray(b'{"event_id": "e"}'), "ingest", "u1", "4960", datetime(2026, 1, 1, tzinfo=UTC))],
        "data binary, streamName string, partitionKey string, sequenceNumber string, "
        "approximateArrivalTimestamp timestamp")
    # WHEN mapped
    row = connector_records(df).first()
    # THEN the record text and a stream/key/sequence source come out, ready for classify_events
    assert (row["value"], row["source"]) == ('{"event_id": "e"}', "ingest/pk=u1/4960")
    assert classify_events(connector_records(df)).first()["reason"].startswith("missing_field: entity_id")


def test_arguments_build_the_job_config() -> None:
    # GIVEN entry-point arguments / WHEN parsed / THEN they map onto JobConfig
    args = build_parser().parse_args(["--stream-name", "s", "--region", "us-east-1", "--snapshots", "s3://b",
                                      "--checkpoint", "s3://b/ckpt", "--window", "30s", "--zoom", "17"])
    cfg = config_from_args(args, out=args.snapshots)
    assert (cfg.out, cfg.window.length, cfg.rollup.zoom) == ("s3://b", "30 seconds", 17)
    assert cfg.event_fields.is_default and cfg.starting_position == "TRIM_HORIZON"


def test_the_starting_position_reaches_the_job_config_that_marks_a_fresh_runs_first_windows() -> None:
    # GIVEN the stack's --starting-position LATEST (a fresh checkpoint reads from the stream's tip), then a bad one
    base = ["--stream-name", "s", "--region", "us-east-1", "--snapshots", "s3://b", "--checkpoint", "s3://b/c"]
    args = build_parser().parse_args([*base, "--starting-position", "latest"])
    # WHEN parsed THEN the job config knows it (its windows begun before the first batch are written partial)
    assert config_from_args(args, out=args.snapshots).starting_position == "LATEST"
    bad = build_parser().parse_args([*base, "--starting-position", "AT_TIMESTAMP"])
    with pytest.raises(ValueError, match="got 'AT_TIMESTAMP'"):
        config_from_args(bad, out=bad.snapshots)


def test_the_event_fields_argument_reaches_the_job_config() -> None:
    # GIVEN --event-fields with a mapping, then with a bad one
    base = ["--stream-name", "s", "--region", "us-east-1", "--snapshots", "s3://b", "--checkpoint", "s3://b/c"]
    args = build_parser().parse_args([*base, "--event-fields", '{"lat": "latitude", "ts": "time"}'])
    # WHEN parsed THEN the job config carries the mapping, and a bad one is named with its flag
    cfg = config_from_args(args, out=args.snapshots)
    assert (cfg.event_fields.lat, cfg.event_fields.ts, cfg.event_fields.lon) == ("latitude", "time", "lon")
    bad = build_parser().parse_args([*base, "--event-fields", "lat=latitude"])
    with pytest.raises(ValueError, match=r"--event-fields: .*'lat=latitude'"):
        config_from_args(bad, out=bad.snapshots)


def test_connector_rows_with_a_kpl_aggregated_record_become_one_record_per_event(spark) -> None:
    # GIVEN a connector row whose data is two events KPL-aggregated by the real encoder
    from aws_kinesis_agg.aggregator import RecordAggregator

    agg = RecordAggregator()
    for e in ('{"event_id": "a"}', '{"event_id": "b"}'):
        agg.add_user_record("u1", e.encode())
    data = bytearray(agg.clear_and_get().get_contents()[2])
    df = spark.createDataFrame([(data, "ingest", "u1", "4961", datetime(2026, 1, 1, tzinfo=UTC))],
                               "data binary, streamName string, partitionKey string, sequenceNumber string, "
                               "approximateArrivalTimestamp timestamp")
    # WHEN mapped
    rows = connector_records(df).collect()
    # THEN each event is one record, named by the parent record and its index
    assert [(r["value"], r["source"]) for r in rows] == [('{"event_id": "a"}', "ingest/pk=u1/4961/sub=0"),
                                                         ('{"event_id": "b"}', "ingest/pk=u1/4961/sub=1")]
