"""Tests for partitioner.output.render: the partition table and the summary."""

from __future__ import annotations

import json

import pytest
from spec_factory import block, make_counts, make_spec, qk

from partitioner.output.compare import spec_diff, stability
from partitioner.output.metrics import evaluate
from partitioner.output.render import fmt_load, render_stability, render_table

Z = 10


def test_old_spec_under_new_load_shows_the_seed_mismatch():
    # GIVEN the greedy baseline's example: partition 2 planned 2257 points, the new load puts 6602 on it
    a, b = block(0, 10, 0, 10), block(20, 30, 0, 10)
    spec = make_spec([("p0000", "w0000", a, 2272.0), ("p0002", "w0002", b, 2257.0)], 2500.0)
    new = make_counts({**{q: 45.1 for q in a}, **{q: 66.02 for q in b}}, "state-2.csv")
    # WHEN the old spec is evaluated under the new load
    m = evaluate(spec, new)
    text = render_table(m)
    # THEN the table reads planned -> actual with the utilisation, like the greedy baseline's report
    assert "Partition p0002 [w0002]: load      2257 ->      6602 (264.1% of the cap)" in text
    assert "Partition p0000 [w0000]: load      2272 ->      4510 (180.4% of the cap)" in text
    assert m.mismatch == pytest.approx(6602 / 2500)
    assert [w.id for w in m.over_max] == ["w0002", "w0000"]
    assert "Over the cap under this load: 2 worker(s): w0002 264.1%, w0000 180.4%" in text


def test_table_in_seed_style_without_mismatch(two_squares):
    spec, counts = two_squares
    text = render_table(evaluate(spec, counts))
    assert "Total partitions: 2 (+ catch-all)" in text
    assert "Cap (max load per worker): 50" in text
    assert "Partition p0001 [w0001]: load        40 (80.0% of the cap)" in text
    assert "Workers: 2 (lower bound 2, ratio 1.00)" in text
    assert "->" not in text


def test_table_limit_summarises_the_cold_tail():
    parts = [(f"p{i:04d}", f"w{i:04d}", [qk(3 * i, 0, Z)], float(i + 1)) for i in range(1, 11)]
    spec = make_spec(parts, 100.0)
    counts = make_counts({qk(3 * i, 0, Z): float(i + 1) for i in range(1, 11)})
    text = render_table(evaluate(spec, counts), limit=3)
    assert "... 8 more partitions, each with a load of at most 8" in text
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


def test_fractional_loads_print_with_their_decimals():
    # GIVEN a partition whose load is 2.5 against a cap of 3 (the seed printed "2 points (83.3%)")
    spec = make_spec([("p0001", "w0001", [qk(1, 1, Z)], 2.5), ("p0002", "w0002", [qk(9, 9, Z)], 0.25)], 3.0)
    text = render_table(evaluate(spec, make_counts({qk(1, 1, Z): 2.5, qk(9, 9, Z): 0.25})))
    # THEN it reads 2.5, and the worker table and total agree
    assert "Partition p0001 [w0001]: load       2.5 (83.3% of the cap)" in text
    assert "Partition p0002 [w0002]: load      0.25 (8.3% of the cap)" in text
    assert "total load 2.75" in text
    assert [fmt_load(v) for v in (2.5, 2.0, 12.34, 1234.5, 0.125, float("nan"))] == ["2.5", "2", "12.3", "1234",
                                                                                      "0.12", "-"]


def test_all_zero_load_and_no_regions_print_no_nan():
    # GIVEN a spec with only the catch-all, under counts whose loads are all zero
    spec = make_spec([], 3.0, catch_all_worker="w0001")
    text = render_table(evaluate(spec, make_counts({qk(1, 1, Z): 0.0, qk(2, 2, Z): 0.0})))
    # THEN nothing prints as nan
    assert "nan" not in text.lower()
    assert "median P^2/(4piA): -" in text


def test_metrics_json_is_valid_json_when_a_measure_does_not_exist():
    # GIVEN the metrics of a spec with no region (its median compactness does not exist)
    spec = make_spec([], 3.0, catch_all_worker="w0001")
    m = evaluate(spec, make_counts({qk(1, 1, Z): 0.0}))
    # THEN to_dict (what --json and report.json write) has null there, never NaN
    d = m.to_dict()
    assert d["median_compactness"] is None
    json.dumps(d, allow_nan=False)
