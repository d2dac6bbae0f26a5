"""The stack's Kinesis event source mapping, played in the twin with the settings the template gives it.

:class:`EventSourceMapping` stands in for Lambda's poller of the ingest stream
(https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html), configured by the synthesized template's
``AWS::Lambda::EventSourceMapping`` (:class:`~local.wiring.stack_wiring.EventSource`), never by settings of its own:

* the starting position (``TRIM_HORIZON`` reads each shard from its oldest record, ``LATEST`` from the records put
  after the mapping started), the batch size and the batching window (a poll every half window; after a full batch
  the next one at once: Lambda invokes as soon as it has a full batch);
* one invocation per shard at a time, the shards side by side, each in one of the function's execution environments
  picked at random (:func:`local.loops.lambda_environments`), an environment running one invocation at a time;
* ``ReportBatchItemFailures``: re-delivery from the first failed sequence number; a raised error re-delivers the
  whole batch, or with ``BisectBatchOnFunctionError`` its first half, then the second;
* ``MaximumRetryAttempts`` and ``MaximumRecordAgeInSeconds`` (-1: infinite, failed records are retried until they
  expire; https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-parameters.html): a batch that used up its
  retries, or records older than the age, are discarded, and the batch's shard and sequence range is sent to the
  on-failure destination (an SQS queue; the record's shape:
  https://docs.aws.amazon.com/lambda/latest/dg/kinesis-on-failure-destination.html). :attr:`gave_up` counts the
  records discarded: each one is an event the system lost.

It reads the stream and writes to the destination as the function's role does in AWS (its own client, signed with
the router's keys and not counted with the parts' calls), and runs each invocation as the router
(:func:`local.iam.principals.acting_as`). Failed retries wait a backoff (0.1 s doubling to 2 s).
"""

from __future__ import annotations

import json
import random
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config

from geo_service.pipeline.consumer import KinesisRecord
from local.aws import REGION, EmbeddedAws
from local.events import LambdaContext, kinesis_batch
from local.iam.principals import Principal, acting_as
from local.loops import Environment, LoopThread
from local.wiring.stack_wiring import EventSource

#: Seconds between polls of a shard that gave a full batch (2 GetRecords/s per shard: 40 % of its 5 calls/s).
BEHIND_POLL_S = 0.5


@dataclass
class ShardCursor:
    """Where the mapping is in one shard: the batch being retried, the records after it, the retries so far."""

    shard_id: str
    iterator: str | None
    pending: list[KinesisRecord] = field(default_factory=list)
    later: list[KinesisRecord] = field(default_factory=list)  # read, after a bisected half
    retries: int = 0
    behind_ms: int = -1
    retry_at: float = 0.0


