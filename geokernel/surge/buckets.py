"""The router's side of the meter: the events an execution environment routes, grouped into intervals by time.

An interval is ``[k * bucket_s, (k + 1) * bucket_s)`` on the wall clock (epoch seconds), so every environment cuts
the same intervals. :meth:`Buckets.add` takes one invocation's cell codes and returns the intervals that closed
before it: the one in progress when time has passed its end, and an empty interval for each one the environment
was idle through (the meter reads them as intervals without events, at most as many as it keeps).

Notes
-----
Events are counted when they are routed, not when they were sent: a backlog routed late counts in the interval it
was routed in. The meter compares shares of one interval's events, so a backlog spread evenly over the cells does not
read as a surge; the router does not feed the meter while it routes a backlog (``lambdas.router.surge``).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from geokernel.surge.meter import Interval, interval


class Buckets:
    """Cell codes accumulated per interval of ``bucket_s`` seconds (see the module docstring).

    Parameters
    ----------
    bucket_s : float
        Interval length (> 0).
    keep : int
        At most this many empty intervals are returned for an idle stretch (the meter keeps no more).
    """

    def __init__(self, bucket_s: float, keep: int) -> None:
        if not math.isfinite(bucket_s) or bucket_s <= 0:
            raise ValueError(f"bucket_s must be a finite number > 0, got {bucket_s!r}")
        self.bucket_s = float(bucket_s)
        self.keep = max(1, int(keep))
        self._k: int | None = None
        self._parts: list[npt.NDArray[np.int64]] = []

    def add(self, codes: npt.ArrayLike, at: float) -> list[Interval]:
        """Count ``codes`` (one per event) at time ``at``; return the intervals that closed before it, oldest first."""
        k = math.floor(at / self.bucket_s)
        closed: list[Interval] = []
        if self._k is not None and k > self._k:
            closed.append(self._close(self._k))
            gap = min(k - self._k - 1, self.keep)
            closed += [interval(j * self.bucket_s, (j + 1) * self.bucket_s, []) for j in range(k - gap, k)]
            self._parts = []
        if self._k is None or k > self._k:
            self._k = k
        c = np.asarray(codes, dtype=np.int64)
        if len(c):
            self._parts.append(c)
        return closed

    def _close(self, k: int) -> Interval:
        codes = np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=np.int64)
        return interval(k * self.bucket_s, (k + 1) * self.bucket_s, codes)
