"""The one exception base of the CDK app: every error this package raises is a ``InfraError``."""

from __future__ import annotations


class InfraError(Exception):
    """Base of every exception raised by ``infra``."""


class ConfigError(InfraError, ValueError):
    """A context setting is missing its required shape; the message names the key and the bad value."""
