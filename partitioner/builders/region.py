"""The records the build passes between its steps: a region of work, and where regions go."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    """A piece of work: grid cells (or one hash share of a hot cell) with its load."""

    quadkeys: tuple[str, ...]
    load: float
    hash_range: tuple[int, int] | None = None


@dataclass(frozen=True)
class Placement:
    """Regions and the worker of each, as worker indices ``0 .. worker_count - 1``."""

    regions: tuple[Region, ...]
    workers_of: tuple[int, ...]

    @property
    def worker_count(self) -> int:
        """Workers used (0 without regions)."""
        return max(self.workers_of) + 1 if self.workers_of else 0
