"""Tests for partitioner.builders.seed: the seed baseline."""

from __future__ import annotations

from partitioner.builders import build_with_report
from partitioner.load.counts import counts_from_pairs


def test_seed_strategy_cannot_split_a_hot_cell_and_says_so() -> None:
    # GIVEN a quadkey hotter than the cap
    counts = counts_from_pairs([("0231", 350.0), ("0230", 20.0)])
    # WHEN the seed baseline builds
    report = build_with_report(counts, 100.0, strategy="seed")
    # THEN the hot cell is one partition over the cap, reported as a problem
    assert any("exceeds max_load" in p for p in report.problems)
