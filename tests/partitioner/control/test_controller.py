"""Tests for partitioner.control.controller: settings from POLICY_JSON, the state's round trip, one step per window."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from spec_factory import make_counts, make_spec, qk

from partitioner.builders import build_spec
from partitioner.control.controller import ControlSettings, ControlState, control_step
from partitioner.control.policy import RebalancePolicy
from partitioner.control.predictive import PredictivePolicy
from partitioner.errors import PolicyError
from partitioner.load.counts import Counts
from partitioner.spec.model import Spec

S = 300.0
CAP = 1000.0
A = [qk(1, 1, 12), qk(2, 1, 12)]
B = [qk(40, 1, 12)]
CURRENT = make_spec([("p0001", "w0001", A, 600.0), ("p0002", "w0002", B, 300.0)], CAP, version=1)


def load(a: float, b: float) -> Counts:
    return make_counts({A[0]: a / 2, A[1]: a / 2, B[0]: b})


def builder(previous: Spec | None):
    def build(c: Counts, fill: float) -> Spec:
        return build_spec(c, CAP, previous=previous, fill=fill, created_at="2026-01-01T00:00:00Z")
    return build


def test_settings_parse_the_flat_policy_json():
    s = ControlSettings.from_json('{"mode": "reactive", "cooldown_s": 0, "headroom_z": 3, "latency_s": 120}')
    assert (s.mode, s.reactive.cooldown_s, s.predictive.headroom_z, s.latency_s) == ("reactive", 0, 3, 120)
    assert ControlSettings.from_json("") == ControlSettings() and ControlSettings().mode == "predictive"
    # the keys infra passes today still parse
    ControlSettings.from_json('{"cooldown_s": 600, "high_watermark": 0.9, "low_watermark": 0.5, '
                              '"max_waste_ratio": 1.25, "min_change": 0.05}')
    tuned = ControlSettings(mode="reactive", latency_s=60.0, predictive=PredictivePolicy(headroom_z=3.0))
    assert ControlSettings.from_json(tuned.to_json()) == tuned


@pytest.mark.parametrize(("text", "needle"), [
    ('{"mode": "psychic"}', "mode must be one of predictive, reactive, got 'psychic'"),
    ('{"latency_s": -5}', "latency_s must be a number >= 0, got -5"),
    ('{"headroom": 0.1}', "unknown policy key 'headroom'"),
    ('{"half_life": 0}', "half_life must be > 0"),
    ("[]", "expected a JSON object"),
])
def test_bad_settings_name_the_value(text, needle):
    with pytest.raises(PolicyError) as exc:
        ControlSettings.from_json(text, where="POLICY_JSON")
    assert needle in str(exc.value) and "POLICY_JSON" in str(exc.value)


def test_state_round_trips_through_bytes():
    # GIVEN a state after two steps and a publish
    state = ControlState()
    for k, a in enumerate((500.0, 700.0)):
        step = control_step(ControlSettings(), state, load(a, 100), window_end=(k + 1) * S, window_s=S, now=(k + 1) * S,
                            current=None, max_load=CAP, build=builder(None))
        state = step.state
    state = state.published(2 * S)
    # WHEN serialised and parsed
    back = ControlState.from_bytes(state.to_bytes())
    # THEN the history and the publish time survive
    assert back.last_published_at == 2 * S and back.history is not None and state.history is not None
    assert back.history.ends == state.history.ends and back.history.totals.tolist() == state.history.totals.tolist()
    with pytest.raises(PolicyError, match="controller state: not UTF-8 JSON"):
        ControlState.from_bytes(b"\xff{")


def test_reactive_mode_is_today_s_rebalance_policy():
    # GIVEN an overloaded current spec under the snapshot
    snap = load(1300, 100)
    settings = ControlSettings(mode="reactive", reactive=RebalancePolicy(cooldown_s=0))
    step = control_step(settings, ControlState(), snap, window_end=S, window_s=S, now=S, current=CURRENT,
                        max_load=CAP, build=builder(CURRENT))
    # THEN the decision is exactly RebalancePolicy's on the same candidate
    expected = settings.reactive.decide(CURRENT, build_spec(snap, CAP, previous=CURRENT, fill=0.8,
                                                            created_at="2026-01-01T00:00:00Z"),
                                        snap, datetime.fromtimestamp(S, UTC), None)
    assert step.decision.reasons == expected.reasons and step.decision.redeploy and step.candidate is not None
    # AND the observed figure is the live spec under the snapshot itself
    assert step.observed is not None and step.observed.max_utilisation == pytest.approx(1.3)


def test_the_history_follows_events_not_cost():
    # GIVEN a window whose load to balance is cost-weighted (3x) and whose plain counts are given as events
    events = load(500, 100)
    weighted = Counts(events.quadkeys, events.weights * 3.0, "cost")
    step = control_step(ControlSettings(), ControlState(), weighted, window_end=S, window_s=S, now=S, current=None,
                        max_load=CAP, build=builder(None), events=events)
    # THEN the history recorded the events (a rate appearing is not a surge)
    assert step.state.history is not None and step.state.history.totals.sum() == pytest.approx(600)


def test_latency_sets_the_forecast_horizon():
    step = control_step(ControlSettings(latency_s=900), ControlState(), load(500, 100), window_end=S, window_s=S,
                        now=S, current=None, max_load=CAP, build=builder(None))
    assert step.latency_s == 900 and step.decision.details["horizon_s"] == 900 + S
    measured = control_step(ControlSettings(latency_s=900), ControlState(), load(500, 100), window_end=S, window_s=S,
                            now=S, current=None, max_load=CAP, build=builder(None), latency_s=200)
    assert measured.latency_s == 200
    assert PredictivePolicy().region_zoom(12) == 8
