"""A slot's output buffer: processed rows not yet written, by event hour, and the checkpoint they reach
(:mod:`geo_service.serving.batches`: a flush writes one object per event hour, ``geokernel.contracts.enriched``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from geokernel.contracts.enriched import event_hour

#: Default flush age and size of a slot's output buffer (``OUTPUT_FLUSH_S``, ``OUTPUT_FLUSH_BYTES``): at 1,000
#: events/s a worker writes one object every 10 s (0.1 PUT/s), a few MB, which a lifecycle rule can tier.
FLUSH_S = 10.0
FLUSH_BYTES = 8 * 1024 * 1024


@dataclass
class OutputBuffer:
    """A slot's processed but unwritten output: JSON lines per event hour, quarantine records and the checkpoint they
    reach."""

    #: event hour (its start, epoch ms: ``geokernel.contracts.enriched.event_hour``) -> the JSON lines of its events
    hours: dict[int, list[str]] = field(default_factory=dict)
    rows: int = 0
    bad: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, str] = field(default_factory=dict)  # shard id -> sequence number reached
    #: PutEvents entries of the rows' geofence transitions, put after the rows are written
    #: (:mod:`geo_service.pipeline.geofence_events`)
    pushes: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0
    since: float | None = None  # monotonic time of the oldest buffered record

    def add(self, line: str, event_ms: int) -> None:
        """Buffer one record's JSON line under the hour of its event's time ``event_ms``."""
        self.hours.setdefault(event_hour(event_ms), []).append(line)
        self.rows += 1
        self.bytes += len(line) + 1

    def add_hour(self, hour_ms: int, lines: list[str]) -> None:
        """Buffer the JSON lines of events of the hour starting at ``hour_ms`` (:func:`event_hour`): :meth:`add` of
        each, at once."""
        self.hours.setdefault(hour_ms, []).extend(lines)
        self.rows += len(lines)
        self.bytes += sum(map(len, lines)) + len(lines)

    @property
    def lines(self) -> list[str]:
        """Every buffered line, hour by hour."""
        return [line for hour in sorted(self.hours) for line in self.hours[hour]]

    @property
    def empty(self) -> bool:
        return self.since is None

    def due_in(self, now: float, flush_s: float) -> float:
        """Seconds until the oldest buffered record is ``flush_s`` old (infinite when empty)."""
        return float("inf") if self.since is None else max(0.0, self.since + flush_s - now)

    def due(self, now: float, flush_s: float, flush_bytes: int) -> bool:
        """True when the oldest buffered record is ``flush_s`` old or the buffer holds ``flush_bytes``."""
        return self.since is not None and (now - self.since >= flush_s or self.bytes >= flush_bytes)
