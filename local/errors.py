"""The one exception base of the local loop: every error this package raises is a ``LocalRunError``."""

from __future__ import annotations


class LocalRunError(Exception):
    """Base of every exception raised by ``local``."""
