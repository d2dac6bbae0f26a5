"""lambdas.teardown.handler: on stack deletion, every <prefix>-geo-v* stream is deleted (moto), nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from lambdas.runtime.kinesis import GeoStreams
from lambdas.teardown.handler import POLL_S, delete_streams, handle
from tests.lambdas.conftest import Aws

PREFIX = "georebal-geo-v"
OTHERS = ["georebal-ingest", "georebal-geo-x1", "other-geo-v1", "geo-v1"]


def _event(request: str, prefix: str = PREFIX, **extra: Any) -> dict[str, Any]:
    return {"RequestType": request, "RequestId": "r-1", "StackId": "arn:aws:cloudformation:us-east-1:1:stack/s/u",
            "LogicalResourceId": "GeoStreamTeardownB7CD8CD8", "ResponseURL": "https://example.invalid/response",
            "ResourceType": "Custom::GeoStreamTeardown", "ResourceProperties": {"StreamPrefix": prefix}, **extra}


class Sent:
    """Records what would be PUT to CloudFormation's response URL."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], answer: dict[str, Any]) -> None:
        self.answers.append(answer)


def _create(aws: Aws, names: list[str]) -> None:
    for name in names:
        aws.clients.kinesis.create_stream(StreamName=name, ShardCount=1)


def test_delete_removes_every_geo_stream_over_several_pages_and_leaves_the_others(aws: Aws) -> None:
    # GIVEN 101 geo streams (two ListStreams pages of 100) and streams of other names
    geo = [f"{PREFIX}{n}" for n in range(1, 102)]
    _create(aws, geo + OTHERS)
    sent = Sent()
    # WHEN CloudFormation deletes the teardown resource
    answer = handle(_event("Delete", PhysicalResourceId=f"{PREFIX}*"), aws.streams, lambda: 300.0, sent)
    # THEN every geo stream is gone, the others are untouched, and CloudFormation is told SUCCESS
    assert aws.stream_names() == sorted(OTHERS)
    assert sent.answers == [answer]
    assert (answer["Status"], answer["PhysicalResourceId"], answer["RequestId"]) == ("SUCCESS", f"{PREFIX}*", "r-1")


def test_a_second_delete_finds_nothing_to_do_and_succeeds(aws: Aws) -> None:
    # GIVEN a teardown that already ran (a retried stack deletion)
    _create(aws, [f"{PREFIX}1", f"{PREFIX}2", *OTHERS])
    handle(_event("Delete"), aws.streams, lambda: 300.0, Sent())
    # WHEN it runs again THEN it succeeds and leaves the other streams alone
    assert handle(_event("Delete"), aws.streams, lambda: 300.0, Sent())["Status"] == "SUCCESS"
    assert aws.stream_names() == sorted(OTHERS)


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_touch_no_stream_and_keep_one_physical_id(aws: Aws, request_type: str) -> None:
    # GIVEN live geo streams WHEN the resource is created or updated
    _create(aws, [f"{PREFIX}1", f"{PREFIX}2"])
    extra = {"PhysicalResourceId": f"{PREFIX}*"} if request_type == "Update" else {}
    answer = handle(_event(request_type, **extra), aws.streams, lambda: 300.0, Sent())
    # THEN nothing is deleted and the physical id is the same (no replacement, so no Delete of the old one)
    assert aws.stream_names() == [f"{PREFIX}1", f"{PREFIX}2"]
    assert (answer["Status"], answer["PhysicalResourceId"]) == ("SUCCESS", f"{PREFIX}*")


def test_a_prefix_that_is_not_a_geo_stream_prefix_deletes_nothing_and_fails(aws: Aws) -> None:
    # GIVEN a resource whose StreamPrefix could name other streams WHEN deleted
    _create(aws, [f"{PREFIX}1", *OTHERS])
    answer = handle(_event("Delete", prefix="georebal"), aws.streams, lambda: 300.0, Sent())
    # THEN nothing is deleted, and the answer is FAILED naming the bad value (never an exception: CloudFormation
    # would wait an hour)
    assert aws.stream_names() == sorted([f"{PREFIX}1", *OTHERS])
    assert answer["Status"] == "FAILED" and "'georebal'" in answer["Reason"]


class _Stub(GeoStreams):
    """Streams whose status changes pass by pass: CREATING first, then ACTIVE."""

    def __init__(self, passes: list[list[tuple[str, str]]]) -> None:
        super().__init__(None)
        self.passes = passes
        self.deleted: list[str] = []

    def named(self, prefix: str, page: int = 100) -> list[tuple[str, str]]:
        listed = self.passes.pop(0) if len(self.passes) > 1 else self.passes[0]
        return [(n, s) for n, s in listed if n not in self.deleted]

    def delete(self, name: str) -> None:
        self.deleted.append(name)


def test_a_stream_still_creating_is_waited_for_then_deleted() -> None:
    # GIVEN v1 ACTIVE, v2 still CREATING on the first pass and ACTIVE on the second, v3 already DELETING
    stub = _Stub([[(f"{PREFIX}1", "ACTIVE"), (f"{PREFIX}2", "CREATING"), (f"{PREFIX}3", "DELETING")],
                  [(f"{PREFIX}2", "ACTIVE"), (f"{PREFIX}3", "DELETING")]])
    slept: list[float] = []
    # WHEN the streams are deleted with time to spare
    left = delete_streams(stub, PREFIX, lambda: 120.0, slept.append)
    # THEN v1 is deleted at once, v2 after one pause, v3 is left to finish by itself
    assert (left, stub.deleted, slept) == ({}, [f"{PREFIX}1", f"{PREFIX}2"], [POLL_S])


def test_a_stream_that_stays_creating_past_the_time_is_answered_failed_by_name() -> None:
    # GIVEN a stream that never leaves CREATING and little time left
    stub = _Stub([[(f"{PREFIX}7", "CREATING")]])
    # WHEN the resource is deleted
    answer = handle(_event("Delete"), stub, lambda: 35.0, Sent(), sleep=lambda s: None)
    # THEN the answer is FAILED (the deletion can be retried) and names the stream
    assert answer["Status"] == "FAILED" and f"{PREFIX}7" in answer["Reason"]
