"""Tests for partitioner.builders.bisection: cut prices, side components, sorted pieces and marked boundaries."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.geo.graph import components, neighbour_pairs
from partitioner.builders.bisection import (
    _Cutting,
    _side_components,
    _split_general,
    _split_sorted,
    _window_positions,
    carve,
    cut_at,
    sorted_piece,
)
from partitioner.builders.cuts import cut_load
from partitioner.load.counts import Grid


@settings(max_examples=200, deadline=None)
@given(cells=st.sets(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=3, max_size=60),
       seed=st.integers(0, 1000), window=st.sampled_from([math.inf, 3.0, 10.0]), axis=st.booleans())
def test_cut_prices_from_nearby_pairs_equal_prices_from_all_pairs(cells, seed, window, axis) -> None:
    # GIVEN cells with random integer loads, ordered along one axis
    x = np.array([c[0] for c in cells], dtype=np.int64) + 100
    y = np.array([c[1] for c in cells], dtype=np.int64) + 100
    w = np.random.default_rng(seed).integers(1, 9, len(x)).astype(np.float64)
    u, v = (x, y) if axis else (y, x)
    order = np.lexsort((v, u))
    cap = float(w.sum()) / 2.5
    k = math.ceil(float(w.sum()) / cap)
    pairs = neighbour_pairs(x, y, 10)
    # WHEN the cut is priced over every pair and over the pairs near the candidate cuts only
    every = cut_at(np.cumsum(w[order]), k, cap, window, pairs, order, w)
    near = cut_at(np.cumsum(w[order]), k, cap, window, pairs, order, w, (u, v))
    # THEN the same cut at the same price
    assert every == near


@settings(max_examples=200, deadline=None)
@given(cells=st.sets(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=80))
def test_components_from_runs_equal_components_from_cell_pairs(cells) -> None:
    # GIVEN any cells, sorted as carving sorts a side (by column, then row)
    ordered = sorted(cells)
    u = np.array([c[0] for c in ordered], dtype=np.int64) + 50
    v = np.array([c[1] for c in ordered], dtype=np.int64) + 50
    # WHEN their 8-connected components are found from runs and from every neighbour pair
    n_runs, by_runs = _side_components(u, v, None)
    n_cells, by_cells = components(u, v, 10)
    # THEN the same components, labelled in the same order (by each one's first cell)
    assert n_runs == n_cells and by_runs.tolist() == by_cells.tolist()


def _blob(cells: set[tuple[int, int]], seed: int, shift: int) -> Grid:
    x = (np.array([c[0] for c in cells], dtype=np.int64) + shift) % 1024
    y = np.array([c[1] for c in cells], dtype=np.int64) + 100
    return Grid(10, x, y, np.random.default_rng(seed).integers(1, 9, len(x)).astype(np.float64))


@settings(max_examples=150, deadline=None)
@given(cells=st.sets(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=3, max_size=90),
       seed=st.integers(0, 1000), window=st.sampled_from([0.0, math.inf, 3.0]), shift=st.sampled_from([100, 1018]))
def test_the_boundary_carving_marks_is_the_boundary_of_its_pieces(cells, seed, window, shift) -> None:
    # GIVEN cells with random loads, some straddling the antimeridian (shift 1018)
    grid = _blob(cells, seed, shift)
    idx = np.arange(len(grid.x))
    # WHEN carved under a cap of a quarter of their load, marking the cells its cuts separate
    marked = np.zeros(len(idx), dtype=bool)
    pieces = carve(idx, grid, float(grid.weight.sum()) / 4, window=window, boundary=marked)
    # THEN the marked load is the load of the cells with a neighbour in another piece (found from every pair)
    every = cut_load(idx, pieces, grid.weight, neighbour_pairs(grid.x, grid.y, 10))
    assert float(grid.weight[marked].sum()) == every
    assert sorted(np.concatenate(pieces).tolist()) == idx.tolist()


@settings(max_examples=150, deadline=None)
@given(cells=st.sets(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=3, max_size=90),
       seed=st.integers(0, 1000), window=st.sampled_from([0.0, math.inf, 3.0]))
def test_a_piece_cut_from_its_sorted_orders_is_cut_as_when_sorted_afresh(cells, seed, window) -> None:
    # GIVEN cells away from the antimeridian, as a piece with its two sorted orders
    grid = _blob(cells, seed, 100)
    piece = sorted_piece(np.arange(len(grid.x)), grid)
    total = float(grid.weight.sum())
    how = _Cutting(total / 3, 3, window, None)
    # WHEN cut from those orders and by sorting the cells again
    fast = _split_sorted(piece, grid, how, np.empty(len(grid.x), dtype=np.int64))
    slow = _split_general(piece.cells, grid, how)
    # THEN the same sides in the same order, each carrying its cells sorted along both axes
    assert [p.cells.tolist() for p in fast] == [c.tolist() for c in slow]
    for p in fast:
        assert p.by_x is not None and p.by_y is not None
        assert p.by_x.cells.tolist() == sorted(p.cells.tolist(), key=lambda c: (grid.x[c], grid.y[c]))
        assert p.by_y.cells.tolist() == sorted(p.cells.tolist(), key=lambda c: (grid.y[c], grid.x[c]))
        # AND the coordinates and weights carried with each order are the cells' own
        for order, u, v in ((p.by_x, grid.x, grid.y), (p.by_y, grid.y, grid.x)):
            assert (order.u == u[order.cells]).all() and (order.v == v[order.cells]).all()
            assert (order.w == grid.weight[order.cells]).all()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 1 / 3, 1.0, 2.5, 7.0]), min_size=2, max_size=60),
       st.integers(2, 8), st.sampled_from([math.inf, 0.2, 0.05, 0.0001]), st.booleans())
def test_window_positions_are_the_positions_the_conditions_hold(weights: list[float], k: int, window: float,
                                                               exact_cap: bool) -> None:
    # GIVEN a piece's running load (zero weights and ties included) and a cap that splits it into k workers (exactly
    # a k-th of the load: positions right at the tolerance)
    csum = np.cumsum(np.array(weights))
    load = float(csum[-1])
    if load <= 0:
        return
    cap = load / k if exact_cap else load / (k - 0.5)
    k = math.ceil(load / cap - 1e-12)
    if k < 2:
        return
    left, tol, w = csum[:-1], 1 + 1e-12, window * cap
    # WHEN the cut positions within the window are found by binary search
    got = _window_positions(left, load, k, cap, w)
    # THEN they are the positions where the first side fits j workers within the window and the other side k - j
    ok = np.zeros(len(left), dtype=bool)
    for j in {k // 2, k - k // 2}:
        ok |= (left <= j * cap * tol) & (left >= j * cap - w) & (load - left <= (k - j) * cap * tol)
    assert got.tolist() == np.flatnonzero(ok).tolist()
