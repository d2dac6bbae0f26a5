"""The in-process loops that stand in for AWS's event plumbing (not for the handlers).

* :class:`ManifestNotifier` is the S3 -> Lambda notification: it lists the snapshots
  bucket, and for each new ``_manifest.json`` calls the real partitioner handler with an
  ``ObjectCreated`` event. A handler exception is recorded and retried twice (Lambda's
  asynchronous-invocation retries), then given up, as in AWS.
* :class:`RouterPoller` is the Kinesis event source mapping: GetRecords on every shard of
  the ingest stream, batches of up to ``batch_size`` records to the real router handler, each
  invocation in one of several execution environments picked at random (:func:`lambda_environments`:
  Lambda runs a shard's invocations in whichever environment of the function is free, so what a handler
  caches in one environment can be stale in another); the shards are polled and invoked side by side, one
  thread each, as the event source mapping runs one invocation per shard at a time, the shards concurrently
  (https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html), and an environment runs one invocation at
  a time,
  and on ``batchItemFailures`` re-delivery from the first failed sequence number
  (``ReportBatchItemFailures`` semantics); a handler exception re-delivers the whole batch.
  Like an event source mapping with the default ``MaximumRetryAttempts=-1`` it retries
  until the batch succeeds (with a backoff up to 2 s), unless ``max_retries`` is set. It
  polls only while ``gate()`` is true (the local run opens it once a spec is active, so the
  records wait in the stream instead of failing in a loop before the first deployment).

Each loop runs in a thread (:class:`LoopThread`) and keeps counters the progress line
and the report read.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from geo_service.pipeline.consumer import KinesisRecord
from geokernel.contracts.snapshot import SNAPSHOTS_PREFIX, is_manifest_key
from local.aws import EmbeddedAws
from local.errors import LocalRunError
from local.events import LambdaContext, kinesis_batch, s3_object_created

Handler = Callable[[dict[str, Any], Any], Any]
#: Seconds between polls of the ingest stream while a shard gives full batches (2 GetRecords/s per shard: 40 % of
#: the shard's 5 calls/s, as the workers' readers).
BEHIND_POLL_S = 0.5


def load_handler(dotted: str) -> Handler:
    """Import ``package.module:function`` and return the function; explain what is missing if not."""
    module_name, _, attr = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RuntimeError(f"handler {dotted!r} is not importable: {exc}") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RuntimeError(f"handler {dotted!r}: module {module_name!r} has no callable {attr!r}")
    return _wrapped(fn, module)


def _wrapped(fn: Handler, module: ModuleType) -> Handler:
    """``fn``, clearing its module's Powertools metrics after each invocation when metrics are disabled."""
    metrics = getattr(module, "metrics", None)
    if isinstance(metrics, Metrics) and is_metrics_disabled():
        # With metrics disabled Powertools skips the flush but keeps the values, and at 100 values of one
        # metric prints them anyway (a raw EMF line on the console): drop them after every invocation.
        def run(event: Any, context: Any) -> Any:
            try:
                return fn(event, context)
            finally:
                metrics.clear_metrics()

        return run
    return fn


@dataclass(frozen=True)
class Environment:
    """One execution environment of a Lambda function: its own copy of the handler's module (globals, caches)."""

    name: str
    module: ModuleType
    handler: Handler


def lambda_environments(dotted: str, count: int) -> list[Environment]:
    """``count`` environments of the handler ``package.module:function``: the imported module, then fresh copies.

    A copy is the module's file executed again under the name ``<module>@env<i>`` (registered in ``sys.modules``,
    which dataclasses need): it shares the modules it imports, but its own globals (``functools.cache`` d builders,
    clients' caches, loggers) start empty, as in a new environment.
    """
    module_name, _, attr = dotted.partition(":")
    envs = [Environment(f"{module_name}@env0", importlib.import_module(module_name), load_handler(dotted))]
    for i in range(1, count):
        name = f"{module_name}@env{i}"
        spec = importlib.util.spec_from_file_location(name, envs[0].module.__file__)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"handler {dotted!r}: cannot load a second copy of {module_name!r}")
        copy = importlib.util.module_from_spec(spec)
        sys.modules[name] = copy
        spec.loader.exec_module(copy)
        envs.append(Environment(name, copy, _wrapped(getattr(copy, attr), copy)))
    return envs


