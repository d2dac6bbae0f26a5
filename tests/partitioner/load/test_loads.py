"""Tests for partitioner.load.loads: the load-only evaluation agrees with metrics.evaluate and metrics.stability."""

from __future__ import annotations

import numpy as np
import pytest
from spec_factory import make_counts, make_spec, qk

from partitioner.load.loads import SpecLoads, cells_of, load_metrics, moves
from partitioner.output.compare import stability
from partitioner.output.metrics import evaluate
from partitioner.spec.model import HASH_BUCKETS

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


def test_hottest_lists_workers_above_a_level_hottest_first():
    m = load_metrics(OLD, LOAD)
    assert [w for w, _ in m.hottest(3)] == ["w0001", "w0002"]
    assert m.hottest(3, above=0.6) == []
