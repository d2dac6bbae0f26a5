"""The worker's own read of GetRecords answers (geo_service.adapters.aws.read_records_raw) gives botocore's records
but for the arrival time, kept as the epoch seconds of the answer (issue #60)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from geo_service.adapters.aws import read_records_raw
from geo_service.pipeline.consumer import KinesisRecord

BODY = json.dumps({"Records": [{"SequenceNumber": f"4965{i:052d}", "ApproximateArrivalTimestamp": 1796601600.123 + i,
                                "Data": base64.b64encode(f'{{"n": {i}, "s": "é\\u0000"}}'.encode()).decode(),
                                "PartitionKey": f"pk-{i}", "EncryptionType": "NONE"} for i in range(3)],
                   "NextShardIterator": "it-next", "MillisBehindLatest": 42,
                   "ChildShards": [{"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
                                    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"}}]}).encode()
ERROR = json.dumps({"__type": "ProvisionedThroughputExceededException", "message": "slow down"}).encode()


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def _client(status: int, body: bytes, raw_reads: bool) -> Any:
    """A Kinesis client whose HTTP send answers ``status`` and ``body`` from memory (no network, no retries)."""
    client = boto3.client("kinesis", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                          aws_access_key_id="test", aws_secret_access_key="test",
                          config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
    client.meta.events.register("before-send.kinesis", lambda request, **_: AWSResponse(
        request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body)))
    if raw_reads:
        read_records_raw(client)
    return client


def test_the_records_are_botocores_with_the_arrival_as_epoch_seconds() -> None:
    # GIVEN a GetRecords answer with three records (non-ASCII data, child shards) and two clients: botocore's own
    # parse, and one reading the records itself
    theirs = _client(200, BODY, raw_reads=False).get_records(ShardIterator="it", Limit=10)
    # WHEN both read the answer
    ours = _client(200, BODY, raw_reads=True).get_records(ShardIterator="it", Limit=10)
    # THEN the rest of the answer is botocore's, and each record is too but for its arrival time: the epoch
    # seconds botocore's datetime stands for
    assert {k: v for k, v in ours.items() if k not in ("Records", "ResponseMetadata")} == \
        {k: v for k, v in theirs.items() if k not in ("Records", "ResponseMetadata")}
    assert len(ours["Records"]) == 3
    for mine, other in zip(ours["Records"], theirs["Records"], strict=True):
        assert mine["ApproximateArrivalTimestamp"] == other["ApproximateArrivalTimestamp"].timestamp()
        assert {**mine, "ApproximateArrivalTimestamp": None} == {**other, "ApproximateArrivalTimestamp": None}
    # AND the worker's record is the same from either
    assert [KinesisRecord.from_get_records("s", r) for r in ours["Records"]] == \
        [KinesisRecord.from_get_records("s", r) for r in theirs["Records"]]


def test_an_error_answer_is_left_to_botocore() -> None:
    # GIVEN a throttling answer WHEN the client reading records itself gets it THEN botocore raises its ClientError
    with pytest.raises(ClientError) as caught:
        _client(400, ERROR, raw_reads=True).get_records(ShardIterator="it", Limit=10)
    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
