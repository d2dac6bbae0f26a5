"""The in-process loops that stand in for AWS's event plumbing (not for the handlers).

* :class:`ObjectCreatedNotifier` is an S3 -> Lambda notification of the stack (bucket, prefix and suffix from the
  synthesized template: :class:`local.wiring.stack_wiring.Notification`): it lists the bucket, and for each new key
  the filter matches calls the real handler with an ``ObjectCreated`` event, as its part
  (:func:`local.iam.principals.acting_as`). A handler exception is recorded and retried as often as the stack's
  asynchronous invocation config allows (Lambda's default: twice), then given up, as in AWS.
* :func:`lambda_environments` makes a handler's execution environments; the Kinesis event source mapping that
  invokes the router in them is :class:`local.event_source.EventSourceMapping`.

Each loop runs in a thread (:class:`LoopThread`) and keeps counters the progress line
and the report read.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from local.aws import EmbeddedAws
from local.errors import LocalRunError
from local.events import LambdaContext, s3_object_created
from local.iam.principals import acting_as
from local.wiring.stack_wiring import Notification

Handler = Callable[[dict[str, Any], Any], Any]


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


class ObjectCreatedNotifier(LoopThread):
    """One S3 ObjectCreated notification of the stack -> its part's handler (see the module docstring)."""

    def __init__(self, aws: EmbeddedAws, notification: Notification, handler: Handler, retries: int,
                 interval_s: float = 1.0, on_invocation: Callable[[Invocation], None] | None = None) -> None:
        super().__init__(f"s3-notify-{notification.component}", interval_s)
        self.aws = aws
        self.notification = notification
        self.handler = handler
        self.retries = retries
        self.seen: set[str] = set()
        self.invocations: list[Invocation] = []
        self.on_invocation = on_invocation
        self._s3 = aws.client("s3")

    def step(self) -> None:
        bucket = self.notification.bucket
        for obj in _list_objects(self._s3, bucket, self.notification.prefix):
            key = obj["Key"]
            if not self.notification.matches(key) or key in self.seen:
                continue
            self.seen.add(key)
            event = s3_object_created(bucket, key, int(obj["Size"]), str(obj.get("ETag", "")))
            inv = Invocation(key=key, at=time.time())
            for attempt in range(1, self.retries + 2):
                inv.attempts = attempt
                try:
                    with acting_as(self.notification.component):
                        inv.result = self.handler(event, LambdaContext(f"georebal-{self.notification.component}"))
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