class LoopThread(threading.Thread):
    """A daemon thread calling :meth:`step` every ``interval_s`` until :meth:`stop`.

    An exception in ``step`` is recorded in ``errors`` (with traceback) and the loop
    goes on; ``fatal`` errors (raised as :class:`FatalLoopError`) end it.
    """

    def __init__(self, name: str, interval_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.interval_s = interval_s
        self._stop_event = threading.Event()
        self.errors: list[str] = []
        self.fatal: str | None = None
        self.next_wait_s: float | None = None  # a step may set a shorter wait before the next step

    def stop(self) -> None:
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.step()
            except FatalLoopError as exc:
                self.fatal = str(exc)
                return
            except Exception:  # a loop must survive a bad step; the report shows every error
                self.errors.append(traceback.format_exc(limit=6))
            self._stop_event.wait(self.interval_s if self.next_wait_s is None else self.next_wait_s)

    def step(self) -> None:
        raise NotImplementedError


class FatalLoopError(LocalRunError, RuntimeError):
    """Raised by a loop step when the loop cannot go on (the run fails)."""


@dataclass
class Invocation:
    """One partitioner invocation: which manifest, when, and what the handler returned."""

    key: str
    at: float
    result: Any = None
    error: str | None = None
    attempts: int = 1


class ManifestNotifier(LoopThread):
    """S3 ObjectCreated notifications for snapshot manifests -> the partitioner handler."""

    def __init__(self, aws: EmbeddedAws, handler: Handler, interval_s: float = 1.0, retries: int = 2,
                 on_invocation: Callable[[Invocation], None] | None = None) -> None:
        super().__init__("s3-notify", interval_s)
        self.aws = aws
        self.handler = handler
        self.retries = retries
        self.seen: set[str] = set()
        self.invocations: list[Invocation] = []
        self.on_invocation = on_invocation
        self._s3 = aws.client("s3")

    def step(self) -> None:
        bucket = self.aws.names.snapshots_bucket
        for obj in _list_objects(self._s3, bucket, SNAPSHOTS_PREFIX):
            key = obj["Key"]
            if not is_manifest_key(key) or key in self.seen:
                continue
            self.seen.add(key)
            event = s3_object_created(bucket, key, int(obj["Size"]), str(obj.get("ETag", "")))
            inv = Invocation(key=key, at=time.time())
            for attempt in range(1, self.retries + 2):
                inv.attempts = attempt
                try:
                    inv.result = self.handler(event, LambdaContext("georebal-partitioner"))
                    inv.error = None
                    break
                except Exception as exc:  # Lambda records the error and retries async invocations
                    inv.error = f"{type(exc).__name__}: {exc}"
            self.invocations.append(inv)
            if self.on_invocation is not None:
                self.on_invocation(inv)


def _list_objects(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.extend(page.get("Contents", []))
    return out


@dataclass
class ShardCursor:
    """Where the poller is in one shard, and records held back for re-delivery."""

    shard_id: str
    iterator: str | None
    pending: list[KinesisRecord] = field(default_factory=list)
    retries: int = 0
    behind_ms: int = -1
    retry_at: float = 0.0


class RouterPoller(LoopThread):
    """Kinesis event source mapping for the ingest stream -> the router handler."""

    def __init__(self, aws: EmbeddedAws, environments: Sequence[Environment], batch_size: int = 500,
                 interval_s: float = 0.5, max_retries: int | None = None, gate: Callable[[], bool] = lambda: True,
                 seed: int = 0) -> None:
        super().__init__("router-esm", interval_s)
        self.aws = aws
        self.environments = list(environments)
        self._pick = random.Random(seed)
        self.gate = gate
        self.batch_size = batch_size
        self.max_retries = max_retries
        self._kinesis = aws.client("kinesis")
        stream = aws.names.ingest_stream
        desc = self._kinesis.describe_stream(StreamName=stream)["StreamDescription"]
        self.stream_arn: str = desc["StreamARN"]
        self.cursors = [ShardCursor(s["ShardId"], self._kinesis.get_shard_iterator(
            StreamName=stream, ShardId=s["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"])
            for s in desc["Shards"]]
        self.records_in = 0
        self.invocations = 0
        self.failed_items = 0
        self.gave_up = 0
        self._counts = threading.Lock()
        self._free = threading.Condition()
        self._idle = list(range(len(self.environments)))  # environments not running an invocation
        self._shards = ThreadPoolExecutor(len(self.cursors), thread_name_prefix="router-shard") \
            if len(self.cursors) > 1 else None

    def run(self) -> None:
        try:
            super().run()
        finally:  # after the last step (a stop() during a step lets it finish on the pool)
            if self._shards is not None:
                self._shards.shutdown(wait=False)

    def step(self) -> None:
        """One poll of every shard. After a full batch the next poll comes after :data:`BEHIND_POLL_S`, not the
        batching window: the event source mapping invokes as soon as it has a full batch, and waits the window only
        to fill one
        (https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html#invocation-eventsourcemapping-batching)."""
        self.next_wait_s = None
        if not self.gate():
            return
        if self._shards is None:
            self._poll(self.cursors[0])
        else:  # every shard's poll and invocation side by side; an error in one is raised here after all ran
            list(self._shards.map(self._poll, self.cursors))

    def idle(self) -> bool:
        """True when nothing is held back for re-delivery and the last reads were empty."""
        return all(not c.pending and c.behind_ms == 0 for c in self.cursors)

    def _poll(self, cursor: ShardCursor) -> None:
        if cursor.pending and time.time() < cursor.retry_at:
            return
        if not cursor.pending and cursor.iterator is not None:
            resp = self._kinesis.get_records(ShardIterator=cursor.iterator, Limit=self.batch_size)
            cursor.iterator = resp.get("NextShardIterator")
            cursor.behind_ms = int(resp.get("MillisBehindLatest", 0))
            cursor.pending = [KinesisRecord.from_get_records(cursor.shard_id, r) for r in resp["Records"]]
            with self._counts:
                self.records_in += len(cursor.pending)
            if len(cursor.pending) >= self.batch_size:
                self.next_wait_s = min(self.interval_s, BEHIND_POLL_S)
        if not cursor.pending:
            return
        with self._counts:
            self.invocations += 1
        env = self._take_environment()
        try:
            result = env.handler(kinesis_batch(self.stream_arn, cursor.pending), LambdaContext("georebal-router"))
            failures = [f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])]
        except Exception:  # Lambda: a raised error fails (and re-delivers) the whole batch
            self.errors.append(traceback.format_exc(limit=6))
            failures = [cursor.pending[0].sequence_number]
        finally:
            self._give_back(env)
        if not failures:
            cursor.pending, cursor.retries = [], 0
            return
        with self._counts:
            self.failed_items += len(failures)
        cursor.retries += 1
        cursor.retry_at = time.time() + min(2.0, 0.1 * 2 ** min(cursor.retries, 5))
        if self.max_retries is not None and cursor.retries > self.max_retries:
            with self._counts:
                self.gave_up += len(cursor.pending)
            self.errors.append(f"router: gave up on {len(cursor.pending)} records of {cursor.shard_id} after "
                               f"{self.max_retries} retries (first failure {failures[0]!r})")
            cursor.pending, cursor.retries = [], 0
            return
        first = min(failures, key=int)
        cursor.pending = [r for r in cursor.pending if int(r.sequence_number) >= int(first)]

    def _take_environment(self) -> Environment:
        """An environment no invocation is running in, picked at random (waits while every one is busy)."""
        with self._free:
            self._free.wait_for(lambda: bool(self._idle))
            i = self._pick.choice(sorted(self._idle))
            self._idle.remove(i)
            return self.environments[i]

    def _give_back(self, env: Environment) -> None:
        with self._free:
            self._idle.append(self.environments.index(env))
            self._free.notify()
