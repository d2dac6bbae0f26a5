"""Tests for partitioner.render: the seed-style partition table and the summary."""

from __future__ import annotations

import pytest
from spec_factory import block, make_counts, make_spec, qk

from partitioner.metrics import evaluate, spec_diff, stability
from partitioner.render import render_stability, render_table

Z = 10


def test_old_spec_under_new_load_shows_the_seed_mismatch():
    # GIVEN the seed's example: partition 2 planned 2257 points, the new load puts 6602 on it
    a, b = block(0, 10, 0, 10), block(20, 30, 0, 10)
    spec = make_spec([("p0000", "w0000", a, 2272.0), ("p0002", "w0002", b, 2257.0)], 2500.0)
    new = make_counts({**{q: 45.1 for q in a}, **{q: 66.02 for q in b}}, "state-2.csv")
    # WHEN the old spec is evaluated under the new load
    m = evaluate(spec, new)
    text = render_table(m)
    # THEN the table reads planned -> actual with the utilisation, like the seed's report
    assert "Partition p0002 [w0002]:      2257 ->      6602 points (264.1% utilized)" in text
    assert "Partition p0000 [w0000]:      2272 ->      4510 points (180.4% utilized)" in text
    assert m.mismatch == pytest.approx(6602 / 2500)
    assert [w.id for w in m.over_max] == ["w0002", "w0000"]
    assert "Over max_load under this load: 2 worker(s): w0002 264.1%, w0000 180.4%" in text


def test_table_in_seed_style_without_mismatch(two_squares):
    spec, counts = two_squares
    text = render_table(evaluate(spec, counts))
    assert "Total partitions: 2 (+ catch-all)" in text
    assert "Max points per partition: 50" in text
    assert "Partition p0001 [w0001]:        40 points (80.0%)" in text
    assert "Workers: 2 (lower bound 2, ratio 1.00)" in text
    assert "->" not in text


def test_table_limit_summarises_the_cold_tail():
    parts = [(f"p{i:04d}", f"w{i:04d}", [qk(3 * i, 0, Z)], float(i + 1)) for i in range(1, 11)]
    spec = make_spec(parts, 100.0)
    counts = make_counts({qk(3 * i, 0, Z): float(i + 1) for i in range(1, 11)})
    text = render_table(evaluate(spec, counts), limit=3)
    assert "... 8 more partitions, at most 8 points each" in text
    assert "... 7 more workers" in text


def test_stability_text_lists_the_ids_that_changed_and_shortens_long_lists(two_squares) -> None:
    # GIVEN a diff with 14 partitions added and one removed
    spec, counts = two_squares
    a = spec.partitions[0].quadkeys
    new = make_spec([("p0001", "w0001", a, 40.0)] + [(f"p{i:04d}", "w0001", [qk(i, 900, Z)], 0.0) for i in range(10, 24)],
                    50.0, version=2)
    # WHEN rendered
    text = render_stability(stability(spec, new, counts), spec_diff(spec, new))
    # THEN the first 12 added ids are named and the rest counted; the removed one is named
    assert "partitions added (14): p0010, p0011, p0012, p0013, p0014, p0015, p0016, p0017, p0018, p0019, p0020, " \
           "p0021 (+2 more)" in text
    assert "partitions removed (1): p0002" in text
    assert "workers removed (1): w0002" in text
    assert text.endswith("v1 -> v2: 50.0% of load keeps its partition and worker; moved 40 of 80 (50.0%)")
