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

    def busiest(self) -> tuple[int, float]:
        """The most loaded worker and its load (``(-1, 0.0)`` without regions)."""
        loads = [0.0] * self.worker_count
        for r, w in zip(self.regions, self.workers_of, strict=True):
            loads[w] += r.load
        if not loads:
            return -1, 0.0
        k = max(range(len(loads)), key=loads.__getitem__)
        return k, loads[k]
