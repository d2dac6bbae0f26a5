"""The shared table of event times under every ``ts_unit`` (``ts_units.json``), for each reader's tests.

Run by the Python rules (``tests/geokernel/test_events.py``), the Spark job (``tests/glue_jobs/test_events.py``), the
router (``tests/lambdas/test_router.py``), the workers (``tests/geo_service/pipeline/test_records.py``) and
``partitioner counts`` (``tests/partitioner/commands/test_counts.py``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from geokernel.contracts.timestamps import TsUnit

_DOC = json.loads((Path(__file__).resolve().parent / "ts_units.json").read_text())
#: Every reader's clock (epoch ms) while the table runs.
NOW_MS: int = _DOC["now_ms"]
#: The window length the ``window`` of a valid case is the start of.
WINDOW_S: int = _DOC["window_s"]
_EVENT: dict[str, Any] = _DOC["event"]


class Expect(NamedTuple):
    """One case under one unit: the ``ts`` value, and either ``ms`` and ``window`` or a ``reason`` to contain."""

    case: str
    unit: TsUnit
    ts: Any
    ms: int | None
    window: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.case} [{self.unit}]"

    def event(self, n: int = 0, **extra: Any) -> dict[str, Any]:
        """The valid event around ``ts`` (``event_id`` suffixed with ``n``)."""
        return {**_EVENT, "event_id": f"{_EVENT['event_id']}-{n}", "ts": self.ts, **extra}

    def verdict(self, ms: int | None, reason: str | None) -> str | None:
        """None when a reader's outcome (its milliseconds, or its reason) is this one's, else what differs."""
        if self.ms is not None:
            return None if ms == self.ms else f"expected {self.ms} ms, got {ms!r} ({reason!r})"
        if ms is not None or reason is None:
            return f"expected bad_timestamp, got valid {ms!r}"
        ok = reason.startswith("bad_timestamp: ") and str(self.reason).lower() in reason.lower()
        return None if ok else f"expected a reason containing {self.reason!r}, got {reason!r}"


def window_start_ms(iso: str) -> int:
    """Epoch ms of a ``window`` text (``2024-12-07T12:20:00Z``)."""
    return (datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


#: Every (case, unit) of the table.
EXPECTS: tuple[Expect, ...] = tuple(
    Expect(c["case"], TsUnit(unit), c["ts"], e.get("ms"), e.get("window"), e.get("reason"))
    for c in _DOC["cases"] for unit, e in c["expect"].items())
#: The table's cases (one per ``ts`` value), with the units.
CASES: tuple[str, ...] = tuple(c["case"] for c in _DOC["cases"])
