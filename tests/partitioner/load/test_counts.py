"""Tests for partitioner.load.counts: the grid/refinement split, leaves, and counts as immutable values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioner.load.counts import Counts, Grid, counts_from_pairs
from partitioner.load.read import parse_counts_csv


def test_grid_and_refinement_of_a_rolled_up_quadtree() -> None:
    # GIVEN a rolled-up quadtree: a zoom-4 cell with two refining children, a deeper row with no ancestor,
    #       and a refinement of that orphan
    counts = counts_from_pairs([("0120", 5), ("01201", 3), ("01202", 2), ("013001", 4), ("0130012", 4), ("0230", 1)])
    # WHEN split into grid and refinement
    grid = counts.grid()
    # THEN the grid is at zoom 4 and holds every place once (the orphan summed into its zoom-4 ancestor)
    assert grid.zoom == 4
    assert sorted(grid.weight.tolist()) == [1.0, 4.0, 5.0]
    assert counts.total == 10.0
    # AND rows under a present ancestor are refinement
    assert counts.refinement() == {"01201": 3.0, "01202": 2.0, "0130012": 4.0}


def test_scaled_counts_are_a_new_value() -> None:
    # GIVEN counts WHEN scaled THEN the original is untouched (immutable) and the copy scaled
    counts = counts_from_pairs([("0", 2.0), ("1", 4.0)])
    doubled = counts.scaled(np.array([2.0, 0.5]))
    assert counts.weights.tolist() == [2.0, 4.0]
    assert doubled.weights.tolist() == [4.0, 2.0]
    with pytest.raises(ValueError):
        counts.weights[0] = 1.0


def test_counts_from_tiles_make_quadkeys_on_demand() -> None:
    # GIVEN counts read from a file (tile arrays inside)
    counts = parse_counts_csv("quadkey,weight\n0231,5\n023,6\n", "c.csv")
    # THEN the quadkeys, the grid and the refinement are as for counts built from strings
    ref = counts_from_pairs([("0231", 5.0), ("023", 6.0)])
    assert counts.quadkeys == ref.quadkeys
    assert counts.refinement() == ref.refinement() == {"0231": 5.0}
    assert counts.total == ref.total == 6.0


def _reference_leaves(counts: Counts) -> dict[str, float]:
    """The leaves as the original dict-based code computed them (grid cells, then refinement rows)."""
    from geokernel.geo.tiles import arrays_to_quadkeys

    grid = counts.grid()
    weights = dict(zip(arrays_to_quadkeys(grid.x, grid.y, grid.zoom), grid.weight.tolist(), strict=True))
    refinement = counts.refinement()
    weights.update(refinement)
    for q, w in refinement.items():
        for k in range(len(q) - 1, grid.zoom - 1, -1):
            if q[:k] in weights:
                weights[q[:k]] -= w
                break
    return {q: max(w, 0.0) for q, w in weights.items()}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("0123", min_size=2, max_size=6), st.integers(0, 20), min_size=1, max_size=25))
def test_leaves_count_every_place_once_like_the_reference(rows: dict[str, int]) -> None:
    # GIVEN any rolled-up quadtree (rows at several zooms, refinement under present ancestors, orphans)
    counts = counts_from_pairs([(q, float(w)) for q, w in rows.items()])
    # WHEN its leaves are computed (vectorised)
    leaves = counts.leaves()
    from geokernel.geo.tiles import arrays_to_quadkeys
    got = dict(zip(arrays_to_quadkeys(leaves.x, leaves.y, leaves.z), leaves.weight.tolist(), strict=True))
    # THEN they equal the reference's, row for row
    assert got == _reference_leaves(counts)


def test_a_grid_cell_names_its_quadkey() -> None:
    # GIVEN the grid of counts listed at zoom 3
    counts = counts_from_pairs([("120", 1.0), ("333", 2.0), ("001", 3.0)])
    grid = counts.grid()
    # WHEN each cell is asked for its quadkey
    names = {grid.quadkey(i): float(grid.weight[i]) for i in range(len(grid.x))}
    # THEN it is the quadkey the cell's load was listed under
    assert isinstance(grid, Grid)
    assert names == {"120": 1.0, "333": 2.0, "001": 3.0}
