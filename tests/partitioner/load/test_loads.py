"""Tests for partitioner.load.loads: the load-only evaluation agrees with metrics.evaluate and metrics.stability."""

from __future__ import annotations

import numpy as np
import pytest
from spec_factory import make_counts, make_spec, qk

from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders.assemble import with_catch_all_load
from partitioner.load.loads import SpecLoads, cells_of, load_metrics, moves
from partitioner.output.compare import stability
from partitioner.output.metrics import evaluate

Z = 10
A = [qk(500, 400, Z), qk(501, 400, Z)]
B = [qk(502, 400, Z), qk(503, 400, Z)]
HOT = qk(510, 400, Z)
HALF = HASH_BUCKETS // 2

OLD = make_spec([("p0001", "w0001", A, 20.0), ("p0002", "w0002", B, 20.0),
                 ("p0003", "w0001", [HOT], 30.0, (0, HALF)), ("p0004", "w0002", [HOT], 30.0, (HALF, HASH_BUCKETS))],
                100.0, version=1)
# B's partition moves to a new worker w0003, A's partition is renamed on the same worker, HOT's split moves its seam
NEW = make_spec([("p0005", "w0001", A, 20.0), ("p0002", "w0003", B, 20.0),
                 ("p0003", "w0001", [HOT], 45.0, (0, 3 * HASH_BUCKETS // 4)),
                 ("p0004", "w0002", [HOT], 15.0, (3 * HASH_BUCKETS // 4, HASH_BUCKETS))], 100.0, version=2)
LOAD = make_counts({A[0]: 10.0, A[1]: 14.0, B[0]: 7.0, B[1]: 9.0, HOT: 60.0, qk(700, 700, Z): 5.0})


def test_worker_loads_match_the_full_evaluation():
    # WHEN both evaluations attribute the same load (a hash-split cell and an unlisted cell included)
    full = evaluate(OLD, LOAD)
    lean = load_metrics(OLD, LOAD)
    # THEN every worker's load and the summary figures agree
    assert lean.worker_ids == tuple(w.id for w in full.workers)
    assert np.allclose(lean.loads, [w.load for w in full.workers])
    assert (lean.max_utilisation, lean.lower_bound, lean.worker_count) == pytest.approx(
        (full.max_utilisation, full.lower_bound, full.worker_count))


def test_moves_match_stability_and_count_worker_changes_separately():
    # WHEN the load is compared between the two specs
    mv = moves(SpecLoads(OLD), SpecLoads(NEW), cells_of(LOAD))
    # THEN "moved" is the stability definition (partition id or worker changes)
    assert mv.moved == pytest.approx(stability(OLD, NEW, LOAD).moved_load)
    # AND a worker change excludes A's rename: B (16) + the quarter of HOT that changes worker (15)
    assert mv.changed_worker == pytest.approx(16.0 + 15.0)
    assert mv.moved == pytest.approx(24.0 + 16.0 + 15.0)


def test_a_catch_all_split_by_entity_hash_shares_its_load_and_its_moves_by_range():
    # GIVEN OLD's catch-all (on w0001) given 50 expected with a cap of 40: halves, each on a new worker
    split = with_catch_all_load(OLD, 50.0, 40.0)
    shares = [p for p in split.partitions if p.is_catch_all]
    assert [(p.hash_range, p.worker) for p in shares] == [((0, HALF), "w0003"), ((HALF, HASH_BUCKETS), "w0004")]
    # WHEN the load (5 in an unlisted cell) is attributed and compared with OLD
    lean, full = load_metrics(split, LOAD), evaluate(split, LOAD)
    mv = moves(SpecLoads(OLD), SpecLoads(split), cells_of(LOAD))
    # THEN each share carries half of the unlisted load, as the full evaluation says
    assert np.allclose(lean.loads, [w.load for w in full.workers])
    assert full.unlisted_load == pytest.approx(5.0)
    assert sorted(pm.load for pm in full.partitions if pm.is_catch_all) == pytest.approx([2.5, 2.5])
    # AND all of it changes worker, and nothing else does (as stability says)
    assert mv.changed_worker == pytest.approx(5.0)
    assert mv.moved == pytest.approx(stability(OLD, split, LOAD).moved_load)


def test_hottest_lists_workers_above_a_level_hottest_first():
    m = load_metrics(OLD, LOAD)
    assert [w for w, _ in m.hottest(3)] == ["w0001", "w0002"]
    assert m.hottest(3, above=0.6) == []
