"""Tests for partitioner.builders.hot: hot cells split into finer cells or by entity hash."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from spec_factory import qk

from geokernel.geo.tiles import bounds, quadkey_to_tile
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders import build_with_report
from partitioner.builders.hot import hash_split
from partitioner.load.bound import lower_bound
from partitioner.load.counts import counts_from_pairs


def test_hot_cell_without_finer_counts_is_split_by_entity_hash() -> None:
    # GIVEN one cell 3.5x hotter than the cap next to a cold one
    counts = counts_from_pairs([("0231", 350.0), ("0230", 20.0)])
    # WHEN building
    report = build_with_report(counts, 100.0)
    shares = [p for p in report.spec.partitions if p.hash_range is not None]
    # THEN the hot cell is split into hash shares covering every bucket, each within the cap
    assert report.hash_split_cells == 1
    assert sorted(p.hash_range for p in shares)[0][0] == 0  # type: ignore[index]
    assert sum(p.hash_range[1] - p.hash_range[0] for p in shares) == HASH_BUCKETS  # type: ignore[index]
    assert all(p.load <= 100.0 for p in shares)
    assert sum(p.load for p in shares) == pytest.approx(350.0)
    assert len(report.spec.workers) <= lower_bound(370.0, 100.0) + 1


def test_hot_cell_with_finer_counts_is_split_into_finer_quadkeys() -> None:
    # GIVEN a hot cell whose children are given as refinement rows
    counts = counts_from_pairs([("0231", 300.0), ("02310", 90.0), ("02311", 80.0), ("02312", 70.0),
                                ("02313", 60.0), ("0230", 10.0)])
    # WHEN building with a cap below the parent but above each child
    spec = build_with_report(counts, 100.0).spec
    # THEN no hash split is needed and the children are listed in regions within the cap
    assert all(p.hash_range is None for p in spec.partitions)
    listed = {q for p in spec.partitions for q in p.quadkeys}
    assert {"02310", "02311", "02312", "02313"} <= listed
    assert max(w.load for w in spec.workers) <= 100.0
    # AND a point in the hot cell finds one partition that lists one of its children
    b = bounds(quadkey_to_tile("0231"))
    owner = SpecIndex(spec).locate_one((b.west + b.east) / 2, (b.south + b.north) / 2)
    assert not owner.is_catch_all


def test_hash_split_shares_stay_within_cap_for_awkward_ratios() -> None:
    # GIVEN loads that are not multiples of the cap
    for load in (100.0001, 199.99, 1234.5, 65535.0):
        # WHEN splitting
        shares = hash_split("0123", load, 100.0)
        # THEN shares tile the bucket space, each is within the cap, and the load is conserved
        assert shares[0].hash_range[0] == 0 and shares[-1].hash_range[1] == HASH_BUCKETS  # type: ignore[index]
        assert all(s.load <= 100.0 + 1e-9 for s in shares)
        assert sum(s.load for s in shares) == pytest.approx(load)


def test_many_hot_cells_next_to_big_cells_fill_workers_within_the_lower_bound_plus_one() -> None:
    # GIVEN a quay of 14 cells each 1.2 to 3.3 caps hot, next to 600 cells of up to 0.7 caps (a port at zoom 12)
    rng = np.random.default_rng(5)
    cap = 1000.0
    rows = {qk(x, y, 12): float(rng.integers(50, 700)) for x in range(400, 430) for y in range(300, 320)}
    rows.update({qk(405 + k, 320, 12): cap * (1.2 + 0.16 * k) for k in range(14)})
    counts = counts_from_pairs(list(rows.items()))
    # WHEN built (shares sized to fill the room the regions leave; this used to take lb + 40 workers)
    report = build_with_report(counts, cap)
    # THEN at most one worker above the lower bound, none over the cap, every hot cell's shares tile its buckets
    lb = lower_bound(counts.total, cap)
    assert report.hot_cells == 14
    assert len(report.spec.workers) <= lb + 1
    assert max(w.load for w in report.spec.workers) <= cap * (1 + 1e-9)
    for q in (qk(405 + k, 320, 12) for k in range(14)):
        ranges = sorted(p.hash_range for p in report.spec.partitions if p.quadkeys == (q,) and p.hash_range)
        assert ranges[0][0] == 0 and ranges[-1][1] == HASH_BUCKETS
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
