"""Real-shaped Lambda inputs: the S3 notification, the Kinesis batch, and a Lambda context.

The local loop calls the same handler functions as AWS Lambda does, with events shaped
like the ones the Lambda service sends (``aws:s3`` ObjectCreated records with URL-encoded
keys; ``aws:kinesis`` records with base64 data), so a handler that works here parses the
real thing.
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus

from geo_service.pipeline.consumer import KinesisRecord
from local.aws import REGION


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of the Lambda context object handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 1024
    timeout_s: float = 60.0
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=lambda: dt.datetime.now(dt.UTC).timestamp())

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:000000000000:function:{self.function_name}"

    @property
    def function_version(self) -> str:
        return "$LATEST"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "local"

    def get_remaining_time_in_millis(self) -> int:
        elapsed = dt.datetime.now(dt.UTC).timestamp() - self.started
        return max(0, int((self.timeout_s - elapsed) * 1000))


def _iso_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def s3_object_created(bucket: str, key: str, size: int, etag: str) -> dict[str, Any]:
    """Return an S3 ``ObjectCreated:Put`` notification for one object (key URL-encoded as AWS does)."""
    return {"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": REGION, "eventTime": _iso_now(),
        "eventName": "ObjectCreated:Put", "userIdentity": {"principalId": "local"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"}, "responseElements": {},
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "snapshot-manifest",
               "bucket": {"name": bucket, "ownerIdentity": {"principalId": "local"},
                          "arn": f"arn:aws:s3:::{bucket}"},
               "object": {"key": quote_plus(key, safe="/"), "size": size, "eTag": etag.strip('"'),
                          "sequencer": f"{int(dt.datetime.now(dt.UTC).timestamp() * 1e6):016X}"}},
    }]}


def kinesis_batch(stream_arn: str, records: Sequence[KinesisRecord]) -> dict[str, Any]:
    """Return a Kinesis event source mapping batch for ``records`` (data base64-encoded)."""
    return {"Records": [{
        "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": r.partition_key,
                    "sequenceNumber": r.sequence_number, "data": base64.b64encode(r.data).decode("ascii"),
                    "approximateArrivalTimestamp": r.arrival_s},
        "eventSource": "aws:kinesis", "eventVersion": "1.0",
        "eventID": f"{r.shard_id}:{r.sequence_number}", "eventName": "aws:kinesis:record",
        "invokeIdentityArn": f"arn:aws:iam::000000000000:role/{stream_arn.rsplit('/', 1)[-1]}-router",
        "awsRegion": REGION, "eventSourceARN": stream_arn,
    } for r in records]}
