"""Tests for partitioner.counts: CSV and snapshot parsing, errors, and the grid/refinement split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partitioner.counts import counts_from_pairs, parse_counts_csv, read_counts_csv, read_snapshot_rows
from partitioner.errors import CountsError


def test_reads_a_counts_csv(tmp_path: Path) -> None:
    # GIVEN a well-formed file
    f = tmp_path / "c.csv"
    f.write_text("quadkey,weight\n0231,5\n0232,2.5\n")
    # WHEN read
    counts = read_counts_csv(f)
    # THEN quadkeys and weights come through, and the total counts each place once
    assert counts.quadkeys == ("0231", "0232")
    assert counts.weights.tolist() == [5.0, 2.5]
    assert counts.total == 7.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("qk,w\n0,1\n", "header must be 'quadkey,weight'"),
        ("quadkey,weight\n", "no data rows"),
        ("quadkey,weight\n012,1\n01x,2\n", "line 3: quadkey '01x' has characters other than 0-3"),
        ("quadkey,weight\n012,-1\n", "line 2: weight -1.0 is negative"),
        ("quadkey,weight\n012,nan\n", "line 2: weight nan is not finite"),
        ("quadkey,weight\n012,abc\n", "line 2: weight 'abc' is not a number"),
        ("quadkey,weight\n012,1\n012,2\n", "line 3: quadkey '012' already given on line 2"),
        ("quadkey,weight\n012,1,3\n", "expected 2 fields"),
    ],
)
def test_bad_counts_name_the_value_and_line(text: str, message: str) -> None:
    # GIVEN/WHEN a malformed file THEN the error names the bad value and where it is
    with pytest.raises(CountsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_counts_csv(text, "c.csv")


def test_mixed_zooms_are_refused_where_not_allowed() -> None:
    with pytest.raises(CountsError, match=r"c.csv line 3: quadkey '0123' is zoom 4 but line 2 is zoom 3"):
        parse_counts_csv("quadkey,weight\n012,1\n0123,1\n", "c.csv", allow_mixed_zoom=False)


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CountsError, match=r"nope\.csv"):
        read_counts_csv(tmp_path / "nope.csv")


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


def test_snapshot_rows_prefer_cost_and_fall_back_to_events() -> None:
    # GIVEN snapshot rows, one with a measured cost
    text = "quadkey,events,cost\n0231,100,250.5\n0232,40,\n"
    # WHEN read with and without cost
    with_cost = read_snapshot_rows(text, "snap")
    events_only = read_snapshot_rows(text, "snap", use_cost=False)
    # THEN cost is the weight where present, events elsewhere
    assert with_cost.weights.tolist() == [250.5, 40.0]
    assert events_only.weights.tolist() == [100.0, 40.0]


def test_empty_snapshot_is_an_error() -> None:
    with pytest.raises(CountsError, match="snap: snapshot has no rows"):
        read_snapshot_rows("quadkey,events,cost\n", "snap")


def test_scaled_counts_are_a_new_value() -> None:
    # GIVEN counts WHEN scaled THEN the original is untouched (immutable) and the copy scaled
    counts = counts_from_pairs([("0", 2.0), ("1", 4.0)])
    doubled = counts.scaled(np.array([2.0, 0.5]))
    assert counts.weights.tolist() == [2.0, 4.0]
    assert doubled.weights.tolist() == [4.0, 2.0]
    with pytest.raises(ValueError):
        counts.weights[0] = 1.0
