"""The one exception base of Lambdas (partitioner, deploy, router): every error this package raises is a ``LambdaError``.

:class:`AdapterError` is the failure of any AWS adapter (:mod:`lambdas.common.dynamodb`, :mod:`lambdas.common.s3`,
:mod:`lambdas.common.kinesis`, :mod:`lambdas.common.ecs`), so a caller can handle "the AWS call failed" whichever
service it went to.
"""

from __future__ import annotations


class LambdaError(Exception):
    """Base of every exception raised by ``lambdas``."""


class AdapterError(LambdaError, RuntimeError):
    """An AWS call failed in a way the caller must handle; the message names the resource."""
