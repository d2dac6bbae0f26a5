"""The small AWS adapter the worker talks through (S3, Kinesis, DynamoDB; EventBridge: :mod:`.eventbridge`).

:func:`make_clients` builds boto3 clients (pointed at moto when ``endpoint_url`` is set);
the functions here are the only places that know request and response shapes outside
:mod:`geo_service.leases.lease` and :mod:`geo_service.pipeline.consumer`.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import orjson
from botocore.config import Config
from botocore.exceptions import ClientError

from geo_service.errors import GeoServiceError
from geokernel.contracts.enriched import encode_lines
from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.stream import StreamManifest, stream_manifest_key
from geokernel.errors import SpecError
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.parse import spec_from_json

DEFAULT_REGION = "us-east-1"


class AwsError(GeoServiceError, RuntimeError):
    """An AWS call failed in a way the worker cannot recover from; the message names the resource."""


@dataclass(frozen=True)
class Clients:
    """The boto3 clients one worker uses (boto3 clients are thread-safe).

    ``kinesis_reads`` makes the ``GetRecords`` calls: a Kinesis client without SDK retries (None: ``kinesis``). The
    SDK's standard mode retries a throttled call up to five times within seconds, and every retry is one more call
    against the shard's five per second (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html),
    so a throttled shard got more calls, not fewer: measured in the local loop's ``stream-throttle`` fault, 4 to 7
    calls/s on one shard. Without SDK retries a throttled read returns nothing and the consumer's next call waits
    its spacing (:class:`geo_service.pipeline.consumer.ShardConsumer`).
    """

    s3: Any
    kinesis: Any
    dynamodb: Any
    kinesis_reads: Any = None
    events: Any = None  # EventBridge: the geofence sink's PutEvents (geo_service.pipeline.geofence_events)


def make_clients(endpoint_url: str | None = None, region: str | None = None) -> Clients:
    """Return boto3 clients; ``endpoint_url`` (moto) applies to all of them."""
    kw: dict[str, Any] = {"region_name": region or DEFAULT_REGION}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    cfg = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=20)
    once = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=20)
    reads = boto3.client("kinesis", config=once, **kw)
    read_records_raw(reads)
    return Clients(s3=boto3.client("s3", config=cfg, **kw), kinesis=boto3.client("kinesis", config=cfg, **kw),
                   dynamodb=boto3.client("dynamodb", config=cfg, **kw), kinesis_reads=reads,
                   events=boto3.client("events", config=cfg, **kw))


def read_records_raw(kinesis: Any) -> None:
    """Have ``kinesis`` read the ``Records`` of its GetRecords answers itself (:func:`records_of_body`), before botocore
    parses the rest of the answer.

    botocore's parse walks the output shape for each record and makes its ``ApproximateArrivalTimestamp`` a datetime
    in the local time zone: 13.3 us a record, ~9.5 of them the datetime (issue #60), more than the rest of the
    worker's path needs for the record. Here the answer's JSON is read once with orjson, each record's data
    base64-decoded and its arrival time kept as the epoch seconds the answer holds (a float: what the worker used of
    the datetime); botocore then parses the answer without its records (``NextShardIterator``,
    ``MillisBehindLatest``, ``ChildShards``), and the records are put back in its result (botocore's ``before-parse``
    event and its ``customized_response_dict``). An error answer, or one that is not a JSON object with a list of
    records, is left to botocore.
    """
    kinesis.meta.events.register("before-parse.kinesis.GetRecords", _records_before_parse)


def _records_before_parse(response_dict: dict[str, Any], customized_response_dict: dict[str, Any],
                          **_: Any) -> None:
    if response_dict.get("status_code") != 200:
        return
    try:
        doc = orjson.loads(response_dict["body"])
        records = records_of_body(doc)
    except (ValueError, TypeError, KeyError, binascii.Error):
        return  # botocore parses it (and raises what it raises)
    customized_response_dict["Records"] = records
    response_dict["body"] = orjson.dumps({k: v for k, v in doc.items() if k != "Records"})


def records_of_body(doc: Any) -> list[dict[str, Any]]:
    """The ``Records`` of a GetRecords answer's JSON (a dict), as botocore gives them but for the arrival time: epoch
    seconds (float); ``Data`` is the decoded bytes. Raises ValueError when it is not a list of records."""
    raw = doc["Records"]
    if not isinstance(raw, list):
        raise ValueError(f"Records must be a list, got {type(raw).__name__}")
    decode = binascii.a2b_base64
    for r in raw:  # the answer's own dicts, read for this call alone: changed in place
        r["Data"] = decode(r["Data"])
    return raw


def load_spec_from_s3(s3: Any, bucket: str, version: int) -> Spec:
    """Read and parse spec ``version`` from ``bucket``; errors name the object."""
    key = spec_key(version)
    where = f"s3://{bucket}/{key}"
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        raise AwsError(f"cannot read spec {where}: {exc.response['Error'].get('Code')!r}") from exc
    spec = spec_from_json(body, where=where)
    if spec.version != version:
        raise SpecError(f"{where}: holds version {spec.version!r}, expected {version!r}")
    return spec


def get_object_or_none(s3: Any, bucket: str, key: str, what: str) -> bytes | None:
    """The object's bytes, or None when it does not exist; :class:`AwsError` naming ``what`` and the key otherwise."""
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise AwsError(f"cannot read {what} s3://{bucket}/{key}: {exc.response['Error'].get('Code')!r}") from exc


def load_stream_manifest(s3: Any, bucket: str, version: int) -> StreamManifest | None:
    """Read the shard map of version ``version``'s geo stream; None while the deployer has not published it."""
    key = stream_manifest_key(version)
    body = get_object_or_none(s3, bucket, key, "stream manifest")
    if body is None:
        return None
    try:
        return StreamManifest.from_json(body, f"s3://{bucket}/{key}")
    except ValueError as exc:
        raise AwsError(str(exc)) from None


def put_json(s3: Any, bucket: str, key: str, value: Mapping[str, Any]) -> None:
    """Write one JSON object to S3."""
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(value, sort_keys=True).encode("utf-8"),
                  ContentType="application/json")


def put_jsonl(s3: Any, bucket: str, key: str, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as JSON lines to S3; return the number of rows written."""
    lines = [json.dumps(r, separators=(",", ":"), default=str) for r in rows]
    s3.put_object(Bucket=bucket, Key=key, Body=("\n".join(lines) + "\n").encode("utf-8"),
                  ContentType="application/x-ndjson")
    return len(lines)


def put_enriched(s3: Any, bucket: str, key: str, lines: list[str]) -> None:
    """Write already-serialised JSON lines to S3 as one enriched object (gzip'd: ``encode_lines``)."""
    s3.put_object(Bucket=bucket, Key=key, Body=encode_lines(lines), ContentType="application/gzip")
