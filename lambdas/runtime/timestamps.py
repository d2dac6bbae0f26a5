"""The timestamp format of control items and records the Lambdas write (``published_at``, ``flipped_at``, ...)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_iso(ts: float | None = None) -> str:
    """Return an ISO-8601 UTC timestamp with a ``Z`` suffix (of epoch seconds ``ts``; default: now)."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
