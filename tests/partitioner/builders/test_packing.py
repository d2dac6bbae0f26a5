"""Tests for partitioner.builders.packing: best fit and levelling."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioner.builders.packing import level_workers, pack_best_fit


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


def _item_by_item(loads: list[float], cap: float) -> list[int]:
    """Best-fit decreasing placing one item at a time (the reference for the run-at-a-time packing)."""
    import bisect

    order = sorted(range(len(loads)), key=lambda i: -loads[i])
    residuals: list[float] = []
    bins_at: list[int] = []
    assign = [0] * len(loads)
    n_bins, eps = 0, cap * 1e-9
    for i in order:
        need = loads[i]
        pos = bisect.bisect_left(residuals, need - eps)
        if pos < len(residuals):
            b, r = bins_at.pop(pos), residuals.pop(pos) - need
        else:
            b, r, n_bins = n_bins, cap - need, n_bins + 1
        assign[i] = b
        ins = bisect.bisect_left(residuals, r)
        residuals.insert(ins, r)
        bins_at.insert(ins, b)
    seen: dict[int, int] = {}
    return [seen.setdefault(a, len(seen)) for a in assign]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0.1, 0.3, 1.0, 2.0, 3.0, 7.5, 10.0, 33.3, 50.0, 99.9, 100.0]) | st.floats(0.0, 100.0),
                max_size=300))
def test_runs_of_equal_loads_pack_exactly_as_one_item_at_a_time(loads: list[float]) -> None:
    # GIVEN loads with many repeats (small regions of 1, 2, 3 events) and some of any size, cap 100
    # WHEN packed best-fit decreasing
    got = pack_best_fit(loads, 100.0)
    # THEN every item is on the bin the item-by-item packing puts it on
    assert got == _item_by_item(loads, 100.0)
