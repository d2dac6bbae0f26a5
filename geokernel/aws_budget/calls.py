"""Count AWS calls as they happen: a thread-safe log of usage per quota row, scope and second, fed by botocore hooks.

:func:`watch` registers on a client's (or a botocore session's) event system; every call that reaches AWS (or the
local stand-in) is recorded after it returns or fails, retries included (``1 + RetryAttempts`` attempts). The log
needs no boto3: it only talks to the ``register`` method of a botocore event emitter.

Notes
-----
* ``provide-client-params`` carries the caller's parameters (before serialisation); they are kept in the request
  context, with the time the call was made, so that ``after-call`` can read both the parameters and the parsed
  response and record the call in the second it was sent (a slow answer would otherwise move it).
  https://boto3.amazonaws.com/v1/documentation/api/latest/guide/events.html
* A log is per process; :meth:`CallLog.to_json` and :meth:`CallLog.merge` combine the logs of several processes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from geokernel.aws_budget.quotas import BudgetError
from geokernel.aws_budget.usage import ACCOUNT, IteratorMap, Usage, usages

_PARAMS = "aws_budget_params"
_SENT_AT = "aws_budget_sent_at"
_MODEL = "aws_budget_model"


class _Emitter(Protocol):
    def register(self, event_name: str, handler: Callable[..., Any], unique_id: str | None = None) -> None: ...


@dataclass(frozen=True)
class Series:
    """The usage of one quota row in one scope, per whole second (``seconds[t]`` = amount in ``[t, t+1)``)."""

    key: str
    scope: str
    seconds: dict[int, float]


class CallLog:
    """Usage per quota row, scope and second; ``clock`` gives the time a call is recorded at (seconds)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._usage: dict[tuple[str, str], dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.iterators = IteratorMap()

    def add(self, items: Iterable[Usage], at: float | None = None, times: float = 1.0) -> None:
        """Record ``items`` at time ``at`` (default now), each ``times`` over (attempts of one call)."""
        second = int(self._clock() if at is None else at)
        with self._lock:
            for u in items:
                self._usage[(u.key, u.scope)][second] += u.amount * times

    def now(self) -> float:
        return self._clock()

    def record_call(self, service: str, op: str, params: dict[str, Any], response: dict[str, Any],
                    attempts: int = 1, at: float | None = None) -> None:
        """Record one call made at ``at`` (when it was sent: AWS counts a request when it arrives, so a slow
        answer must not move it into the next second)."""
        with self._lock:
            found = usages(service, op, params, response, self.iterators)
        self.add(found, at=at, times=float(attempts))
        if attempts > 1:  # each retry is a call against the quota too; the row says how many of them were retries
            self.add([Usage(f"retries.{service}.{op}", ACCOUNT, float(attempts - 1))], at=at)

    def series(self) -> list[Series]:
        with self._lock:
            return [Series(k, s, dict(v)) for (k, s), v in sorted(self._usage.items())]

    def merge(self, other: CallLog | dict[str, Any]) -> None:
        """Add another log (or its :meth:`to_json` form) into this one."""
        rows = other.series() if isinstance(other, CallLog) else _series_from_json(other)
        with self._lock:
            for row in rows:
                for second, amount in row.seconds.items():
                    self._usage[(row.key, row.scope)][second] += amount

    def to_json(self) -> dict[str, Any]:
        return {"series": [{"key": r.key, "scope": r.scope, "seconds": {str(t): a for t, a in r.seconds.items()}}
                           for r in self.series()]}

    def dump(self, path: str) -> None:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(self.to_json()))
        tmp.replace(path)


def _series_from_json(data: dict[str, Any]) -> list[Series]:
    try:
        return [Series(str(r["key"]), str(r["scope"]), {int(t): float(a) for t, a in r["seconds"].items()})
                for r in data["series"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BudgetError(f"not a call log: {str(data)[:80]!r} ({exc})") from exc


def watch(events: _Emitter, log: CallLog) -> None:
    """Record every call made through ``events`` (a client's ``meta.events`` or a botocore session's emitter;
    clients created from a session afterwards inherit it) into ``log``."""

    def keep_params(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS] = dict(params)
        context[_SENT_AT] = log.now()
        context[_MODEL] = model

    def after(http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        attempts = 1 + int((parsed.get("ResponseMetadata") or {}).get("RetryAttempts", 0) or 0)
        log.record_call(_service(model), model.name, context.get(_PARAMS, {}), parsed, attempts,
                        context.get(_SENT_AT))

    def failed(exception: Exception, context: dict[str, Any], **_: Any) -> None:
        # botocore emits after-call-error with the exception and the request context only, no operation model
        # (botocore/client.py BaseClient._make_request): the model comes from the context keep_params filled
        model = context.get(_MODEL)
        if model is not None:
            log.record_call(_service(model), model.name, context.get(_PARAMS, {}), {}, 1, context.get(_SENT_AT))

    events.register("provide-client-params", keep_params, unique_id="aws-budget-params")
    events.register("after-call", after, unique_id="aws-budget-after")
    events.register("after-call-error", failed, unique_id="aws-budget-error")


def _service(model: Any) -> str:
    """botocore's lower-case service name ("kinesis", "dynamodb", "s3", "ecs")."""
    return str(model.service_model.service_name)