class EventSourceMapping(LoopThread):
    """See the module docstring. ``role``: the keys it reads and writes the destination with (None: the harness's)."""

    def __init__(self, aws: EmbeddedAws, environments: Sequence[Environment], source: EventSource,
                 role: Principal | None = None, seed: int = 0) -> None:
        super().__init__("router-esm", max(0.05, source.max_batching_window_s / 2))
        self.aws, self.source = aws, source
        self.environments = list(environments)
        self._pick = random.Random(seed)
        self._kinesis = self._client("kinesis", role)
        self._sqs = self._client("sqs", role) if source.on_failure else None
        desc = self._kinesis.describe_stream(StreamName=source.stream)["StreamDescription"]
        self.stream_arn: str = desc["StreamARN"]
        self.cursors = [ShardCursor(s["ShardId"], self._kinesis.get_shard_iterator(
            StreamName=source.stream, ShardId=s["ShardId"], ShardIteratorType=source.starting_position)["ShardIterator"])
            for s in desc["Shards"]]
        self.records_in = self.invocations = self.failed_items = self.gave_up = 0
        self.discarded: list[dict[str, Any]] = []  # the on-failure records sent (or that would have been)
        self._counts = threading.Lock()
        self._free = threading.Condition()
        self._idle = list(range(len(self.environments)))
        self._shards = ThreadPoolExecutor(len(self.cursors), thread_name_prefix="router-shard") \
            if len(self.cursors) > 1 else None

    def _client(self, service: str, role: Principal | None) -> Any:
        if role is None:
            return self.aws.client(service)
        session = boto3.session.Session(aws_access_key_id=role.access_key, aws_secret_access_key=role.secret_key,
                                        aws_session_token=role.token, region_name=REGION)
        return session.client(service, endpoint_url=self.aws.endpoint_url,
                              config=Config(retries={"max_attempts": 5, "mode": "standard"}))

    @property
    def batch_size(self) -> int:
        return self.source.batch_size

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self._shards is not None:
                self._shards.shutdown(wait=False)

    def step(self) -> None:
        """One poll of every shard, side by side."""
        self.next_wait_s = None
        if self._shards is None:
            self._poll(self.cursors[0])
        else:
            list(self._shards.map(self._poll, self.cursors))

    def idle(self) -> bool:
        """True when nothing is held back for re-delivery and the last reads were empty."""
        return all(not c.pending and not c.later and c.behind_ms == 0 for c in self.cursors)

    def _read(self, cursor: ShardCursor) -> None:
        if cursor.later:
            cursor.pending, cursor.later = cursor.later, []
            return
        if cursor.iterator is None:
            return
        resp = self._kinesis.get_records(ShardIterator=cursor.iterator, Limit=self.source.batch_size)
        cursor.iterator = resp.get("NextShardIterator")
        cursor.behind_ms = int(resp.get("MillisBehindLatest", 0))
        cursor.pending = [KinesisRecord.from_get_records(cursor.shard_id, r) for r in resp["Records"]]
        with self._counts:
            self.records_in += len(cursor.pending)
        if len(cursor.pending) >= self.source.batch_size:
            self.next_wait_s = min(self.interval_s, BEHIND_POLL_S)

    def _poll(self, cursor: ShardCursor) -> None:
        if cursor.pending and time.time() < cursor.retry_at:
            return
        if not cursor.pending:
            self._read(cursor)
        self._expire(cursor)
        if not cursor.pending:
            return
        failures = self._invoke(cursor)
        if not failures:
            cursor.pending, cursor.retries = [], 0
            return
        with self._counts:
            self.failed_items += len(failures)
        cursor.retries += 1
        cursor.retry_at = time.time() + min(2.0, 0.1 * 2 ** min(cursor.retries, 5))
        if 0 <= self.source.max_retry_attempts < cursor.retries:
            self._discard(cursor, cursor.pending, f"retry attempts exhausted ({self.source.max_retry_attempts})")
            cursor.pending, cursor.retries = [], 0
            return
        first = min(failures, key=int)
        cursor.pending = [r for r in cursor.pending if int(r.sequence_number) >= int(first)]

    def _invoke(self, cursor: ShardCursor) -> list[str]:
        """Invoke the function with the shard's batch; the sequence numbers to re-deliver from (empty: done)."""
        with self._counts:
            self.invocations += 1
        env = self._take_environment()
        try:
            with acting_as(self.source.component):
                result = env.handler(kinesis_batch(self.stream_arn, cursor.pending), LambdaContext("georebal-router"))
            if not self.source.report_batch_item_failures:
                return []
            return [f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])]
        except Exception:  # Lambda: a raised error fails (and re-delivers) the whole batch, or its first half
            self.errors.append(traceback.format_exc(limit=6))
            if self.source.bisect_on_error and len(cursor.pending) > 1:
                half = len(cursor.pending) // 2
                cursor.later = cursor.pending[half:] + cursor.later
                cursor.pending = cursor.pending[:half]
            return [cursor.pending[0].sequence_number]
        finally:
            self._give_back(env)

    def _expire(self, cursor: ShardCursor) -> None:
        """Discard the records older than ``MaximumRecordAgeInSeconds`` (never with -1)."""
        if self.source.max_record_age_s < 0 or not cursor.pending:
            return
        cutoff = time.time() - self.source.max_record_age_s
        old = [r for r in cursor.pending if 0 < r.arrival_s < cutoff]
        if old:
            self._discard(cursor, old, f"older than {self.source.max_record_age_s}s")
            cursor.pending = [r for r in cursor.pending if r not in old]

    def _discard(self, cursor: ShardCursor, records: list[KinesisRecord], why: str) -> None:
        """Discard ``records`` and send their range to the on-failure destination, as Lambda does."""
        with self._counts:
            self.gave_up += len(records)
        self.errors.append(f"router event source: discarded {len(records)} records of {cursor.shard_id} ({why}; "
                           f"first {records[0].sequence_number!r}): the events are lost")
        record = on_failure_record(self.stream_arn, cursor.shard_id, records, why, cursor.retries)
        self.discarded.append(record)
        if self._sqs is not None and self.source.on_failure:
            name = self.source.on_failure.rsplit(":", 1)[-1]
            url = f"{self.aws.endpoint_url}/{self.source.on_failure.split(':')[4]}/{name}"
            self._sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))

    def _take_environment(self) -> Environment:
        with self._free:
            self._free.wait_for(lambda: bool(self._idle))
            i = self._pick.choice(sorted(self._idle))
            self._idle.remove(i)
            return self.environments[i]

    def _give_back(self, env: Environment) -> None:
        with self._free:
            self._idle.append(self.environments.index(env))
            self._free.notify()


def _iso(seconds: float) -> str | None:
    return None if seconds <= 0 else datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def on_failure_record(stream_arn: str, shard_id: str, records: Sequence[KinesisRecord], why: str,
                      retries: int) -> dict[str, Any]:
    """The message Lambda sends to a Kinesis mapping's on-failure destination: the batch's shard and sequence range,
    not its records (https://docs.aws.amazon.com/lambda/latest/dg/kinesis-on-failure-destination.html)."""
    return {"requestContext": {"condition": "RetryAttemptsExhausted" if "retry" in why else "RecordAgeExceeded",
                               "approximateInvokeCount": retries + 1},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0", "timestamp": _iso(time.time()),
            "KinesisBatchInfo": {"shardId": shard_id, "startSequenceNumber": records[0].sequence_number,
                                 "endSequenceNumber": records[-1].sequence_number,
                                 "approximateArrivalOfFirstRecord": _iso(records[0].arrival_s),
                                 "approximateArrivalOfLastRecord": _iso(records[-1].arrival_s),
                                 "batchSize": len(records), "streamArn": stream_arn}}
