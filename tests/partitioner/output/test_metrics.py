"""Tests for partitioner.output.metrics: load attribution, utilisation, shape and the JSON form of the metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_factory import make_counts, make_spec, qk

from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.load.bound import lower_bound
from partitioner.output.metrics import evaluate, leaf_loads

Z = 10


def test_loads_utilisation_and_lower_bound(two_squares):
    spec, counts = two_squares
    # WHEN the spec is evaluated under the load it was made for
    m = evaluate(spec, counts)
    # THEN loads, utilisation and the lower bound follow from the cells
    assert [p.load for p in m.partitions] == [40.0, 40.0, 0.0]
    assert [w.utilisation for w in m.workers] == [0.8, 0.8]
    assert m.total == 80.0
    assert m.lower_bound == 2 == lower_bound(80.0, 50.0)
    assert m.worker_count == 2 and m.waste_ratio == 1.0
    assert m.max_utilisation == m.mean_utilisation == m.median_utilisation == 0.8
    assert m.unlisted_load == 0.0


def test_square_regions_are_contiguous_and_compact(two_squares):
    spec, counts = two_squares
    m = evaluate(spec, counts)
    # THEN both squares are 8-connected and score 4/pi (P = 8, A = 4)
    assert m.contiguous and m.non_contiguous == ()
    assert [p.cells for p in m.partitions[:2]] == [4, 4]
    assert m.partitions[0].compactness == pytest.approx(4 / math.pi)
    assert m.median_compactness == pytest.approx(4 / math.pi)
    assert m.partitions[2].compactness is None  # the catch-all is not a region


def test_boundary_load_share_counts_cells_touching_another_worker(two_squares):
    spec, counts = two_squares
    # THEN the two columns along the shared edge (4 of 8 cells) are boundary load
    assert evaluate(spec, counts).boundary_load_share == pytest.approx(0.5)
    # AND with both squares on one worker there is no boundary at all
    one = make_spec([("p0001", "w0001", [q for p in spec.partitions[:2] for q in p.quadkeys], 80.0)], 100.0)
    assert evaluate(one, counts).boundary_load_share == 0.0


def test_non_contiguous_region_is_named():
    # GIVEN a partition made of two cells three columns apart
    spec = make_spec([("p0001", "w0001", [qk(10, 10, Z), qk(13, 10, Z)], 2.0)], 10.0)
    m = evaluate(spec, make_counts({qk(10, 10, Z): 1.0, qk(13, 10, Z): 1.0}))
    # THEN it is reported as 2 components
    assert not m.contiguous
    assert m.non_contiguous == ("p0001",)
    assert m.partitions[0].components == 2


def test_diagonal_cells_are_8_connected():
    spec = make_spec([("p0001", "w0001", [qk(10, 10, Z), qk(11, 11, Z)], 2.0)], 10.0)
    assert evaluate(spec, make_counts({qk(10, 10, Z): 1.0, qk(11, 11, Z): 1.0})).contiguous


def test_region_across_the_antimeridian_is_contiguous():
    # GIVEN cells in the last and the first column of the same row
    n = 1 << Z
    cells = [qk(n - 1, 300, Z), qk(0, 300, Z)]
    spec = make_spec([("p0001", "w0001", cells, 2.0)], 10.0)
    m = evaluate(spec, make_counts(dict.fromkeys(cells, 1.0)))
    # THEN adjacency wraps: one component, a 2x1 bar (P = 6, A = 2)
    assert m.contiguous
    assert m.partitions[0].compactness == pytest.approx(36 / (8 * math.pi))


def test_coarse_cell_with_a_hole_carved_by_a_finer_listing():
    # GIVEN p0001 lists a zoom-9 cell and p0002 lists one of its four zoom-10 children
    parent = qk(250, 200, Z - 1)
    child = qk(500, 400, Z)
    others = [qk(501, 400, Z), qk(500, 401, Z), qk(501, 401, Z)]
    spec = make_spec([("p0001", "w0001", [parent], 3.0), ("p0002", "w0002", [child], 5.0)], 10.0)
    counts = make_counts({child: 5.0, **dict.fromkeys(others, 1.0)})
    # WHEN evaluated at grid zoom 10
    m = evaluate(spec, counts)
    # THEN the coarse partition covers the three remaining cells (an L, still connected)
    assert [p.load for p in m.partitions[:2]] == [3.0, 5.0]
    assert [p.cells for p in m.partitions[:2]] == [3, 1]
    assert m.contiguous
    assert m.partitions[0].compactness == pytest.approx(64 / (12 * math.pi))  # L of 3: P = 8


def test_unlisted_load_goes_to_the_catch_all():
    spec = make_spec([("p0001", "w0001", [qk(1, 1, Z)], 1.0)], 10.0)
    m = evaluate(spec, make_counts({qk(1, 1, Z): 1.0, qk(700, 700, Z): 4.0}))
    assert m.unlisted_load == 4.0
    assert m.partitions[-1].is_catch_all and m.partitions[-1].load == 4.0


def test_hash_split_cell_shares_its_load_and_is_not_a_region():
    # GIVEN a hot cell split 3/4 : 1/4 by entity hash across two workers
    hot = qk(5, 5, Z)
    cut = 3 * HASH_BUCKETS // 4
    spec = make_spec([("p0001", "w0001", [hot], 75.0, (0, cut)), ("p0002", "w0002", [hot], 25.0, (cut, HASH_BUCKETS))],
                     80.0)
    m = evaluate(spec, make_counts({hot: 100.0}))
    # THEN the load is shared by hash range and the shares are skipped by the shape checks
    assert [p.load for p in m.partitions[:2]] == [75.0, 25.0]
    assert [p.share for p in m.partitions[:2]] == [0.75, 0.25]
    assert m.partitions[0].compactness is None and m.contiguous


def test_leaf_loads_count_refined_rows_once():
    # GIVEN a rolled-up quadtree: a cell of 10 with a refined child of 4
    parent, child = qk(8, 8, Z), qk(16, 16, Z + 1)
    counts = make_counts({parent: 10.0, child: 4.0, qk(9, 8, Z): 1.0})
    qks, w = leaf_loads(counts)
    # THEN the parent keeps only the unrefined rest and the total is unchanged
    leaves = dict(zip(qks, w, strict=True))
    assert leaves[parent] == 6.0 and leaves[child] == 4.0
    assert float(w.sum()) == counts.total == 11.0
    # AND a partition owning only the refined child receives exactly its load
    spec = make_spec([("p0001", "w0001", [parent, qk(9, 8, Z)], 7.0), ("p0002", "w0002", [child], 4.0)], 10.0)
    m = evaluate(spec, counts)
    assert [p.load for p in m.partitions[:2]] == [7.0, 4.0]


def test_metrics_to_dict_is_json_ready(two_squares):
    import json

    spec, counts = two_squares
    d = json.loads(json.dumps(evaluate(spec, counts).to_dict()))
    assert d["worker_count"] == 2 and d["lower_bound"] == 2 and d["contiguous"] is True
    assert d["partitions"][0]["id"] == "p0001"


def test_metrics_to_dict_holds_exactly_what_dataclasses_asdict_gives(two_squares):
    # GIVEN a measured spec WHEN turned into a dict (field by field, one level)
    import dataclasses

    spec, counts = two_squares
    m = evaluate(spec, counts)
    d = m.to_dict()
    # THEN every field, partition and worker equals the recursive dataclasses.asdict form, lists for tuples
    deep = dataclasses.asdict(m)
    for key, value in deep.items():
        if key in ("partitions", "workers"):
            assert [{k: list(v) if isinstance(v, tuple) else v for k, v in row.items()} for row in value] == d[key]
        else:
            assert (list(value) if isinstance(value, tuple) else value) == d[key], key
    # AND the derived measures ride along
    assert set(d) == set(deep) | {"worker_count", "region_count", "waste_ratio", "mismatch",
                                  "median_regions_per_worker", "max_regions_per_worker"}


@settings(max_examples=40, deadline=None)
@given(x0=st.integers(0, (1 << Z) - 1), y0=st.integers(0, (1 << Z) - 8), w=st.integers(1, 7), h=st.integers(1, 7))
def test_rectangles_anywhere_are_contiguous_with_exact_compactness(x0: int, y0: int, w: int, h: int):
    # GIVEN a w x h rectangle of cells starting anywhere (wrapping across the antimeridian)
    n = 1 << Z
    cells = [qk((x0 + dx) % n, y0 + dy, Z) for dx in range(w) for dy in range(h)]
    spec = make_spec([("p0001", "w0001", cells, float(len(cells)))], 100.0)
    m = evaluate(spec, make_counts(dict.fromkeys(cells, 1.0)))
    # THEN it is one component, covers w*h cells and scores (2(w+h))^2 / (4 pi w h)
    assert m.contiguous and m.partitions[0].cells == w * h
    assert m.partitions[0].compactness == pytest.approx((2 * (w + h)) ** 2 / (4 * math.pi * w * h))
    assert m.total == pytest.approx(sum(p.load for p in m.partitions))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63), st.floats(0, 1e6)), min_size=1, max_size=60,
                unique_by=lambda t: (t[0], t[1])),
       st.integers(1, 5))
def test_attributed_loads_always_sum_to_the_total(cells, k: int):
    # GIVEN random loaded cells dealt round-robin to k partitions (some cells left to the catch-all)
    z = 6
    qks = [qk(x, y, z) for x, y, _ in cells]
    parts = [(f"p{i + 1:04d}", f"w{i % 2 + 1:04d}", qks[i::k + 1], 0.0) for i in range(k) if qks[i::k + 1]]
    spec = make_spec(parts, 1e9)
    m = evaluate(spec, make_counts({q: w for q, (_, _, w) in zip(qks, cells, strict=True)}))
    # THEN nothing is lost or double counted
    assert sum(p.load for p in m.partitions) == pytest.approx(m.total, rel=1e-9, abs=1e-6)
    assert np.isclose(sum(w.load for w in m.workers), m.total, rtol=1e-9, atol=1e-6)


def test_metrics_to_json_is_the_dict_one_partition_and_worker_per_line(two_squares):
    # GIVEN a measured spec WHEN written as the --json text
    import json

    spec, counts = two_squares
    m = evaluate(spec, counts)
    text = m.to_json()
    # THEN it parses back to exactly to_dict(), and every partition and worker record is one line of its own
    assert json.loads(text) == json.loads(json.dumps(m.to_dict())) and text.endswith("}\n")
    lines = text.splitlines()
    for p in m.partitions:
        (line,) = [x for x in lines if f'"id": "{p.id}", "worker"' in x]
        assert json.loads(line.strip().rstrip(","))["load"] == p.load
    assert sum(1 for x in lines if x.lstrip().startswith('{"id": "w')) == len(m.workers)
