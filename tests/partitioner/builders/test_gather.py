"""Tests for partitioner.builders.gather: the Hilbert curve and handing small regions out along it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.geo.tiles import IntArray
from partitioner.builders.gather import gather, hilbert


def _all_tiles(zoom: int) -> tuple[IntArray, IntArray]:
    n = 1 << zoom
    xs, ys = np.meshgrid(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), indexing="ij")
    return xs.ravel(), ys.ravel()


def _worker_loads(workers: list[int], loads: list[float]) -> list[float]:
    per_worker: list[float] = np.bincount(workers, weights=loads, minlength=max(workers) + 1).tolist()
    return per_worker


def test_hilbert_gives_the_tiles_of_a_zoom_the_positions_zero_to_four_to_the_zoom_each_once() -> None:
    for zoom in range(7):
        # GIVEN every tile of a small zoom
        x, y = _all_tiles(zoom)
        # WHEN placed on the curve
        d = hilbert(x, y, zoom)
        # THEN the positions are exactly 0 .. 4^zoom - 1, one per tile
        assert sorted(d.tolist()) == list(range(4**zoom))


def test_tiles_next_to_each_other_along_the_hilbert_curve_share_an_edge() -> None:
    for zoom in range(1, 7):
        # GIVEN every tile of a small zoom, in the order of the curve
        x, y = _all_tiles(zoom)
        order = np.argsort(hilbert(x, y, zoom))
        # THEN each step of the curve moves to an edge neighbour (the curve never jumps, nor wraps)
        steps = np.abs(np.diff(x[order])) + np.abs(np.diff(y[order]))
        assert (steps == 1).all()


def test_every_quadtree_square_is_one_aligned_stretch_of_the_hilbert_curve() -> None:
    # GIVEN every tile at zoom 5
    zoom = 5
    x, y = _all_tiles(zoom)
    d = hilbert(x, y, zoom)
    for z in range(zoom + 1):
        # WHEN the tiles are grouped by their square at a coarser zoom z
        shift = zoom - z
        square = (x >> shift) * (1 << z) + (y >> shift)
        for s in np.unique(square).tolist():
            inside = np.sort(d[square == s])
            # THEN each square's positions are one run of 4^(zoom - z), starting at a multiple of it
            assert inside[0] % (4**shift) == 0
            assert inside.tolist() == list(range(int(inside[0]), int(inside[0]) + 4**shift))


def test_at_zoom_zero_the_only_tile_is_at_position_zero_and_no_tiles_give_no_positions() -> None:
    # GIVEN the world tile, and no tiles at all
    # THEN the world tile sits at 0 and an empty batch gives an empty array
    assert hilbert(np.array([0]), np.array([0]), 0).tolist() == [0]
    assert hilbert(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 10).tolist() == []


@settings(max_examples=50, deadline=None)
@given(zoom=st.integers(1, 30), data=st.data())
def test_deep_tiles_keep_the_curve_properties(zoom: int, data: st.DataObject) -> None:
    # GIVEN random tiles at any zoom up to 30
    n = 1 << zoom
    tiles = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=30,
                               unique=True))
    x = np.array([t[0] for t in tiles], dtype=np.int64)
    y = np.array([t[1] for t in tiles], dtype=np.int64)
    # WHEN placed on the curve
    d = hilbert(x, y, zoom)
    # THEN distinct tiles get distinct positions in 0 .. 4^zoom - 1
    assert len(set(d.tolist())) == len(tiles)
    assert ((d >= 0) & (d < 4**zoom)).all()
    # AND a tile's parent sits at its position divided by four (a square is one stretch of the curve)
    assert (hilbert(x >> 1, y >> 1, zoom - 1) == d >> 2).all()
    # AND the next position along the curve belongs to one of the four edge neighbours
    for tx, ty, td in zip(x.tolist(), y.tolist(), d.tolist(), strict=True):
        if td == 4**zoom - 1:
            continue
        nx = np.array([tx - 1, tx + 1, tx, tx], dtype=np.int64)
        ny = np.array([ty, ty, ty - 1, ty + 1], dtype=np.int64)
        ok = (nx >= 0) & (nx < n) & (ny >= 0) & (ny < n)
        assert td + 1 in hilbert(nx[ok], ny[ok], zoom).tolist()


def test_gathering_nothing_movable_changes_nothing() -> None:
    # GIVEN three regions on two workers, none movable
    workers = [0, 1, 1]
    # WHEN gathered
    out = gather(workers, [1.0, 2.0, 3.0], [], [5, 1, 3], 10.0)
    # THEN every region keeps its worker (and the result is a new list)
    assert out == [0, 1, 1]
    assert out is not workers


def test_each_worker_takes_the_next_run_of_the_curve_from_the_worker_homed_first() -> None:
    # GIVEN two workers whose small regions are interleaved along the curve; worker 1's heaviest fixed
    #       region (its home) comes first on the curve, worker 0's last
    workers = [0, 1, 0, 1, 0, 1, 0, 1]
    loads = [5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    keys = [100, 0, 10, 11, 12, 13, 14, 15]
    movable = [2, 3, 4, 5, 6, 7]
    # WHEN gathered with plenty of room
    out = gather(workers, loads, movable, keys, 100.0)
    # THEN worker 1 takes the first three small regions (its target), worker 0 the last three; the fixed stay
    assert out == [0, 1, 1, 1, 1, 0, 0, 0]
    assert _worker_loads(out, loads) == _worker_loads(workers, loads)


def test_a_worker_stops_taking_regions_once_it_reaches_its_small_load() -> None:
    # GIVEN worker 0 (home first) with 1.0 of small load, worker 1 with 1.0, regions of 0.5 along the curve
    workers = [0, 1, 0, 1, 0, 1]
    loads = [3.0, 3.0, 0.5, 0.5, 0.5, 0.5]
    keys = [0, 99, 1, 2, 3, 4]
    # WHEN gathered
    out = gather(workers, loads, [2, 3, 4, 5], keys, 10.0)
    # THEN worker 0 takes the first two and stops there; the last worker takes what is left
    assert out == [0, 1, 0, 0, 1, 1]


def test_a_worker_without_a_fixed_region_is_at_home_at_its_first_small_region() -> None:
    # GIVEN worker 0 with only small regions (at keys 10 and 90); worker 1 with a fixed region at key 50 and a
    #       small one at key 0
    workers = [1, 0, 0, 1]
    loads = [5.0, 1.0, 1.0, 1.0]
    keys = [50, 10, 90, 0]
    # WHEN gathered
    out = gather(workers, loads, [1, 2, 3], keys, 100.0)
    # THEN worker 0 (at home at key 10, before worker 1) sweeps first and takes the first two small regions along
    #      the curve (keys 0 and 10); worker 1 takes the last
    assert out == [1, 0, 1, 0]


def test_a_worker_with_no_small_load_takes_none_when_the_others_have_room() -> None:
    # GIVEN worker 0 homed first on the curve with only a fixed region, worker 1 with small regions
    workers = [0, 1, 1, 1]
    loads = [1.0, 1.0, 1.0, 1.0]
    keys = [0, 50, 10, 20]
    # WHEN gathered with plenty of room
    out = gather(workers, loads, [2, 3], keys, 100.0)
    # THEN the small regions stay on worker 1
    assert out == [0, 1, 1, 1]


def test_a_region_that_does_not_fit_is_skipped_and_goes_to_the_next_worker() -> None:
    # GIVEN worker 0 (home first) with 6 fixed and small regions 3 and 1; worker 1 with 5 fixed and small 2 and 1;
    #       along the curve: 2 [w1], 3 [w0], 1 [w1], 1 [w0]
    workers = [0, 1, 1, 0, 1, 0]
    loads = [6.0, 5.0, 2.0, 3.0, 1.0, 1.0]
    keys = [0, 99, 1, 2, 3, 4]
    # WHEN gathered at cap 10 (worker 0 has room for 4)
    out = gather(workers, loads, [2, 3, 4, 5], keys, 10.0)
    # THEN worker 0 takes the 2, skips the 3 (it would pass the cap) and takes the two 1s (reaching its 4);
    #      worker 1 takes the 3 it skipped
    assert out == [0, 1, 0, 1, 0, 0]
    assert _worker_loads(out, loads) == [10.0, 8.0]


def test_a_smaller_region_makes_way_for_a_leftover_that_fits_nowhere() -> None:
    # GIVEN two workers at 0.95 of cap 1: worker 0 (home first) 0.65 fixed + 0.3 small;
    #       worker 1 0.3 fixed + 0.45 and 0.2 small; along the curve 0.2, 0.45, 0.3
    workers = [0, 1, 0, 1, 1]
    loads = [0.65, 0.3, 0.3, 0.45, 0.2]
    keys = [0, 99, 3, 2, 1]
    # WHEN gathered (worker 0 takes 0.2 and skips the rest, worker 1 takes 0.45 and cannot take the 0.3)
    out = gather(workers, loads, [2, 3, 4], keys, 1.0)
    # THEN the 0.2 makes way on worker 0 for the 0.3 and moves to worker 1: no new worker, no worker over the cap
    assert out == [0, 1, 0, 1, 1]
    assert max(out) == 1
    assert max(_worker_loads(out, loads)) <= 1.0 + 1e-9


def test_leftovers_that_fit_nowhere_start_one_new_worker() -> None:
    # GIVEN worker 0 over the cap with its fixed region alone and two small regions besides, worker 1 nearly full
    workers = [0, 0, 0, 1]
    loads = [10.5, 0.4, 0.3, 9.8]
    keys = [0, 1, 2, 3]
    # WHEN gathered at cap 10
    out = gather(workers, loads, [1, 2], keys, 10.0)
    # THEN the fixed regions stay and both small regions go to one new worker (index 2), which stays in the cap
    assert out == [0, 2, 2, 1]
    assert _worker_loads(out, loads)[2] <= 10.0


def test_a_worker_already_over_the_cap_keeps_its_fixed_load_and_takes_no_small_region() -> None:
    # GIVEN worker 0 over the cap with fixed load alone, worker 1 with room for its own small regions and more
    workers = [0, 1, 0, 1, 1]
    loads = [11.0, 2.0, 1.0, 1.0, 1.0]
    keys = [0, 50, 1, 2, 3]
    # WHEN gathered at cap 10
    out = gather(workers, loads, [2, 3, 4], keys, 10.0)
    # THEN worker 0 keeps only its fixed region; the small regions all go to worker 1
    assert out == [0, 1, 1, 1, 1]


@st.composite
def _placements(draw: st.DrawFn) -> tuple[list[int], list[float], list[int], list[int]]:
    """Workers (each with at least one region), integer loads as floats, the movable regions, distinct keys."""
    n_workers = draw(st.integers(1, 6))
    extra = draw(st.lists(st.integers(0, n_workers - 1), max_size=30))
    workers = list(range(n_workers)) + extra
    loads = [float(v) for v in draw(st.lists(st.integers(0, 40), min_size=len(workers), max_size=len(workers)))]
    movable = sorted(draw(st.sets(st.sampled_from(range(len(workers))))))
    keys = draw(st.lists(st.integers(0, 4**8 - 1), min_size=len(workers), max_size=len(workers), unique=True))
    return workers, loads, movable, keys


@settings(max_examples=50, deadline=None)
@given(case=_placements(), spare=st.integers(0, 20))
def test_gathering_places_every_region_keeps_the_fixed_ones_and_no_worker_passes_a_feasible_cap(
        case: tuple[list[int], list[float], list[int], list[int]], spare: int) -> None:
    # GIVEN any placement and a cap no worker passes before gathering
    workers, loads, movable, keys = case
    cap = max(_worker_loads(workers, loads)) + spare
    # WHEN gathered
    out = gather(workers, loads, movable, keys, cap)
    # THEN every region has a worker, the non-movable ones their own, and no worker is over the cap
    assert len(out) == len(workers)
    assert all(w >= 0 for w in out)
    fixed = set(range(len(workers))) - set(movable)
    assert all(out[i] == workers[i] for i in fixed)
    assert max(_worker_loads(out, loads)) <= cap + 1e-9
    # AND the total load is unchanged and any new worker is numbered right after the given ones
    assert sum(_worker_loads(out, loads)) == sum(loads)
    n = max(workers) + 1
    assert set(out) - set(range(n)) <= set(range(n, max(out) + 1))


@settings(max_examples=50, deadline=None)
@given(case=_placements(), spare=st.integers(0, 20))
def test_gathering_adds_no_worker_when_the_given_workers_have_room_for_the_largest_region_each(
        case: tuple[list[int], list[float], list[int], list[int]], spare: int) -> None:
    # GIVEN any placement and a cap that leaves, over all workers, room for the largest small region on each
    workers, loads, movable, keys = case
    n = max(workers) + 1
    largest = max((loads[i] for i in movable), default=0.0)
    cap = max(max(_worker_loads(workers, loads)), sum(loads) / n + largest) + spare
    # WHEN gathered
    out = gather(workers, loads, movable, keys, cap)
    # THEN no new worker starts (some worker always has room for what is left) and none passes the cap
    assert max(out) < n
    assert max(_worker_loads(out, loads)) <= cap + 1e-9


@settings(max_examples=50, deadline=None)
@given(case=_placements())
def test_with_room_to_spare_no_worker_takes_more_than_one_small_region_above_its_load_and_runs_stay_whole(
        case: tuple[list[int], list[float], list[int], list[int]]) -> None:
    # GIVEN any placement and a cap far above every worker's load (nothing is skipped, nothing left over)
    workers, loads, movable, keys = case
    n = max(workers) + 1
    cap = sum(loads) + 1.0
    small = np.zeros(n)
    for i in movable:
        small[workers[i]] += loads[i]
    # WHEN gathered
    out = gather(workers, loads, movable, keys, cap)
    # THEN no worker ends more than one small region above the small load it had, and a worker with no small
    #      load takes none
    got = np.zeros(n)
    for i in movable:
        got[out[i]] += loads[i]
    largest = max((loads[i] for i in movable), default=0.0)
    assert max(out) < n
    assert (got[small == 0] == 0).all()
    assert (got <= small + largest).all()
    # AND each worker's small regions are one run of the curve
    order = sorted(movable, key=lambda i: keys[i])
    runs = [out[i] for k, i in enumerate(order) if k == 0 or out[order[k - 1]] != out[i]]
    assert len(runs) == len(set(runs))

