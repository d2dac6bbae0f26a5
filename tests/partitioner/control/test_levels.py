"""Tests for partitioner.control.levels: smoothed counts per grid cell."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.errors import PolicyError
from partitioner.control.levels import CellLevels, three_digits


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


def test_cells_with_one_event_so_far_are_marked_single_and_the_events_are_counted():
    # GIVEN a window with cells of 1, 1 and 3 events
    lv = step(CellLevels.empty(12), {1: 1.0, 2: 1.0, 3: 3.0})
    # THEN the two one-event cells are single, and five events were seen
    assert lv.singles.tolist() == [True, True, False] and lv.seen == 5.0
    # WHEN cell 1 sees another event, cell 2 none and a new cell 4 one
    lv = step(lv, {1: 1.0, 4: 1.0})
    # THEN cell 1 is no longer single (two events), 2 still is, 4 is new and single
    assert dict(zip(lv.codes.tolist(), lv.singles.tolist(), strict=True)) == {1: False, 2: True, 3: False, 4: True}
    assert lv.seen == 7.0
    # AND both survive a round trip
    back = CellLevels.from_dict(lv.to_dict())
    assert back.singles.tolist() == lv.singles.tolist() and back.seen == 7.0


def test_levels_written_before_singles_were_kept_still_load():
    # GIVEN a state document without the single cells and the events seen (an older controller's)
    d = step(CellLevels.empty(12), {1: 1.0, 2: 4.0}).to_dict()
    del d["single_deltas"], d["seen"]
    back = CellLevels.from_dict(d)
    # THEN no cell is single and the sample is the levels' sum
    assert back.singles.tolist() == [False, False] and back.seen == 5.0
    with pytest.raises(PolicyError, match="single_deltas must point at increasing cells"):
        CellLevels.from_dict({**d, "single_deltas": [1, 0]})
    with pytest.raises(PolicyError, match="malformed"):
        CellLevels.from_dict({**d, "single_deltas": [7]})


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(min_value=0.0, allow_nan=False), max_size=50))
def test_three_digits_gives_the_floats_the_formatted_text_parses_to(values: list[float]) -> None:
    # GIVEN any non-negative floats, and the ones where a vectorised rounding could slip: ties, powers of ten,
    # the edges of a decimal exponent, the smallest and largest floats
    edges = [0.0, 5e-324, 1e-320, 2.5, 100.5, 101.5, 999.5, 99.95, 0.9995, 1e22, 1e23, 1.7e308, 12345.0, 0.00012345,
             math.nextafter(1000.0, 0.0), math.nextafter(100.0, 0.0), math.nextafter(1e-5, 1.0)]
    arr = np.array(values + edges, dtype=np.float64)
    # WHEN they are rounded to three significant digits, vectorised
    got = three_digits(arr)
    # THEN each is the float that formatting with "%.3g" and parsing it back gives
    assert got == [float(f"{v:.3g}") for v in arr.tolist()]
