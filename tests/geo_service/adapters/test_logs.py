"""geo_service.adapters.logs: the worker's log lines are the Lambdas' Powertools lines, read back by one reader."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from aws_lambda_powertools import Logger

from geo_service.adapters.logs import configure, get_logger, line_time, log, read_line


@pytest.fixture()
def worker_log() -> Iterator[io.StringIO]:
    """The ``geo_service`` logger configured as the process does, into a buffer; left as it was after the test."""
    logger = get_logger()
    before = (list(logger.handlers), logger.level, logger.propagate)
    buf = io.StringIO()
    configure(buf)
    yield buf
    logger.handlers[:] = before[0]
    logger.setLevel(before[1])
    logger.propagate = before[2]


def emit_lambda_line() -> dict[str, object]:
    """One line of a Powertools Logger as a Lambda writes it. Its service name is this test's own: Powertools keeps a
    logger per service name, and a "router" logger another test made first keeps that test's stream."""
    buf = io.StringIO()
    Logger(service="router-schema-probe", stream=buf).info("batch routed", extra={"records": 3})
    return dict(json.loads(buf.getvalue()))


def test_a_worker_line_has_the_keys_of_a_lambda_line(worker_log: io.StringIO) -> None:
    # GIVEN a line of the router's Powertools Logger
    lambda_line = emit_lambda_line()
    # WHEN the worker logs an event with its context
    log(get_logger(), logging.INFO, "lease_claimed", version=3, worker_id="w0001", owner="h:1:ab")
    line = json.loads(worker_log.getvalue())
    # THEN it has the same schema keys in the same order, its event as the message and the worker's service, and its
    # fields as top-level keys; the location is the caller's, not the log helper's
    schema = ["level", "location", "message", "timestamp", "service"]
    assert list(line)[:5] == schema == list(lambda_line)[:5]
    assert (line["level"], line["message"], line["service"]) == ("INFO", "lease_claimed", "geo-worker")
    assert (line["version"], line["worker_id"], line["owner"]) == (3, "w0001", "h:1:ab")
    assert line["location"].startswith("test_a_worker_line_has_the_keys_of_a_lambda_line:")


def test_a_field_named_like_a_schema_key_is_kept_under_another_name(worker_log: io.StringIO) -> None:
    # WHEN a line has fields named like LogRecord attributes or schema keys
    log(get_logger(), logging.WARNING, "odd", name="n", message="m", service="s")
    line = json.loads(worker_log.getvalue())
    # THEN none overwrites the schema, and each is kept
    assert (line["message"], line["service"]) == ("odd", "geo-worker")
    assert (line["name_field"], line["message_field"], line["service_field"]) == ("n", "m", "s")


def test_read_line_keeps_log_lines_only_and_reads_their_time(worker_log: io.StringIO) -> None:
    # GIVEN a log line, an EMF line and text that is not JSON
    log(get_logger(), logging.INFO, "state_calls", calls={"PutObject": 1})
    emf = json.dumps({"_aws": {"Timestamp": 1, "CloudWatchMetrics": []}, "message": "x"})
    # WHEN each is read THEN only the log line comes back, with its time in epoch seconds
    doc = read_line(worker_log.getvalue().strip())
    assert doc is not None and doc["message"] == "state_calls"
    assert read_line(emf) is None and read_line("Traceback (most recent call last):") is None
    at = line_time(doc)
    assert at is not None and at > 1_700_000_000
