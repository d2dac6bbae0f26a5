"""Tests for partitioner.builders.territory: small regions' squares grown to pure ancestors and merged per worker.

The property tests paint every square onto a grid of the finest zoom involved (at most 2^8 x 2^8 cells), so
containment, overlap and 8-connectivity (wrapping across the antimeridian) are checked by brute force.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.geo.graph import components
from geokernel.geo.shape import coalesce
from geokernel.geo.tiles import IntArray
from partitioner.builders.territory import Squares, Territories, territories

_AROUND = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy]
_NONE = Squares(*(np.zeros(0, dtype=np.int64) for _ in range(4)))


def _ints(*values: int) -> IntArray:
    return np.array(values, dtype=np.int64)


def _sq(squares: list[tuple[int, int, int, int]]) -> Squares:
    """Squares from ``(x, y, z, item)`` rows."""
    return Squares(*(np.array([s[k] for s in squares], dtype=np.int64) for k in range(4)))


def _rows(squares: Squares, sel: npt.NDArray[np.bool_] | None = None) -> list[tuple[int, int, int]]:
    keep = np.ones(len(squares.x), dtype=bool) if sel is None else sel
    return sorted(zip(squares.x[keep].tolist(), squares.y[keep].tolist(), squares.z[keep].tolist(), strict=True))


class Layout(NamedTuple):
    """A territories input, its answer, and every square painted at ``fine`` zoom."""

    squares: Squares
    blockers: Squares
    worker: IntArray
    load: npt.NDArray[np.float64]
    movable: npt.NDArray[np.bool_]
    min_zoom: int
    fine: int
    out: Territories
    item_at: IntArray  # the input item listing each fine cell (-1: none)
    blocked: npt.NDArray[np.bool_]  # fine cells inside a blocker
    region_at: IntArray  # the output region listing each fine cell (-1: none)
    cover: IntArray  # how many output squares list each fine cell


def _cells(x: int, y: int, z: int, fine: int) -> tuple[slice, slice]:
    d = fine - z
    return slice(x << d, (x + 1) << d), slice(y << d, (y + 1) << d)


def _paint(squares: Squares, fine: int) -> tuple[IntArray, IntArray]:
    """``(label, count)``: the ``item`` of the square listing each fine cell (-1: none), and how many do."""
    n = 1 << fine
    label = np.full((n, n), -1, dtype=np.int64)
    count = np.zeros((n, n), dtype=np.int64)
    for x, y, z, item in zip(*(a.tolist() for a in squares), strict=True):
        cx, cy = _cells(x, y, z, fine)
        label[cx, cy] = item
        count[cx, cy] += 1
    return label, count


@st.composite
def _layouts(draw: st.DrawFn) -> Layout:
    """Islands (8-connected, coalesced into squares no coarser than ``min_zoom``) on up to three workers.

    Some islands are fixed; some fixed items are hot cells listed as their four children one zoom deeper; some
    free cells are blockers (hash-split cells).
    """
    zoom = draw(st.integers(5, 7))
    n = 1 << zoom
    cells: dict[tuple[int, int], int] = {}
    n_walks = draw(st.integers(1, 8))
    for walk in range(n_walks):
        x, y = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        for dx, dy in [(0, 0), *draw(st.lists(st.sampled_from(_AROUND), max_size=40))]:
            x, y = (x + dx) % n, min(max(y + dy, 0), n - 1)
            cells.setdefault((x, y), walk)
    xs = np.array([c[0] for c in cells], dtype=np.int64)
    ys = np.array([c[1] for c in cells], dtype=np.int64)
    walk_of = np.array(list(cells.values()), dtype=np.int64)
    # each island (an 8-connected group of one walk's cells) is one item
    item_of = np.zeros(len(xs), dtype=np.int64)
    n_items = 0
    walk_item: list[int] = []
    for walk in np.unique(walk_of).tolist():
        sel = np.flatnonzero(walk_of == walk)
        count, lab = components(xs[sel], ys[sel], zoom)
        item_of[sel] = n_items + lab
        n_items += count
        walk_item += [walk] * count
    min_zoom = draw(st.integers(1, zoom))
    sx, sy, sz, si = coalesce(xs, ys, zoom, item_of, min_zoom=min_zoom)
    rows = list(zip(sx.tolist(), sy.tolist(), sz.tolist(), si.tolist(), strict=True))
    walk_worker = draw(st.lists(st.integers(0, 2), min_size=n_walks, max_size=n_walks))
    walk_movable = draw(st.lists(st.booleans(), min_size=n_walks, max_size=n_walks))
    worker = [walk_worker[w] for w in walk_item]
    movable = [walk_movable[w] for w in walk_item]
    free = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda c: c not in cells)
    hot = draw(st.lists(free, max_size=3, unique=True))
    for hx, hy in hot:  # a hot cell: one fixed item listing its four children
        rows += [(2 * hx + i, 2 * hy + j, zoom + 1, n_items) for i in (0, 1) for j in (0, 1)]
        worker.append(draw(st.integers(0, 3)))
        movable.append(False)
        n_items += 1
    blockers = draw(st.lists(free.filter(lambda c: c not in hot), max_size=6, unique=True))
    squares = _sq(rows)
    blocker_squares = _sq([(bx, by, zoom, 0) for bx, by in blockers])
    load = np.array(draw(st.lists(st.integers(1, 50), min_size=n_items, max_size=n_items)), dtype=np.float64)
    worker_arr = np.array(worker, dtype=np.int64)
    movable_arr = np.array(movable, dtype=bool)
    out = territories(squares, blocker_squares, worker_arr, load, movable_arr, min_zoom)
    fine = zoom + 1 if hot else zoom
    item_at, _ = _paint(squares, fine)
    blocker_at, _ = _paint(blocker_squares, fine)
    region_at, cover = _paint(out.squares, fine)
    return Layout(squares, blocker_squares, worker_arr, load, movable_arr, min_zoom, fine, out, item_at,
                  blocker_at >= 0, region_at, cover)


def _base(case: Layout) -> int:
    return int((~case.movable).sum())


def _grown(case: Layout) -> list[tuple[int, int, int, int]]:
    """The output squares of the merged (movable) regions, as ``(x, y, z, region)``."""
    sq = case.out.squares
    rows = zip(sq.x.tolist(), sq.y.tolist(), sq.z.tolist(), sq.item.tolist(), strict=True)
    return [r for r in rows if r[3] >= _base(case)]


@settings(max_examples=50, deadline=None)
@given(case=_layouts())
def test_grown_squares_hold_only_their_own_workers_small_regions_and_never_overlap(case: Layout) -> None:
    # GIVEN any layout of islands, fixed items and blockers, grown into territories
    for x, y, z, region in _grown(case):
        cx, cy = _cells(x, y, z, case.fine)
        inside = np.unique(case.item_at[cx, cy])
        inside = inside[inside >= 0]
        # THEN a grown square holds no blocker, and every item listing a cell in it is movable and of its worker
        assert not case.blocked[cx, cy].any()
        assert case.movable[inside].all()
        assert (case.worker[inside] == case.out.workers[region]).all()
        # AND it is the square of one of those items (or an ancestor of one)
        assert len(inside) > 0
    # AND no cell is listed by two output squares
    assert case.cover.max(initial=0) <= 1


@settings(max_examples=50, deadline=None)
@given(case=_layouts())
def test_fixed_items_keep_their_squares_and_come_first_in_their_order(case: Layout) -> None:
    # GIVEN any layout grown into territories
    out, base = case.out, _base(case)
    fixed = np.flatnonzero(~case.movable)
    # THEN the fixed items are regions 0 .. base - 1, in their order, each with its worker, load and squares
    assert out.of_item[fixed].tolist() == list(range(base))
    assert out.workers[:base].tolist() == case.worker[fixed].tolist()
    assert out.loads[:base].tolist() == case.load[fixed].tolist()
    for region, item in enumerate(fixed.tolist()):
        assert _rows(out.squares, out.squares.item == region) == _rows(case.squares, case.squares.item == item)


@settings(max_examples=50, deadline=None)
@given(case=_layouts())
def test_every_item_lands_in_one_territory_of_its_worker_and_the_loads_add_up(case: Layout) -> None:
    # GIVEN any layout grown into territories
    out = case.out
    n_regions = len(out.workers)
    # THEN every item has a region of its own worker, and every region is some item's
    assert ((out.of_item >= 0) & (out.of_item < n_regions)).all()
    assert (out.workers[out.of_item] == case.worker).all()
    assert set(out.of_item.tolist()) == set(range(n_regions))
    # AND every cell an item listed is now listed by that item's region
    listed = case.item_at >= 0
    assert (case.region_at[listed] == out.of_item[case.item_at[listed]]).all()
    # AND each region's load is the sum of its items' loads (integers: exact)
    assert out.loads.tolist() == np.bincount(out.of_item, weights=case.load, minlength=n_regions).tolist()
    assert len(out.loads) == n_regions


@settings(max_examples=50, deadline=None)
@given(case=_layouts())
def test_each_merged_region_is_8_connected_and_touching_squares_of_one_worker_are_one_region(case: Layout) -> None:
    # GIVEN any layout grown into territories
    out, base, n = case.out, _base(case), 1 << case.fine
    merged = case.region_at >= base
    for region in range(base, len(out.workers)):
        # THEN the cells of each merged region are one 8-connected group (across the antimeridian)
        cx, cy = np.nonzero(case.region_at == region)
        assert components(cx.astype(np.int64), cy.astype(np.int64), case.fine)[0] == 1
    # AND no two merged regions of one worker touch (by an edge or a corner, across the antimeridian)
    worker_at = np.where(merged, out.workers[np.maximum(case.region_at, 0)], -1)
    for dx, dy in _AROUND:
        rows = slice(max(dy, 0), n + min(dy, 0))
        other_rows = slice(max(-dy, 0), n - max(dy, 0))
        here = np.roll(case.region_at, -dx, axis=0)[:, rows]
        there = case.region_at[:, other_rows]
        same_worker = np.roll(worker_at, -dx, axis=0)[:, rows] == worker_at[:, other_rows]
        assert not (merged[:, other_rows] & (here >= base) & same_worker & (here != there)).any()
    # AND the merged regions are numbered by worker
    assert (np.diff(out.workers[base:]) >= 0).all()


@settings(max_examples=50, deadline=None)
@given(case=_layouts())
def test_squares_grow_to_their_coarsest_pure_ancestor_but_never_past_min_zoom(case: Layout) -> None:
    # GIVEN any layout grown into territories (its input squares no coarser than min_zoom)
    for x, y, z, region in _grown(case):
        # THEN no grown square is coarser than min_zoom
        assert z >= case.min_zoom
        if z == case.min_zoom:
            continue
        # AND its parent is not pure: it holds a blocker, or a square of another worker or of a fixed item
        cx, cy = _cells(x >> 1, y >> 1, z - 1, case.fine)
        inside = np.unique(case.item_at[cx, cy])
        inside = inside[inside >= 0]
        w = case.out.workers[region]
        assert case.blocked[cx, cy].any() or not (case.movable[inside] & (case.worker[inside] == w)).all()


def test_two_islands_of_one_worker_grow_into_one_square() -> None:
    # GIVEN two single-tile islands of worker 0 at zoom 6 in the same zoom-4 square (8, 8), with nothing else near
    squares = _sq([(32, 32, 6, 0), (35, 34, 6, 1)])
    # WHEN grown down to zoom 4 at most
    out = territories(squares, _NONE, _ints(0, 0), np.array([1.0, 2.0]), np.array([True, True]), 4)
    # THEN both become one region listing just that square, with their summed load
    assert _rows(out.squares) == [(8, 8, 4)]
    assert out.of_item.tolist() == [0, 0]
    assert out.workers.tolist() == [0]
    assert out.loads.tolist() == [3.0]


def test_growth_stops_below_a_square_of_another_worker() -> None:
    # GIVEN islands of two workers at zoom 6: (32, 32) on worker 0 and (35, 34) on worker 1
    squares = _sq([(32, 32, 6, 0), (35, 34, 6, 1)])
    # WHEN grown down to zoom 1 at most
    out = territories(squares, _NONE, _ints(0, 1), np.array([1.0, 2.0]), np.array([True, True]), 1)
    # THEN each grows to its zoom-5 square (the zoom-4 square holding both is not pure); two regions, by worker
    assert _rows(out.squares) == [(16, 16, 5), (17, 17, 5)]
    assert out.workers.tolist() == [0, 1]
    assert out.of_item.tolist() == [0, 1]


def test_growth_stops_below_a_blocker_and_below_a_fixed_item() -> None:
    # GIVEN an island of worker 0 at zoom 6 with a blocker three tiles east, and one of worker 1 next to a fixed
    #       item of worker 1 (its own big region)
    squares = _sq([(32, 32, 6, 0), (8, 8, 6, 1), (10, 8, 6, 2)])
    blockers = _sq([(35, 32, 6, 0)])
    worker, movable = _ints(0, 1, 1), np.array([True, True, False])
    # WHEN grown down to zoom 1 at most
    out = territories(squares, blockers, worker, np.array([1.0, 1.0, 9.0]), movable, 1)
    # THEN the first grows to its zoom-5 square only (the zoom-4 one holds the blocker), and so does the second
    #      (the zoom-4 one holds the fixed item); the fixed item stays as region 0
    assert out.of_item.tolist() == [1, 2, 0]
    assert _rows(out.squares, out.squares.item == 0) == [(10, 8, 6)]
    assert _rows(out.squares, out.squares.item == 1) == [(16, 16, 5)]
    assert _rows(out.squares, out.squares.item == 2) == [(4, 4, 5)]


def test_growth_never_goes_coarser_than_min_zoom() -> None:
    # GIVEN a lone island at zoom 8
    squares = _sq([(100, 60, 8, 0)])
    for min_zoom, want in ((8, (100, 60, 8)), (5, (12, 7, 5)), (0, (0, 0, 1))):
        # WHEN grown with various bounds (0 counts as 1: zoom 0 is the catch-all's root)
        out = territories(squares, _NONE, _ints(0), np.array([1.0]), np.array([True]), min_zoom)
        # THEN it grows right up to the bound and no further
        assert _rows(out.squares) == [want]


def test_islands_that_touch_across_the_antimeridian_are_one_region() -> None:
    # GIVEN two islands of worker 0 in the first and the last column of zoom 6 (diagonal neighbours across the
    #       antimeridian), one of worker 0 further down the first column, and no growth allowed
    squares = _sq([(0, 10, 6, 0), (63, 11, 6, 1), (0, 30, 6, 2)])
    # WHEN merged
    out = territories(squares, _NONE, _ints(0, 0, 0), np.array([1.0, 1.0, 1.0]), np.ones(3, dtype=bool), 6)
    # THEN the two touching islands are one region and the third is another; rows do not wrap
    assert out.of_item[0] == out.of_item[1] != out.of_item[2]
    assert sorted(out.loads.tolist()) == [1.0, 2.0]


def test_territories_are_numbered_by_worker_then_by_their_first_square() -> None:
    # GIVEN three separate islands, workers 1, 0 and 0, in that order, and no growth allowed
    squares = _sq([(5, 5, 6, 0), (40, 40, 6, 1), (20, 20, 6, 2)])
    # WHEN merged
    out = territories(squares, _NONE, _ints(1, 0, 0), np.array([1.0, 2.0, 3.0]), np.ones(3, dtype=bool), 6)
    # THEN worker 0's two regions come first, the one with the first square (by zoom, then x, then y) before
    #      the other, then worker 1's
    assert out.workers.tolist() == [0, 0, 1]
    assert out.of_item.tolist() == [2, 1, 0]
    assert out.loads.tolist() == [3.0, 2.0, 1.0]


def test_with_no_movable_item_everything_stays_as_it_is() -> None:
    # GIVEN two fixed items
    squares = _sq([(3, 3, 4, 0), (7, 7, 4, 1), (6, 7, 4, 1)])
    # WHEN grown
    out = territories(squares, _NONE, _ints(2, 0), np.array([4.0, 5.0]), np.zeros(2, dtype=bool), 1)
    # THEN each is its own region, in order, with its squares, worker and load
    assert out.of_item.tolist() == [0, 1]
    assert out.workers.tolist() == [2, 0]
    assert out.loads.tolist() == [4.0, 5.0]
    assert _rows(out.squares) == _rows(squares)
    assert out.squares.item.tolist() == [0, 1, 1]


def test_a_square_coarser_than_min_zoom_is_merged_with_the_squares_it_touches() -> None:
    # GIVEN one island of worker 0 listing the zoom-1 square (0, 0) and the zoom-2 square (2, 0) east of it
    squares = _sq([(0, 0, 1, 0), (2, 0, 2, 0)])
    # WHEN grown and merged with min_zoom 2
    out = territories(squares, _NONE, _ints(0), np.array([1.0]), np.array([True]), 2)
    # THEN the island is one region listing both squares, with its load
    assert out.workers.tolist() == [0]
    assert out.loads.tolist() == [1.0]
    assert out.squares.item.tolist() == [0, 0]
