"""Tests for partitioner.output.compare: the load two specs keep in common, and the ids they differ by."""

from __future__ import annotations

import pytest
from spec_factory import make_counts, make_spec, qk

from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.output.compare import spec_diff, stability
from partitioner.output.render import render_stability

Z = 10


def test_stability_identical_specs_keep_everything(two_squares):
    spec, counts = two_squares
    s = stability(spec, spec, counts)
    assert s.kept_share == 1.0 and s.moved_load == 0.0 and s.total == 80.0


def test_stability_counts_moved_worker_and_renamed_partition(two_squares):
    spec, counts = two_squares
    a, b = spec.partitions[0].quadkeys, spec.partitions[1].quadkeys
    # WHEN p0002 moves to another worker
    moved = make_spec([("p0001", "w0001", a, 40.0), ("p0002", "w0003", b, 40.0)], 50.0, version=2)
    # THEN its load has moved
    s = stability(spec, moved, counts)
    assert s.moved_load == 40.0 and s.kept_share == 0.5
    # AND a renamed partition moves too, even on the same worker
    renamed = make_spec([("p0003", "w0001", a, 40.0), ("p0002", "w0002", b, 40.0)], 50.0, version=2)
    assert stability(spec, renamed, counts).moved_share == 0.5
    assert "50.0% of load keeps its partition and worker; moved 40 of 80" in render_stability(s)


def test_stability_of_hash_split_cells_is_the_matching_range_overlap():
    hot = qk(5, 5, Z)
    half = HASH_BUCKETS // 2
    old = make_spec([("p0001", "w0001", [hot], 50.0, (0, half)), ("p0002", "w0002", [hot], 50.0, (half, HASH_BUCKETS))],
                    60.0)
    q = HASH_BUCKETS // 4
    new = make_spec([("p0001", "w0001", [hot], 25.0, (0, q)), ("p0002", "w0002", [hot], 75.0, (q, HASH_BUCKETS))],
                    80.0, version=2)
    # THEN [0, q) stays with p0001 and [half, end) stays with p0002: 3/4 kept
    assert stability(old, new, make_counts({hot: 100.0})).kept_share == pytest.approx(0.75)


def test_spec_diff_lists_added_removed_changed(two_squares):
    spec, _ = two_squares
    a = spec.partitions[0].quadkeys
    new = make_spec([("p0001", "w0001", a, 40.0), ("p0003", "w0001", [qk(900, 900, Z)], 1.0)], 50.0, version=2)
    d = spec_diff(spec, new)
    assert d.added == ("p0003",) and d.removed == ("p0002",)
    assert d.unchanged == ("p0001", "p9999") and d.changed == ()
    assert d.workers_removed == ("w0002",) and d.workers_added == ()
