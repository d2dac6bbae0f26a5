"""local/moto_events.py: moto's EventBridge targets get the same event with the JSONPath parser cached."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from moto import mock_aws

from local import moto_events


def _deliver() -> tuple[dict[str, Any], float]:
    """One event put on a bus whose rule targets a queue: the message body received, and the put's seconds."""
    with mock_aws():
        events, sqs = boto3.client("events", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
        events.create_event_bus(Name="b")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="r", EventBusName="b", EventPattern=json.dumps({"source": ["s"]}))
        events.put_targets(Rule="r", EventBusName="b", Targets=[{"Id": "q", "Arn": arn}])
        entries = [{"Source": "s", "DetailType": "d", "Detail": json.dumps({"k": i}), "EventBusName": "b"}
                   for i in range(10)]
        started = time.perf_counter()
        events.put_events(Entries=entries)
        took = time.perf_counter() - started
        body = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    return {k: v for k, v in body.items() if k not in ("id", "time")}, took


def test_the_cached_parser_delivers_the_same_event_and_install_is_idempotent() -> None:
    # GIVEN an event delivered by moto's own parser
    from jsonpath_ng import ext
    original = moto_events.ORIGINAL.get("parse", ext.parse)
    ext.parse = original
    try:
        plain, _ = _deliver()
        # WHEN the cache is installed (twice) and the same event is delivered
        assert moto_events.install() is None and moto_events.install() is None
        cached, _ = _deliver()
        # THEN the target received the same event
        assert cached == plain and cached["detail"] == {"k": 0}
    finally:
        moto_events.install()  # the loop's server keeps it
