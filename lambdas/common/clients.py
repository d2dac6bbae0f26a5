"""The boto3 clients a handler talks through, made once per process, and the error code of a failed call.

The adapters (:mod:`lambdas.common.dynamodb`, :mod:`lambdas.common.s3`, :mod:`lambdas.common.kinesis`,
:mod:`lambdas.common.ecs`) each wrap one of these clients. :func:`make_clients` points them at moto when
``AWS_ENDPOINT_URL`` is set.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from lambdas.common.config import LambdaConfig


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

    Clients are thread-safe and costly to build, so one set is made per (region, endpoint) and process.
    """
    return _clients(config.region, config.endpoint_url)


@functools.cache
def _clients(region: str, endpoint_url: str | None) -> Clients:
    cfg = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    kw: dict[str, Any] = {"region_name": region, "config": cfg}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    return Clients(s3=boto3.client("s3", **kw), dynamodb=boto3.client("dynamodb", **kw),
                   kinesis=boto3.client("kinesis", **kw), ecs=boto3.client("ecs", **kw))
