"""The boto3 clients a handler talks through, made once per process, and the error code of a failed call.

The adapters (:mod:`lambdas.runtime.dynamodb`, :mod:`lambdas.runtime.s3`, :mod:`lambdas.runtime.kinesis`,
:mod:`lambdas.runtime.ecs`) each wrap one of these clients. :func:`make_clients` points them at moto when
``AWS_ENDPOINT_URL`` is set.

**A call never outlasts the function.** Its worst case is every attempt waiting out its connect and read timeouts,
plus the longest backoff before each retry (:meth:`ClientLimits.worst_case_s`). botocore's standard retry mode
sleeps ``rand(0, 1) * min(2 ** (attempt - 1), 20)`` seconds after a throttle, up to 5 s more when the answer
carries ``x-amz-retry-after`` (``botocore/retries/standard.py``: ``ExponentialBackoff``), and ``total_max_attempts``
counts the first call (``max_attempts`` would count retries only: ``botocore/config.py``). The stack gives each
function its own timeout (``FUNCTION_TIMEOUT_S``, ``infra/functions.py``); :func:`client_limits` fits a call's
worst case in it with :data:`REPORT_MARGIN_S` left to log, put metrics and answer (a batch's item failures, a
hook status) before Lambda stops the invocation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from lambdas.runtime.config import ConfigError, LambdaConfig

TOTAL_ATTEMPTS = 3  # the first call and two retries: the standard retry mode's default
CONNECT_TIMEOUT_S = 2.0  # an AWS endpoint in the region answers a TCP + TLS handshake in milliseconds
MAX_READ_TIMEOUT_S = 30.0  # a response (or its next bytes) later than this is a failure, whatever the budget
MIN_READ_TIMEOUT_S = 3.0  # below this a slow but healthy S3 GET of a spec would fail: refuse such a timeout
REPORT_MARGIN_S = 10.0  # left after a call's worst case: log, metrics, the answer (module docstring)
MAX_BACKOFF_S = 20.0  # botocore standard mode: the longest sleep before a retry
RETRY_AFTER_EXTRA_S = 5.0  # botocore standard mode: what an x-amz-retry-after header may add to a sleep


@dataclass(frozen=True)
class ClientLimits:
    """How long one call may take: per-attempt timeouts and the number of attempts (the first included)."""

    connect_timeout_s: float
    read_timeout_s: float
    total_attempts: int

    def worst_case_s(self) -> float:
        """Seconds one call may last: every attempt times out connecting and reading, and every retry waits the
        longest backoff first (see the module docstring)."""
        backoffs = sum(min(2.0 ** (retry - 1), MAX_BACKOFF_S) + RETRY_AFTER_EXTRA_S
                       for retry in range(1, self.total_attempts))
        return self.total_attempts * (self.connect_timeout_s + self.read_timeout_s) + backoffs

    def config(self) -> Config:
        return Config(retries={"total_max_attempts": self.total_attempts, "mode": "standard"},
                      connect_timeout=self.connect_timeout_s, read_timeout=self.read_timeout_s)


def client_limits(function_timeout_s: float, total_attempts: int = TOTAL_ATTEMPTS) -> ClientLimits:
    """The longest read timeout (at most :data:`MAX_READ_TIMEOUT_S`) whose worst case leaves :data:`REPORT_MARGIN_S`
    of a function timing out after ``function_timeout_s``; ConfigError when even :data:`MIN_READ_TIMEOUT_S` would
    not."""
    backoffs = ClientLimits(0.0, 0.0, total_attempts).worst_case_s()
    per_attempt = (function_timeout_s - REPORT_MARGIN_S - backoffs) / total_attempts
    read = min(MAX_READ_TIMEOUT_S, math.floor((per_attempt - CONNECT_TIMEOUT_S) * 10) / 10)
    if read < MIN_READ_TIMEOUT_S:
        raise ConfigError(f"a function timeout of {function_timeout_s!r} s leaves {total_attempts} attempts a read "
                          f"timeout of {read!r} s (at least {MIN_READ_TIMEOUT_S} s): raise the timeout")
    return ClientLimits(CONNECT_TIMEOUT_S, read, total_attempts)


def error_code(exc: ClientError) -> str:
    """The AWS error code of a failed call (``""`` when the response names none)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True)
class Clients:
    """The boto3 clients a handler uses (made once per module)."""

    s3: Any
    dynamodb: Any
    kinesis: Any
    ecs: Any


def make_clients(config: LambdaConfig) -> Clients:
    """Return boto3 clients for ``config`` (moto when ``endpoint_url`` is set).

    Clients are thread-safe and costly to build, so one set is made per (region, endpoint, timeout) and process;
    their limits fit the function's timeout (:func:`client_limits`).
    """
    return _clients(config.region, config.endpoint_url, config.function_timeout_s)


@functools.cache
def _clients(region: str, endpoint_url: str | None, function_timeout_s: float) -> Clients:
    kw: dict[str, Any] = {"region_name": region, "config": client_limits(function_timeout_s).config()}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    return Clients(s3=boto3.client("s3", **kw), dynamodb=boto3.client("dynamodb", **kw),
                   kinesis=boto3.client("kinesis", **kw), ecs=boto3.client("ecs", **kw))
