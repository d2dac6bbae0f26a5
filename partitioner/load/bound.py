"""The fewest workers a load can need: what the builders aim at and the metrics and the control loop measure against."""

from __future__ import annotations

import math


def lower_bound(total: float, max_load: float) -> int:
    """Return the physical lower bound on workers: ``ceil(total / max_load)`` (at least 1).

    Notes
    -----
    A float-noise tolerance of 1e-9 workers: a total of exactly ``k * max_load`` summed
    in another order still needs ``k`` workers, not ``k + 1``.
    """
    return max(1, math.ceil(total / max_load - 1e-9))
