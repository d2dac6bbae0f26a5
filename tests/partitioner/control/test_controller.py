"""Tests for partitioner.control.controller: settings from POLICY_JSON, the state's round trip, one step per window."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from spec_factory import make_counts, make_spec, qk

from geokernel.errors import PolicyError
from geokernel.geo.tiles import bounds, quadkey_to_tile
from geokernel.partition_spec.model import Spec
from partitioner.builders import build_spec
from partitioner.control.controller import ControlSettings, ControlState, control_step
from partitioner.control.crowds import DeclaredCrowd
from partitioner.control.policy import RebalancePolicy
from partitioner.control.predictive import PredictivePolicy
from partitioner.load.counts import Counts

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


def _crowd_at(quadkey: str, start: float, end: float, load_per_s: float) -> DeclaredCrowd:
    b = bounds(quadkey_to_tile(quadkey))
    return DeclaredCrowd("final", (b.south + b.north) / 2, (b.west + b.east) / 2, start, end, load_per_s)


@pytest.mark.parametrize("mode", ["predictive", "reactive"])
def test_a_declared_crowd_is_sized_for_before_any_window_shows_it(mode):
    # GIVEN five quiet windows on the current spec (A's two cells 300 each on one worker, B 300 on another) and a
    # crowd of 2.5 events/s (750 a window) declared at A's second cell from 6.5 windows in: the spec decided after
    # window 5 serves windows 6..7 (latency one window)
    crowd = _crowd_at(A[1], 6.5 * S, 20 * S, 2.5)
    policy = {"predictive": ControlSettings(), "reactive": ControlSettings(mode="reactive",
                                                                          reactive=RebalancePolicy(cooldown_s=0))}[mode]
    steps = {}
    for declared in (False, True):
        settings = replace(policy, crowds=(crowd,) if declared else ())
        state = ControlState()
        for k in range(1, 6):
            step = control_step(settings, state, load(600, 300), window_end=k * S, window_s=S, now=k * S,
                                current=CURRENT, max_load=CAP, build=builder(CURRENT))
            state = step.state
            if k == 4:
                # the window before: its spec would serve 5..6, before the crowd: nothing is reserved yet
                assert step.candidate is None or step.candidate.total_load == pytest.approx(900, rel=0.05)
        steps[declared] = step
    # WHEN the fifth window closes
    quiet, ready = steps[False], steps[True]
    # THEN undeclared the load of 900 on two workers is kept; declared, a spec with room for the crowd is published
    assert quiet.candidate is None
    assert ready.candidate is not None and ready.decision.redeploy
    assert any("declared crowds: final" in r for r in ready.decision.reasons)
    owner = next(w for w in ready.candidate.workers if any(A[1] in p.quadkeys for p in ready.candidate.partitions
                                                           if p.worker == w.id))
    assert owner.load >= 750 and max(w.load for w in ready.candidate.workers) <= 0.8 * CAP
    assert ready.candidate.total_load == pytest.approx(1350, rel=0.05)
