"""Tests for geokernel.geo.shape: filling regions' notches and holes, listing cells as quadtree squares."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.geo.shape import coalesce, fill_gaps, unique_pairs


def _arr(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_hole_inside_a_region_is_filled() -> None:
    # GIVEN a 3x3 block of cells of region 0 with its centre missing
    cells = [(x, y) for x in range(10, 13) for y in range(20, 23) if (x, y) != (11, 21)]
    x, y = _arr([c[0] for c in cells]), _arr([c[1] for c in cells])
    # WHEN gaps are filled
    gx, gy, gl = fill_gaps(x, y, np.zeros(len(x), dtype=np.int64), 8)
    # THEN the centre joins region 0 and nothing else is taken (no cell outside has two sides on the block)
    assert list(zip(gx.tolist(), gy.tolist(), gl.tolist(), strict=True)) == [(11, 21, 0)]


def test_a_blocked_cell_is_left_alone() -> None:
    # GIVEN the same ring, and the centre is loaded by someone else
    cells = [(x, y) for x in range(3) for y in range(3) if (x, y) != (1, 1)]
    x, y = _arr([c[0] for c in cells]), _arr([c[1] for c in cells])
    # WHEN filled with the centre blocked
    gx, _, _ = fill_gaps(x, y, np.zeros(len(x), dtype=np.int64), 6,
                         blocked=lambda bx, by: (bx == 1) & (by == 1))
    # THEN nothing is taken
    assert len(gx) == 0


def test_a_notch_shared_by_two_regions_goes_to_the_one_on_more_sides() -> None:
    # GIVEN an empty cell (5, 5) with region 1 on three sides and region 0 on the fourth
    x = _arr([4, 6, 5, 5])
    y = _arr([5, 5, 4, 6])
    label = _arr([1, 1, 1, 0])
    # WHEN filled
    gx, gy, gl = fill_gaps(x, y, label, 6, rounds=1)
    # THEN region 1 takes it, once
    took = {(a, b): c for a, b, c in zip(gx.tolist(), gy.tolist(), gl.tolist(), strict=True)}
    assert took[(5, 5)] == 1
    assert len(took) == len(gx)


def test_filling_wraps_across_the_antimeridian() -> None:
    # GIVEN a ring around cell (0, 8) at zoom 4 whose left side is in the last column (x = 15)
    n = 16
    cells = [((cx % n), cy) for cx in (-1, 0, 1) for cy in (7, 8, 9) if (cx, cy) != (0, 8)]
    x, y = _arr([c[0] for c in cells]), _arr([c[1] for c in cells])
    # WHEN filled
    gx, gy, _ = fill_gaps(x, y, np.zeros(len(x), dtype=np.int64), 4, min_sides=4, rounds=1)
    # THEN the cell at x = 0 is taken: its neighbour at x = -1 is column 15
    assert list(zip(gx.tolist(), gy.tolist(), strict=True)) == [(0, 8)]


def test_bad_min_sides_is_rejected_naming_the_value() -> None:
    with pytest.raises(ValueError, match="got 1"):
        fill_gaps(_arr([0]), _arr([0]), _arr([0]), 3, min_sides=1)


def test_four_siblings_of_one_region_become_their_parent() -> None:
    # GIVEN the four children of tile (3, 5) at zoom 6 in region 2, and one more cell of region 2
    x = _arr([6, 7, 6, 7, 20])
    y = _arr([10, 10, 11, 11, 20])
    # WHEN coalesced
    cx, cy, cz, cl = coalesce(x, y, 6, np.full(5, 2, dtype=np.int64))
    # THEN the parent replaces its children and the lone cell stays
    assert sorted(zip(cx.tolist(), cy.tolist(), cz.tolist(), cl.tolist(), strict=True)) == [(3, 5, 5, 2), (20, 20, 6, 2)]


def test_siblings_of_different_regions_stay_apart() -> None:
    x, y = _arr([0, 1, 0, 1]), _arr([0, 0, 1, 1])
    cx, _, cz, _ = coalesce(x, y, 3, _arr([0, 0, 0, 1]))
    assert len(cx) == 4 and set(cz.tolist()) == {3}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 31), st.integers(0, 31), st.integers(0, 2)), min_size=1, max_size=300,
                unique_by=lambda t: (t[0], t[1])),
       st.integers(1, 5))
def test_coalesced_squares_cover_exactly_the_cells(cells: list[tuple[int, int, int]], min_zoom: int) -> None:
    # GIVEN labelled cells at zoom 5
    x, y, lab = (_arr([c[i] for c in cells]) for i in range(3))
    # WHEN coalesced
    sx, sy, sz, sl = coalesce(x, y, 5, lab, min_zoom=min_zoom)
    # THEN expanding the squares gives back each cell once with its label, and no square is above min_zoom
    back = []
    for a, b, z, label in zip(sx.tolist(), sy.tolist(), sz.tolist(), sl.tolist(), strict=True):
        side = 1 << (5 - z)
        back += [(a * side + i, b * side + j, label) for i in range(side) for j in range(side)]
    assert sorted(back) == sorted(cells)
    assert sz.min() >= min_zoom


def test_unique_pairs_with_values_too_wide_to_pack() -> None:
    a = _arr([1 << 61, 1 << 61, 5])
    b = _arr([7, 7, 3])
    ua, ub = unique_pairs(a, b)
    assert list(zip(ua.tolist(), ub.tolist(), strict=True)) == [(5, 3), (1 << 61, 7)]
