"""Tests for partitioner.levels: smoothed counts per grid cell."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.errors import PolicyError
from partitioner.levels import CellLevels


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
