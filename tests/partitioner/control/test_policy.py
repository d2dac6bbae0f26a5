"""Tests for partitioner.control.policy: thresholds, JSON parsing and the redeploy decision with its reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from spec_factory import make_counts, make_spec, qk

from geokernel.errors import PolicyError
from partitioner.control.policy import RebalancePolicy

Z = 10
A = [qk(x, y, Z) for x in (500, 501) for y in (400, 401)]
B = [qk(x, y, Z) for x in (502, 503) for y in (400, 401)]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(hours=2)


def load(a_cell: float, b_cell: float = 9.0):
    return make_counts({**dict.fromkeys(A, a_cell), **dict.fromkeys(B, b_cell)})


CURRENT = make_spec([("p0001", "w0001", A, 36.0), ("p0002", "w0002", B, 36.0)], 50.0, version=1)
SPLIT = make_spec([("p0001", "w0001", A[:2], 30.0), ("p0003", "w0003", A[2:], 30.0), ("p0002", "w0002", B, 36.0)],
                  50.0, version=2)
SAME = make_spec([("p0001", "w0001", A, 36.0), ("p0002", "w0002", B, 36.0)], 50.0, version=2)


def test_defaults_match_the_contract():
    p = RebalancePolicy()
    assert (p.high_watermark, p.low_watermark, p.max_waste_ratio, p.cooldown_s, p.min_change) == (
        0.9, 0.5, 1.25, 600.0, 0.05)


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("high_watermark", 1.5, "high_watermark must be in (0, 1], got 1.5"),
    ("high_watermark", 0.0, "high_watermark must be in (0, 1], got 0.0"),
    ("low_watermark", 0.95, "low_watermark must be in [0, high_watermark=0.9), got 0.95"),
    ("max_waste_ratio", 0.8, "max_waste_ratio must be >= 1, got 0.8"),
    ("cooldown_s", -1, "cooldown_s must be >= 0, got -1"),
    ("min_change", 2, "min_change must be in [0, 1], got 2"),
    ("min_change", float("nan"), "min_change must be a finite number, got nan"),
    ("cooldown_s", True, "cooldown_s must be a finite number, got True"),
    ("high_watermark", "0.9", "high_watermark must be a finite number, got '0.9'"),
])
def test_bad_thresholds_raise_policy_error_naming_the_value(field, value, needle):
    with pytest.raises(PolicyError) as exc:
        RebalancePolicy(**{field: value})
    assert needle in str(exc.value)


def test_from_json_reads_known_keys_and_defaults_the_rest():
    p = RebalancePolicy.from_json('{"high_watermark": 0.8, "cooldown_s": 60}')
    assert p.high_watermark == 0.8 and p.cooldown_s == 60 and p.min_change == 0.05
    assert RebalancePolicy.from_json("") == RebalancePolicy() == RebalancePolicy.from_json(None)
    assert RebalancePolicy.from_json(p.to_json()) == p


@pytest.mark.parametrize(("text", "needle"), [
    ('{"high_watermark": 0.8, "cooldown": 5}', "POLICY_JSON: unknown policy key 'cooldown'"),
    ("[1, 2]", "POLICY_JSON: expected a JSON object, got [1, 2]"),
    ("{high", "POLICY_JSON: not valid JSON"),
    ('{"min_change": -0.1}', "POLICY_JSON: policy min_change must be in [0, 1], got -0.1"),
])
def test_from_json_errors_name_the_source_and_value(text, needle):
    with pytest.raises(PolicyError) as exc:
        RebalancePolicy.from_json(text)
    assert needle in str(exc.value)


def test_first_spec_is_always_published():
    d = RebalancePolicy().decide(None, SAME, load(9.0), NOW, None)
    assert d.redeploy and d.reasons == ("no current spec: publish the first one",)
    assert d.current_metrics is None and d.moved_share == 1.0


def test_calm_load_keeps_the_spec_and_says_why():
    # GIVEN every worker at 72 % of max_load
    d = RebalancePolicy().decide(CURRENT, SPLIT, load(9.0), NOW, LONG_AGO)
    # THEN nothing triggers
    assert not d.redeploy
    assert d.reasons == ("kept: max utilisation 72% below high watermark 90%, waste 1.00x lower bound <= 1.25x, "
                         "mean utilisation 72%",)


def test_hot_worker_triggers_a_redeploy():
    # GIVEN w0001 at 131 % under the new load and a candidate that splits its region
    d = RebalancePolicy().decide(CURRENT, SPLIT, load(16.375), NOW, LONG_AGO)
    # THEN the policy redeploys, naming the worker, and says how much load moves
    assert d.redeploy
    assert d.reasons[0] == "worker w0001 at 131% of max_load under new load (high watermark 90%)"
    assert d.moved_share == pytest.approx(32.75 / 101.5)
    assert d.reasons[-1].startswith("redeploy: candidate uses 3 workers (current 2, lower bound 3)")
    assert d.current_metrics is not None and d.current_metrics.max_utilisation == pytest.approx(1.31)


def test_cooldown_holds_a_redeploy_unless_a_worker_is_over_100_percent():
    recent = NOW - timedelta(seconds=120)
    # GIVEN w0001 at 95 % (above the watermark, not overloaded) two minutes after a publish
    held = RebalancePolicy().decide(CURRENT, SPLIT, load(11.875), NOW, recent)
    assert not held.redeploy
    assert held.reasons[-1] == "kept: in cooldown (120 s since last publish < 600 s) and no worker above 100%"
    # WHEN the worker is over 100 % the cooldown does not hold
    assert RebalancePolicy().decide(CURRENT, SPLIT, load(16.375), NOW, recent).redeploy
    # AND after the cooldown the 95 % worker is relieved
    assert RebalancePolicy().decide(CURRENT, SPLIT, load(11.875), NOW, LONG_AGO).redeploy


def test_candidate_that_changes_too_little_is_not_worth_a_swap():
    d = RebalancePolicy().decide(CURRENT, SAME, load(11.875), NOW, LONG_AGO)
    assert not d.redeploy and d.moved_share == 0.0
    assert d.reasons[-1] == "kept: candidate moves only 0.0% of load (< min_change 5%) and does not cut workers"


def test_waste_and_low_watermark_redeploy_to_save_workers():
    # GIVEN four workers carrying 40 in total (lower bound 1) and a candidate on one worker
    quarters = [("p0001", "w0001", A[:2], 10.0), ("p0002", "w0002", A[2:], 10.0),
                ("p0003", "w0003", B[:2], 10.0), ("p0004", "w0004", B[2:], 10.0)]
    wasteful = make_spec(quarters, 50.0)
    packed = make_spec([("p0001", "w0001", A + B, 40.0)], 50.0, version=2)
    d = RebalancePolicy().decide(wasteful, packed, load(5.0, 5.0), NOW, LONG_AGO)
    # THEN it redeploys to save, saying both why
    assert d.redeploy
    assert "waste: 4 workers = 4.00x lower bound 1 > 1.25x; candidate needs 1" in d.reasons
    assert "under-used: mean utilisation 20% below low watermark 50%; candidate needs 1 workers instead of 4" \
        in d.reasons


def test_a_candidate_no_better_than_the_current_spec_is_never_published():
    everything = make_spec([("p0001", "w0001", A + B, 45.0)], 50.0, version=2)
    d = RebalancePolicy().decide(CURRENT, everything, load(16.375), NOW, LONG_AGO)
    assert not d.redeploy
    assert d.reasons[-1] == "kept: candidate is no better (max utilisation 203% >= current 131%)"


def test_mixing_naive_and_aware_times_is_an_error():
    with pytest.raises(PolicyError, match="must both be timezone-aware or both naive"):
        RebalancePolicy().decide(CURRENT, SPLIT, load(16.375), NOW, datetime(2026, 11, 21, 11, 0))


def test_decision_serialises_and_renders():
    d = RebalancePolicy().decide(CURRENT, SPLIT, load(16.375), NOW, LONG_AGO)
    assert d.to_dict()["redeploy"] is True and d.to_dict()["candidate"]["workers"] == 3
    assert d.render().startswith("decision: REDEPLOY (moves 32.3% of load)")
