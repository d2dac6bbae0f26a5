"""A slot's output buffer: processed rows not yet written, and the checkpoint they reach (:mod:`geo_service.serving.batches`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Default flush age and size of a slot's output buffer (``OUTPUT_FLUSH_S``, ``OUTPUT_FLUSH_BYTES``): at 1,000
#: events/s a worker writes one object every 10 s (0.1 PUT/s), a few MB, which a lifecycle rule can tier.
FLUSH_S = 10.0
FLUSH_BYTES = 8 * 1024 * 1024


@dataclass
class OutputBuffer:
    """A slot's processed but unwritten output: JSON lines, quarantine records and the checkpoint they reach."""

    lines: list[str] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, str] = field(default_factory=dict)  # shard id -> sequence number reached
    #: PutEvents entries of the rows' geofence transitions, put after the rows are written
    #: (:mod:`geo_service.pipeline.geofence_events`)
    pushes: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0
    since: float | None = None  # monotonic time of the oldest buffered record

    @property
    def empty(self) -> bool:
        return self.since is None

    def due_in(self, now: float, flush_s: float) -> float:
        """Seconds until the oldest buffered record is ``flush_s`` old (infinite when empty)."""
        return float("inf") if self.since is None else max(0.0, self.since + flush_s - now)

    def due(self, now: float, flush_s: float, flush_bytes: int) -> bool:
        """True when the oldest buffered record is ``flush_s`` old or the buffer holds ``flush_bytes``."""
        return self.since is not None and (now - self.since >= flush_s or self.bytes >= flush_bytes)
