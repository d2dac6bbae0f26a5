"""The one exception base of the aggregation job: every error this package raises is an ``AggregationError``."""

from __future__ import annotations


class AggregationError(Exception):
    """Base of every exception raised by ``aggregation``."""
