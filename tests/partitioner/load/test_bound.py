"""Tests for partitioner.load.bound: the fewest workers a load needs."""

from __future__ import annotations

from partitioner.load.bound import lower_bound


def test_lower_bound_is_the_ceiling_with_float_noise_tolerated() -> None:
    # GIVEN totals at, just above and (by float noise) just above a multiple of the cap
    # THEN the bound is ceil(total / cap), at least 1, and noise does not add a worker
    assert lower_bound(300.0, 100.0) == 3
    assert lower_bound(300.1, 100.0) == 4
    assert lower_bound(0.1 + 0.2, 0.1) == 3
    assert lower_bound(0.0, 100.0) == 1
