"""Tests for geokernel.geo.graph: 8-neighbour pairs, components and boundaries of grid cells."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.geo.graph import (
    boundary_mask,
    components,
    components_of_pairs,
    group_indices,
    neighbour_pairs,
    sub_pairs,
)
from geokernel.geo.tiles import Tile, neighbors


def _arrays(cells: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([c[0] for c in cells], dtype=np.int64), np.array([c[1] for c in cells], dtype=np.int64)


def _pair_set(i: np.ndarray, j: np.ndarray) -> set[frozenset[int]]:
    return {frozenset((a, b)) for a, b in zip(i.tolist(), j.tolist(), strict=True)}


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 5).flatmap(lambda z: st.tuples(st.just(z), st.lists(
    st.tuples(st.integers(0, (1 << z) - 1), st.integers(0, (1 << z) - 1)), max_size=40, unique=True))))
def test_pairs_are_exactly_the_tile_neighbours_each_once(case: tuple[int, list[tuple[int, int]]]) -> None:
    # GIVEN any set of cells at a small zoom (so the antimeridian and the poles are often involved; at zoom 1 the
    #       east and west neighbour are one tile, and a pair across the antimeridian is listed from both sides)
    z, cells = case
    x, y = _arrays(cells)
    i, j = neighbour_pairs(x, y, z)
    # THEN every pair is two 8-neighbours (wrapping in x, never in y, as tiles.neighbors says), each listed once
    where = {c: k for k, c in enumerate(cells)}
    expected = {frozenset((k, where[(u.x, u.y)])) for k, c in enumerate(cells)
                for u in neighbors(Tile(c[0], c[1], z)) if (u.x, u.y) in where}
    assert _pair_set(i, j) == expected
    assert len(i) == len(expected)
    assert not (i == j).any()


def test_a_region_across_the_antimeridian_is_one_component_but_rows_do_not_wrap() -> None:
    # GIVEN cells in the last and the first column of one row, and cells in the first and last row of one column
    z, n = 6, 64
    x, y = _arrays([(n - 1, 30), (0, 30), (10, 0), (10, n - 1)])
    # WHEN grouped into 8-connected components
    count, labels = components(x, y, z)
    # THEN the two across the antimeridian are one; the two at the poles are two more
    assert count == 3
    assert labels[0] == labels[1] and len({int(labels[0]), int(labels[2]), int(labels[3])}) == 3


def test_diagonal_cells_connect_and_groups_list_their_members() -> None:
    # GIVEN a diagonal pair and a lone cell
    x, y = _arrays([(5, 5), (6, 6), (9, 5)])
    count, labels = components(x, y, 10)
    # THEN two components; group_indices gives the members of each label
    assert count == 2
    groups = group_indices(labels, count)
    assert sorted(g.tolist() for g in groups) == [[0, 1], [2]]
    assert components_of_pairs(0, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))[0] == 0


def test_sub_pairs_keep_the_pairs_inside_a_subset_renumbered() -> None:
    # GIVEN a row of four cells (pairs 0-1, 1-2, 2-3)
    i, j = neighbour_pairs(*_arrays([(0, 0), (1, 0), (2, 0), (3, 0)]), 10)
    # WHEN only cells 1, 2 and 3 are kept
    si, sj = sub_pairs(np.array([1, 2, 3]), 4, i, j)
    # THEN the pairs among them remain, numbered by position in the subset
    assert _pair_set(si, sj) == {frozenset((0, 1)), frozenset((1, 2))}


def test_boundary_mask_marks_the_cells_with_a_neighbour_of_another_label() -> None:
    # GIVEN a row of five cells labelled a a b b b, and a lone cell of label c
    x, y = _arrays([(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (20, 20)])
    labels = np.array([0, 0, 1, 1, 1, 2])
    # THEN the two cells on the a|b edge are on a boundary; the far ends and the lone cell are not
    assert boundary_mask(labels, *neighbour_pairs(x, y, 10)).tolist() == [False, True, True, False, False, False]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 60).flatmap(lambda m: st.tuples(
    st.just(m), st.lists(st.tuples(st.integers(0, m - 1), st.integers(0, m - 1)), max_size=120))))
def test_components_of_pairs_label_as_scipys_connected_components_do(case: tuple[int, list[tuple[int, int]]]) -> None:
    # GIVEN any graph of m nodes (self-pairs and repeated pairs included)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m, edges = case
    i = np.array([e[0] for e in edges], dtype=np.int64)
    j = np.array([e[1] for e in edges], dtype=np.int64)
    # WHEN its components are labelled without SciPy
    count, labels = components_of_pairs(m, i, j)
    # THEN the count and every label are SciPy's (components numbered in order of their first node)
    want_count, want = connected_components(coo_matrix((np.ones(len(i)), (i, j)), shape=(m, m)), directed=False)
    assert count == want_count and labels.tolist() == want.tolist()


def test_a_long_chain_is_one_component_in_few_rounds() -> None:
    # GIVEN 200,000 nodes joined in one chain listed in reverse order (the worst order for hooking by minimum)
    m = 200_000
    i, j = np.arange(m - 1, 0, -1, dtype=np.int64), np.arange(m - 2, -1, -1, dtype=np.int64)
    # WHEN its components are labelled
    count, labels = components_of_pairs(m, i, j)
    # THEN there is one component
    assert count == 1 and not labels.any()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6).flatmap(lambda z: st.tuples(st.just(z), st.lists(
    st.tuples(st.integers(0, (1 << z) - 1), st.integers(0, (1 << z) - 1)), max_size=60, unique=True))))
def test_components_from_runs_label_as_the_neighbour_pairs_do(case: tuple[int, list[tuple[int, int]]]) -> None:
    # GIVEN any distinct cells at a small zoom, in any order (columns 0 and n - 1 often both taken: the antimeridian)
    z, cells = case
    x, y = _arrays(cells)
    # WHEN their components are found from column runs (zoom >= 2) or pairs (zoom 0 and 1)
    count, labels = components(x, y, z)
    # THEN they are the components of the cells' 8-neighbour pairs, numbered in order of their first cell
    want_count, want = components_of_pairs(len(cells), *neighbour_pairs(x, y, z))
    assert count == want_count and labels.tolist() == want.tolist()
