"""The router's failure messages: what Lambda sends to a Kinesis event source mapping's on-failure destination
(the SQS queue ``RouterFailureQueue``) when it gives a batch up: the shard and sequence range, not the records.

Shape (https://docs.aws.amazon.com/lambda/latest/dg/kinesis-on-failure-destination.html; the local twin's
``local.event_source.on_failure_record`` builds the same)::

    {"requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3, ...},
     "responseContext": {...}, "version": "1.0", "timestamp": "2026-05-16T14:03:11.000Z",
     "KinesisBatchInfo": {"shardId": "shardId-000000000001", "startSequenceNumber": "4963...",
                          "endSequenceNumber": "4963...", "approximateArrivalOfFirstRecord": "2026-05-16T13:40:01Z",
                          "approximateArrivalOfLastRecord": "2026-05-16T13:40:02Z", "batchSize": 500,
                          "streamArn": "arn:aws:kinesis:eu-west-1:123456789012:stream/geo-ingest"}}

Messages come from the queue (``ReceiveMessage``: each kept invisible while it is redriven) or from a file of message
bodies (one, several back to back or one per line, or a JSON list: what ``aws sqs receive-message`` printed, its
``Messages[].Body`` included).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from georebal.archive import json_values
from georebal.deployment import client_error
from georebal.errors import DeploymentError, InputError

BATCH_INFO = "KinesisBatchInfo"


@dataclass(frozen=True)
class FailureMessage:
    """One failure message: the range it names and how to delete it (``receipt``: None for a file's)."""

    message_id: str
    stream: str
    shard_id: str
    start: str
    end: str
    batch_size: int | None = None
    first_arrival_s: float | None = None
    receipt: str | None = None

    @classmethod
    def parse(cls, body: Any, message_id: str, receipt: str | None = None) -> FailureMessage:
        """Read a message body (JSON text or the parsed object); :class:`InputError` naming ``message_id`` and the
        field that is missing or bad."""
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except json.JSONDecodeError as exc:
                raise InputError(f"message {message_id}: not JSON ({exc.msg}): {body[:80]!r}") from None
        info = body.get(BATCH_INFO) if isinstance(body, Mapping) else None
        if not isinstance(info, Mapping):
            raise InputError(f"message {message_id}: no {BATCH_INFO} object (not a Kinesis on-failure message): "
                             f"{json.dumps(body)[:120]!r}")

        def text(key: str) -> str:
            value = info.get(key)
            if not isinstance(value, str) or not value:
                raise InputError(f"message {message_id}: {BATCH_INFO}.{key} must be a non-empty string, got {value!r}")
            return value

        start, end, arn = text("startSequenceNumber"), text("endSequenceNumber"), text("streamArn")
        for key, value in (("startSequenceNumber", start), ("endSequenceNumber", end)):
            if not value.isdigit():
                raise InputError(f"message {message_id}: {BATCH_INFO}.{key} must be a sequence number, got {value!r}")
        if int(end) < int(start):
            raise InputError(f"message {message_id}: endSequenceNumber {end!r} is before startSequenceNumber {start!r}")
        if ":stream/" not in arn:
            raise InputError(f"message {message_id}: {BATCH_INFO}.streamArn is not a Kinesis stream ARN: {arn!r}")
        size = info.get("batchSize")
        return cls(message_id, arn.rsplit("/", 1)[-1], text("shardId"), start, end,
                   size if isinstance(size, int) and not isinstance(size, bool) else None,
                   _epoch(info.get("approximateArrivalOfFirstRecord")), receipt)

    @property
    def range(self) -> str:
        return f"{self.stream}/{self.shard_id} {self.start}..{self.end}"


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def from_file(path: Path) -> list[FailureMessage]:
    """The messages of a file (see the module docstring)."""
    try:
        stream = path.open("rb")
    except OSError as exc:
        raise InputError(f"--message {str(path)!r}: cannot read it ({exc.strerror})") from None
    out: list[FailureMessage] = []
    with stream:
        for value, _ in json_values(stream, f"--message {str(path)!r}"):
            out += list(_bodies(value, f"{path.name}#{len(out) + 1}"))
    if not out:
        raise InputError(f"--message {str(path)!r}: holds no message")
    return out


def _bodies(value: Any, name: str) -> Iterator[FailureMessage]:
    """The messages of one value: a body, a list of them, an SQS message (``Body``) or a ReceiveMessage answer."""
    if isinstance(value, list):
        for k, item in enumerate(value, start=1):
            yield from _bodies(item, f"{name}.{k}")
    elif isinstance(value, Mapping) and isinstance(value.get("Messages"), list):
        yield from _bodies(value["Messages"], name)
    elif isinstance(value, Mapping) and "Body" in value:
        yield FailureMessage.parse(value["Body"], str(value.get("MessageId") or name))
    else:
        yield FailureMessage.parse(value, name)


@dataclass(frozen=True)
class Unreadable:
    """A message of the queue that is not a failure message (kept; ``why`` names it)."""

    message_id: str
    why: str


def receive(sqs: Any, queue_url: str, *, visibility_s: int, wait_s: int) -> list[FailureMessage | Unreadable]:
    """Up to one message from the queue, kept invisible ``visibility_s`` seconds (empty: none came in ``wait_s``)."""
    try:
        answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, VisibilityTimeout=visibility_s,
                                     WaitTimeSeconds=wait_s)
    except ClientError as exc:
        raise DeploymentError(f"queue {queue_url!r}: cannot receive from it ({client_error(exc)})") from None
    out: list[FailureMessage | Unreadable] = []
    for m in answer.get("Messages", []):
        try:
            out.append(FailureMessage.parse(m.get("Body", ""), str(m.get("MessageId")), str(m.get("ReceiptHandle"))))
        except InputError as exc:
            out.append(Unreadable(str(m.get("MessageId")), str(exc)))
    return out


def delete(sqs: Any, queue_url: str, message: FailureMessage) -> None:
    try:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message.receipt)
    except ClientError as exc:
        raise DeploymentError(f"message {message.message_id}: redriven, but cannot be deleted from {queue_url!r} "
                              f"({client_error(exc)}): delete it by hand") from None
