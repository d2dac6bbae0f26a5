"""The one exception base of Lambdas (partitioner, deploy, router): every error this package raises is a ``LambdaError``."""

from __future__ import annotations


class LambdaError(Exception):
    """Base of every exception raised by ``lambdas``."""
