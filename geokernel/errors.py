"""Exceptions raised by the partitioner library.

Every error the library raises derives from :class:`PartitionerError`, so callers
(the CLI, the Lambda handler) can catch one type and still show a message that
names the bad value and where it came from.
"""

from __future__ import annotations


class PartitionerError(Exception):
    """Base class of every error raised by :mod:`partitioner`."""


class InvalidQuadkeyError(PartitionerError, ValueError):
    """A quadkey string is not made of the digits 0-3 or is too long."""


class InvalidTileError(PartitionerError, ValueError):
    """A tile's x, y or zoom lies outside the web-mercator grid."""


class InvalidCoordinateError(PartitionerError, ValueError):
    """A longitude or latitude is not a finite number in range."""


class CountsError(PartitionerError, ValueError):
    """A counts file or counts mapping is malformed (bad row, weight, zoom, empty)."""


class SpecError(PartitionerError, ValueError):
    """A partition spec is malformed or fails validation."""


class BuildError(PartitionerError):
    """A spec cannot be built from the given load under the given settings."""


class PolicyError(PartitionerError, ValueError):
    """A rebalance policy is configured with invalid thresholds."""


class EventLogError(PartitionerError, ValueError):
    """An event log cannot be counted: unreadable file, missing column, bad row (naming file, line and value)."""
