"""The one exception base of Lambdas (partitioner, deploy, router): every error this package raises is a ``LambdaError``.

:class:`AdapterError` is the failure of any AWS adapter (:mod:`lambdas.runtime.dynamodb`, :mod:`lambdas.runtime.s3`,
:mod:`lambdas.runtime.kinesis`, :mod:`lambdas.runtime.ecs`), so a caller can handle "the AWS call failed" whichever
service it went to.
"""

from __future__ import annotations


class LambdaError(Exception):
    """Base of every exception raised by ``lambdas``."""


class AdapterError(LambdaError, RuntimeError):
    """An AWS call failed in a way the caller must handle; the message names the resource."""
