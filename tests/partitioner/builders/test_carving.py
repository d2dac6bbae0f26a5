"""Tests for partitioner.builders.carving: regions from cells, bridging and gap filling."""

from __future__ import annotations

import numpy as np

from geokernel.geo.graph import components
from geokernel.geo.tiles import arrays_to_quadkeys
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.rules import validate
from partitioner.builders import build_spec, build_with_report
from partitioner.builders.carving import ComponentMemo, carve_cells
from partitioner.load.counts import Grid, counts_from_pairs


def test_a_fresh_build_gives_the_empty_hole_inside_a_region_to_that_region() -> None:
    # GIVEN load on a 5x5 block of cells with an empty 1x1 hole in the middle
    cells = [(x, y) for x in range(100, 105) for y in range(200, 205) if (x, y) != (102, 202)]
    qks = arrays_to_quadkeys([c[0] for c in cells], [c[1] for c in cells], 9)
    counts = counts_from_pairs([(q, 1.0) for q in qks])
    # WHEN built under a cap above the total
    spec = build_with_report(counts, 100.0).spec
    # THEN the hole belongs to the region, not to the catch-all
    index = SpecIndex(spec)
    owner = index.locate_xy(np.array([102]), np.array([202]), 9)[0]
    assert owner != index.catch_all_index
    assert validate(spec) == []


def test_nearby_clusters_are_bridged_into_one_region_that_lists_coarse_cells() -> None:
    # GIVEN two 2x2 clusters of zoom-10 cells four columns apart (in adjacent 8x8 blocks), 40 load in all
    x = np.array([6, 7, 6, 7, 12, 13, 12, 13], dtype=np.int64) + 800
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64) + 400
    grid = Grid(10, x, y, np.full(8, 5.0))
    # WHEN carved under a cap above their total, with and without bridging
    bridged = carve_cells(grid, 100.0, bridge_levels=3)
    apart = carve_cells(grid, 100.0, bridge_levels=0)
    # THEN bridging makes one region of the two zoom-7 blocks (the empty cells between included)
    assert [(r.quadkeys, r.load) for r in bridged] == [(tuple(arrays_to_quadkeys([100, 101], [50, 50], 7)), 40.0)]
    # AND without it each cluster is its own region, its 2x2 cells listed as their zoom-9 parent
    assert sorted(r.quadkeys for r in apart) == [tuple(arrays_to_quadkeys([403], [200], 9)),
                                                 tuple(arrays_to_quadkeys([406], [200], 9))]


def test_a_component_over_the_cap_is_carved_into_connected_pieces_within_it() -> None:
    # GIVEN a 6x6 block of 1-load cells (36) under a cap of 10
    bx, by = np.meshgrid(np.arange(6), np.arange(6))
    grid = Grid(10, bx.ravel().astype(np.int64) + 300, by.ravel().astype(np.int64) + 300, np.ones(36))
    # WHEN carved without bridging
    regions = carve_cells(grid, 10.0, bridge_levels=0)
    # THEN 4 pieces (ceil(36 / 10)), each within the cap, all load kept
    assert len(regions) == 4
    assert all(r.load <= 10.0 for r in regions)
    assert sum(r.load for r in regions) == 36.0


def test_a_grid_coarser_than_the_bridge_levels_builds() -> None:
    # GIVEN counts at zoom 1 (quadkeys "0".."3"), shallower than the bridge levels
    counts = counts_from_pairs([("1", 5.0), ("0", 3.0), ("2", 1.0)])
    # WHEN built (this used to fail with "negative shift count")
    spec = build_spec(counts, 6.0)
    # THEN every cell is listed once and the spec is valid
    listed = [q for p in spec.partitions for q in p.quadkeys if q]
    assert sorted(listed) == sorted(set(listed)) and {"0", "1", "2"} <= set(listed)
    assert len(spec.workers) == 2 and not validate(spec)


def test_a_component_memo_finds_each_subset_once_and_each_subset_its_own_components() -> None:
    # GIVEN two 3x3 blocks joined by one cell, and the memo of their grid
    cells = [(x, y) for x in range(10, 13) for y in range(10, 13)] + [(13, 11)] + \
        [(x, y) for x in range(14, 17) for y in range(10, 13)]
    grid = Grid(8, np.array([c[0] for c in cells]), np.array([c[1] for c in cells]), np.ones(len(cells)))
    memo = ComponentMemo(grid)
    everything, without_bridge = np.arange(len(cells)), np.flatnonzero(grid.x != 13)
    # WHEN asked for the components of all cells (twice, the second time as a copy) and of all but the bridge
    first, again = memo.of(everything), memo.of(everything.copy())
    split = memo.of(without_bridge)
    # THEN the same answer is given again without a new search, and each subset has its own components
    assert again is first
    assert first[0] == 1
    n, labels = components(grid.x[without_bridge], grid.y[without_bridge], 8)
    assert split[0] == n == 2 and split[1].tolist() == labels.tolist()
