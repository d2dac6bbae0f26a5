"""The one exception base of the CDK app: every error this package raises is a ``InfraError``."""

from __future__ import annotations


class InfraError(Exception):
    """Base of every exception raised by ``infra``."""
