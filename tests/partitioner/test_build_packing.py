"""Tests for partitioner.build.packing: best fit, levelling and the lower bound."""

from __future__ import annotations

import numpy as np

from partitioner.build import level_workers, lower_bound, pack_best_fit


def test_best_fit_packing_fills_workers() -> None:
    # GIVEN items that pack perfectly in pairs
    loads = [60.0, 40.0, 70.0, 30.0, 50.0, 50.0]
    # WHEN packing at cap 100
    assign = pack_best_fit(loads, 100.0)
    # THEN three workers, each exactly full
    assert max(assign) + 1 == 3
    assert sorted(np.bincount(assign, weights=loads).tolist()) == [100.0, 100.0, 100.0]


def test_levelling_evens_out_workers_without_passing_the_cap() -> None:
    # GIVEN one full worker and one nearly empty one
    loads = [40.0, 30.0, 20.0, 5.0]
    # WHEN levelled at cap 100
    assign = level_workers(loads, [0, 0, 0, 1], 100.0)
    # THEN load moved to the emptier worker until the gap could not narrow, and no worker is over the cap
    per_worker = np.bincount(assign, weights=loads).tolist()
    assert per_worker == [50.0, 45.0]
    assert max(per_worker) <= 100.0


def test_levelling_a_single_worker_changes_nothing() -> None:
    assert level_workers([3.0, 4.0], [0, 0], 10.0) == [0, 0]


def test_lower_bound_is_the_ceiling_with_float_noise_tolerated() -> None:
    # GIVEN totals at, just above and (by float noise) just above a multiple of the cap
    # THEN the bound is ceil(total / cap), at least 1, and noise does not add a worker
    assert lower_bound(300.0, 100.0) == 3
    assert lower_bound(300.1, 100.0) == 4
    assert lower_bound(0.1 + 0.2, 0.1) == 3
    assert lower_bound(0.0, 100.0) == 1
