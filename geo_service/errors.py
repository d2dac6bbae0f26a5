"""The one exception base of the geo worker: every error this package raises is a ``GeoServiceError``."""

from __future__ import annotations


class GeoServiceError(Exception):
    """Base of every exception raised by ``geo_service``."""


class TransformError(GeoServiceError, ValueError):
    """A transform cannot be loaded or configured, or failed on an event; the message names the bad value."""
