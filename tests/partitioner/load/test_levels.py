"""Tests for partitioner.load.levels: smoothed counts per grid cell."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.errors import PolicyError
from partitioner.load.levels import CellLevels


def step(levels: CellLevels, counts: dict[int, float]) -> CellLevels:
    codes = np.array(list(counts), dtype=np.int64)
    return levels.update(codes, np.array(list(counts.values())), alpha=0.5, jump_z=3.0)


def test_noise_is_smoothed_and_a_quiet_cell_keeps_a_level():
    # GIVEN a cell seen with 4 events, then absent (0) for two windows
    lv = step(CellLevels.empty(12), {7: 4.0})
    lv = step(lv, {})
    assert lv.lookup(np.array([7]))[0] == pytest.approx(2.0)  # 0 is within 3 sd of 4: move half way
    lv = step(lv, {})
    # THEN it is still listed (the next spec keeps covering it)
    assert lv.lookup(np.array([7]))[0] == pytest.approx(1.0)


def test_a_significant_change_is_followed_at_once():
    # GIVEN a quiet cell at 10 events when a crowd brings 100
    lv = step(step(CellLevels.empty(12), {3: 10.0}), {3: 100.0})
    # THEN the level jumps (100 is 28 sd above 10), as it does when the crowd leaves
    assert lv.lookup(np.array([3]))[0] == 100.0
    assert step(lv, {3: 10.0}).lookup(np.array([3]))[0] == 10.0


def test_a_cell_quiet_long_enough_is_forgotten():
    lv = step(CellLevels.empty(12), {5: 1.0})
    for _ in range(5):
        lv = step(lv, {})
    assert len(lv) == 0 and lv.lookup(np.array([5]))[0] == 0.0


def test_round_trip_and_bad_documents():
    lv = step(CellLevels.empty(12), {1 << 20: 3.0, 5: 12.5, 900: 1.0})
    back = CellLevels.from_dict(lv.to_dict())
    assert back.zoom == 12 and back.codes.tolist() == [5, 900, 1 << 20] and back.levels.tolist() == [12.5, 1.0, 3.0]
    with pytest.raises(PolicyError, match="must be finite and >= 0"):
        CellLevels.from_dict({**lv.to_dict(), "levels": [1.0, -1.0, 2.0]})
    with pytest.raises(PolicyError, match="sorted, unique"):
        CellLevels.from_dict({**lv.to_dict(), "code_deltas": [5, 0, 1]})


def test_a_significant_rise_is_remembered_until_the_cell_stops_rising():
    lv = step(step(CellLevels.empty(12), {3: 10.0}), {3: 100.0})
    assert lv.rises.tolist() == [90.0]
    lv = step(lv, {3: 190.0})
    assert lv.rises.tolist() == [90.0]
    assert step(lv, {3: 195.0}).rises.tolist() == [0.0]  # a change within noise is no rise
    assert step(lv, {3: 20.0}).rises.tolist() == [0.0]  # a fall is no rise
    back = CellLevels.from_dict(lv.to_dict())
    assert back.rises.tolist() == [90.0]


def test_a_whole_region_growing_is_followed_without_a_rise():
    # GIVEN two cells of 1000 events in a region that grows by 30% in one window
    lv = step(CellLevels.empty(12), {1: 1000.0, 2: 1000.0})

    def growth(codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), 1.3)

    grown = lv.update(np.array([1, 2]), np.array([1300.0, 2000.0]), alpha=0.5, jump_z=3.0, growth=growth)
    # THEN the cell that grew with its region follows it (no jump, no rise); the one that doubled rises by 700
    assert grown.levels.tolist() == [1300.0, 2000.0] and grown.rises.tolist() == [0.0, 700.0]
    # AND without the region's growth both would have counted as crowds
    plain = lv.update(np.array([1, 2]), np.array([1300.0, 2000.0]), alpha=0.5, jump_z=3.0)
    assert plain.rises.tolist() == [300.0, 1000.0]
