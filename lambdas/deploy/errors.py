"""The deploy controller's error (a :class:`~lambdas.runtime.errors.LambdaError`)."""

from __future__ import annotations

from lambdas.runtime.errors import LambdaError


class DeployError(LambdaError, RuntimeError):
    """The controller cannot proceed (e.g. a requested version has no spec); the message says why."""
