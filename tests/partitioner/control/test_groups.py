"""Tests for partitioner.control.groups: each history region in the group of the worker holding its smoothed load."""

from __future__ import annotations

from spec_factory import make_counts, make_spec, qk

from partitioner.control.forecast import LoadHistory
from partitioner.control.groups import region_groups
from partitioner.control.levels import CellLevels
from partitioner.load.loads import cells_of, spec_loads

Z = 10
A = [qk(1, 1, Z), qk(2, 1, Z)]  # region (zoom 6) 0,0
B = [qk(17, 1, Z), qk(18, 1, Z)]  # region 1,0
C = [qk(33, 1, Z)]  # a cell of region 2,0, whose whole square B's worker lists; no level holds it any more
SPEC = make_spec([("p0001", "w0001", A, 10.0), ("p0002", "w0002", [*B, qk(2, 0, Z - 4)], 10.0)], 100.0, version=1)


def test_a_region_joins_the_worker_of_its_smoothed_load_and_a_region_without_levels_the_worker_of_its_centre():
    # GIVEN a history that saw A, B and C, and levels that kept only A and B (C has gone quiet and was forgotten)
    counts = make_counts({**{q: 5.0 for q in A + B}, C[0]: 5.0})
    history = LoadHistory.empty(Z - 4, 300.0).absorb(cells_of(counts), 300.0, 300.0, 12)
    kept = make_counts({q: 5.0 for q in A + B}).grid()
    levels = CellLevels.empty(Z).update((kept.x << Z) | kept.y, kept.weight, alpha=0.5, jump_z=3.0)

    # WHEN the regions are grouped by the current spec's workers
    groups = region_groups(history, levels, spec_loads(SPEC))

    # THEN A's region is w0001's group, B's is w0002's, and C's (no level left) goes by its centre cell to w0002
    by_region = dict(zip(history.regions.tolist(), groups.tolist(), strict=True))
    assert [by_region[(x << (Z - 4)) | 0] for x in (0, 1, 2)] == [0, 1, 1]
