"""The one exception base of ``georebal``: every error it raises is a :class:`GeorebalError`, printed by the CLI as
one line ``error: <message naming the value and where it came from>`` (exit 2)."""

from __future__ import annotations


class GeorebalError(Exception):
    """Base of every exception raised by :mod:`georebal`."""


class SettingsError(GeorebalError, ValueError):
    """The deployment's settings cannot be read: cdk.json, a ``-c key=value`` or a command-line option."""


class AwsError(GeorebalError):
    """No AWS session can be made (no region, an unknown profile)."""


class SmokeError(GeorebalError):
    """The smoke run cannot start or go on: a tool, the CDK bootstrap or a stack output is missing."""


class DeploymentError(GeorebalError):
    """A deployment's resource cannot be found or read: its stack or an output, the active spec, a table, a stream."""


class InputError(GeorebalError, ValueError):
    """A file, an archive or a failure message given to a command is not what it must be (names it and the record)."""


class PutError(GeorebalError):
    """Records could not be put to a stream after the retries (names the stream, how many and the error codes)."""
