"""Tests for partitioner.control.predictive: forecast-driven triggers, headroom from forecast errors, hysteresis."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from spec_factory import make_counts, make_spec, qk

from geokernel.errors import PolicyError
from geokernel.geo.tiles import bounds, quadkey_to_tile
from geokernel.partition_spec.model import Spec
from partitioner.builders import build_spec
from partitioner.control.crowds import DeclaredCrowd
from partitioner.control.forecast import LoadHistory
from partitioner.control.levels import CellLevels
from partitioner.control.predictive import Observation, PredictivePolicy
from partitioner.load.counts import Counts
from partitioner.load.loads import cells_of

S = 600.0
CAP = 10_000.0
Z = 10
# region A (zoom-6 tile 0,0) has four cells, region B (zoom-6 tile 1,0) two
A = [qk(1, 1, Z), qk(2, 1, Z), qk(1, 2, Z), qk(2, 2, Z)]
B = [qk(17, 1, Z), qk(18, 1, Z)]
CURRENT = make_spec([("p0001", "w0001", A, 6000.0), ("p0002", "w0002", B, 6000.0)], CAP, version=1)


def load(a: float, b: float) -> Counts:
    return make_counts({**{q: a / 4 for q in A}, **{q: b / 2 for q in B}})


def run(policy: PredictivePolicy, series: list[tuple[float, float]], current: Spec | None,
        builder: Any = None, crowds: tuple[DeclaredCrowd, ...] = ()) -> tuple[Any, list[tuple[Counts, float]]]:
    """Absorb every window, then decide at the end of the last one; return (verdict, builder calls)."""
    calls: list[tuple[Counts, float]] = []

    def build(c: Counts, fill: float) -> Spec:
        calls.append((c, fill))
        return builder(c, fill) if builder else build_spec(c, CAP, previous=current, fill=fill)

    h = LoadHistory.empty(policy.region_zoom(Z), S)
    levels = CellLevels.empty(Z)
    for k, (a, b) in enumerate(series):
        counts = load(a, b)
        h = h.absorb(cells_of(counts), (k + 1) * S, S, policy.history_windows)
        g = counts.grid()
        levels = levels.update((g.x << Z) | g.y, g.weight, alpha=policy.cell_alpha, jump_z=policy.cell_jump_z)
    snap = load(*series[-1])
    obs = Observation(snap, cells_of(snap), snap.grid(), snap.grid(), h, levels, crowds)
    verdict = policy.decide(current, obs, window_end=len(series) * S, latency_s=S, max_load=CAP, build=build)
    return verdict, calls


def test_bad_settings_name_the_field():
    with pytest.raises(PolicyError, match="trend_windows must be an integer >= 1, got 0"):
        PredictivePolicy(trend_windows=0)
    with pytest.raises(PolicyError, match="min_headroom <= default_headroom"):
        PredictivePolicy(min_headroom=0.3, default_headroom=0.1)
    with pytest.raises(PolicyError, match="grow_band must be in"):
        PredictivePolicy(grow_band=0.7)
    with pytest.raises(PolicyError, match=r"headroom_z, trend_z >= 0, got 2.0, 2.25, -1"):
        PredictivePolicy(trend_z=-1)


def test_the_first_spec_is_built_on_the_forecast_and_published():
    verdict, calls = run(PredictivePolicy(), [(5000, 5000)], None)
    assert verdict.decision.redeploy and verdict.candidate is not None
    assert len(calls) == 1 and calls[0][1] == pytest.approx(1 / 1.2 * 0.95)  # default headroom, grow band
    assert "publish the first spec" in verdict.decision.reasons[0] and len(verdict.decision.reasons) == 1


def test_steady_load_keeps_the_spec_without_building():
    # GIVEN six flat windows at 60% per worker
    def no_build(c: Counts, fill: float) -> Spec:
        raise AssertionError("nothing should be built")

    verdict, calls = run(PredictivePolicy(), [(6000, 6000)] * 6, CURRENT, no_build)
    # THEN kept, one plain line of reasons
    assert not verdict.decision.redeploy and not calls
    assert verdict.decision.reasons[0].startswith("keep: forecast for +10 min..20 min")


def test_a_rising_region_triggers_before_any_worker_is_over_its_cap():
    # GIVEN region A rising by 800 events a window; in the last snapshot its worker is only at 84%
    series = [(5200 + 800 * k, 5000) for k in range(5)]
    verdict, calls = run(PredictivePolicy(), series, CURRENT)
    d = verdict.decision
    # THEN the forecast for the interval the next spec would serve (+10..20 min) puts w0001 above the fill
    assert d.redeploy and "w0001 forecast at" in d.reasons[0]
    assert d.current_metrics is not None and d.current_metrics.max_utilisation > 1.0
    # AND the candidate was built on the forecast (A at ~10,800), not on the snapshot (8,400)
    built, fill = calls[0]
    assert sum(w for q, w in zip(built.quadkeys, built.weights, strict=True) if q in A) == pytest.approx(10_800, rel=0.05)
    assert fill < 1.0 and d.candidate_metrics is not None and d.candidate_metrics.max_utilisation <= 1.0


def test_a_falling_load_shrinks_by_at_least_the_margin():
    # GIVEN three workers for a load that fell to what one worker carries
    three = make_spec([("p0001", "w0001", A[:2], 5000.0), ("p0002", "w0002", A[2:], 5000.0),
                       ("p0003", "w0003", B, 5000.0)], CAP, version=1)
    verdict, _ = run(PredictivePolicy(), [(3000, 1000)] * 6, three)
    d = verdict.decision
    # THEN the candidate with fewer workers is published, and the reason says why
    assert d.redeploy and "3 workers where" in d.reasons[0]
    assert d.candidate_metrics is not None and d.candidate_metrics.worker_count < 3


def test_a_falling_loads_shrink_is_packed_to_the_fill_and_a_flat_ones_to_the_grow_band():
    # GIVEN three workers, and A's load falling by 1,000 a window to 7,000, or flat at 7,000 all along
    three = make_spec([("p0001", "w0001", A[:2], 5000.0), ("p0002", "w0002", A[2:], 5000.0),
                       ("p0003", "w0003", B, 5000.0)], CAP, version=1)
    falling = [(14_000 - 1000 * k, 1000) for k in range(8)]
    flat = [(7000, 1000)] * 8

    # WHEN the policy decides after each
    down, down_calls = run(PredictivePolicy(), falling, three)
    level, level_calls = run(PredictivePolicy(), flat, three)

    # THEN both shrink; the falling load's candidate is built at the fill itself (no room to grow is needed while
    # the forecast is below the window), and the line says so
    d = down.decision
    assert d.details["forecast_total"] < 8000 and d.details["shrink_fill"] == d.details["fill"]
    assert [f for _, f in down_calls] == [d.details["fill"]]
    assert d.redeploy and "packed to the fill (the load is falling" in d.reasons[0]
    # AND the flat one's at the grow band below it, as before
    f = level.decision
    assert f.details["shrink_fill"] == f.details["build_fill"] < f.details["fill"]
    assert [c for _, c in level_calls] == [f.details["build_fill"]]
    assert f.redeploy and "packed to the fill" not in f.reasons[0]
    # AND a slow fall (less than the band by the interval) brings that much of the band: packed between the two
    slow, _ = run(PredictivePolicy(), [(8000 - 120 * k, 1000) for k in range(8)], three)
    s = slow.decision.details
    fall = 1 - s["forecast_total"] / (8000 - 120 * 7 + 1000)
    assert 0 < fall < PredictivePolicy().grow_band
    assert s["shrink_fill"] == pytest.approx(s["build_fill"] / (1 - fall))
    assert s["build_fill"] < s["shrink_fill"] < s["fill"] and "(the load is falling" in slow.decision.reasons[0]


def test_an_overload_while_the_load_falls_is_relieved_by_one_candidate_packed_to_the_fill():
    # GIVEN A's worker still over its fill while A falls by 1,000 a window (more than the grow band by the interval)
    falling = [(20_000 - 1000 * k, 1000) for k in range(8)]
    # WHEN the policy decides
    verdict, calls = run(PredictivePolicy(), falling, CURRENT)
    d = verdict.decision
    # THEN one candidate is built, at the fill itself (no second one: a falling load needs no room to grow)
    assert "w0001 forecast at" in d.reasons[0] and d.details["shrink_fill"] == d.details["fill"]
    assert [f for _, f in calls] == [d.details["fill"]]
    assert d.redeploy and "packed to the fill (the load is falling" in d.reasons[0]


def test_no_shrink_on_the_default_headroom_before_any_forecast_error_is_measured():
    # GIVEN three workers for a load one worker carries, seen in a single window (no backtest: default headroom)
    three = make_spec([("p0001", "w0001", A[:2], 5000.0), ("p0002", "w0002", A[2:], 5000.0),
                       ("p0003", "w0003", B, 5000.0)], CAP, version=1)

    def no_build(c: Counts, fill: float) -> Spec:
        raise AssertionError("nothing should be built")

    verdict, _ = run(PredictivePolicy(), [(3000, 1000)], three, no_build)
    d = verdict.decision
    # THEN it is kept, and the reason says the headroom is only the default
    assert d.details["error_groups"] == 0 and d.details["headroom"] == PredictivePolicy().default_headroom
    assert not d.redeploy and "no shrink on the default headroom" in d.reasons[0]


def test_a_forecast_overload_grows_even_on_the_default_headroom():
    # GIVEN one window in which region A already carries more than its worker's cap
    verdict, _ = run(PredictivePolicy(), [(12_000, 5000)], CURRENT)
    d = verdict.decision
    # THEN the fleet grows (growing on a guess is safe; shrinking on one is not)
    assert d.details["error_groups"] == 0 and d.redeploy and "w0001 forecast at" in d.reasons[0]


def _grown_or_tight(_c: Counts, fill: float) -> Spec:
    """A builder whose packing at the grow band needs a third worker (A halved), while at the fill itself it
    rebalances two workers by moving one cell of A next to B."""
    if fill < 0.8:  # build_fill 79 %; the fill is 83 % on the default headroom
        return make_spec([("p0001", "w0001", A[:2], 4500.0), ("p0002", "w0002", B, 3000.0),
                          ("p0003", "w0003", A[2:], 4500.0)], CAP, version=2)
    return make_spec([("p0001", "w0001", A[:3], 6750.0), ("p0002", "w0002", B, 3000.0),
                      ("p0003", "w0002", A[3:], 2250.0)], CAP, version=2)


def test_an_overload_a_rebalance_relieves_keeps_the_fleet_instead_of_adding_a_worker():
    # GIVEN w0001 forecast at 90 % (fill 83 % on the default headroom) and a builder that adds a worker when it
    # packs below the fill but rebalances the two workers when it packs to the fill itself
    verdict, calls = run(PredictivePolicy(), [(9000, 3000)], CURRENT, builder=_grown_or_tight)
    d = verdict.decision
    # THEN both were built, and the rebalance is published: two workers, busiest 68 %, one cell of A moved
    assert [round(f, 3) for _, f in calls] == [round(d.details["build_fill"], 3), round(d.details["fill"], 3)]
    assert d.redeploy and verdict.candidate is not None and len(verdict.candidate.workers) == 2
    assert "candidate 2 workers (current 2) packed to the fill (not 1 more packed to the grow band)" in d.reasons[0]
    assert d.candidate_metrics is not None and d.candidate_metrics.max_utilisation == pytest.approx(0.675, abs=0.001)
    assert d.moved_share == pytest.approx(2250 / 12000, abs=0.001)


def test_the_grown_candidate_stays_when_the_rebalance_would_move_more_load():
    # GIVEN the same overload, but a rebalance that renames every partition (all of the load moves)
    def builder(c: Counts, fill: float) -> Spec:
        spec = _grown_or_tight(c, fill)
        if len(spec.workers) == 3:
            return spec
        return make_spec([("p0011", "w0001", A[:3], 6750.0), ("p0012", "w0002", B, 3000.0),
                          ("p0013", "w0002", A[3:], 2250.0)], CAP, version=2)
    verdict, calls = run(PredictivePolicy(), [(9000, 3000)], CURRENT, builder=builder)
    # THEN the candidate with a third worker is published (it moves less)
    assert len(calls) == 2 and verdict.candidate is not None and len(verdict.candidate.workers) == 3


def _two_at_the_fill(_c: Counts, fill: float) -> Spec:
    """Two workers of 8,100 under a load of A 12,000 and B 4,200 (each takes half of A and a cell of B)."""
    return make_spec([("p0001", "w0001", A[:2], 6000.0), ("p0002", "w0002", A[2:], 6000.0),
                      ("p0003", "w0001", B[:1], 2100.0), ("p0004", "w0002", B[1:], 2100.0)], CAP, version=2)


def test_an_overload_the_grow_band_cannot_hold_on_the_fleet_is_packed_to_the_fill_with_one_build():
    # GIVEN w0001 forecast at 120 % and a total of 16,200: packed to the grow band (79 %) it needs three workers for
    #       certain (its lower bound), while at the fill (83 %) two may hold it
    def builder(c: Counts, fill: float) -> Spec:
        if fill < 0.8:
            raise AssertionError("the grow band's candidate should not be built")
        return _two_at_the_fill(c, fill)

    verdict, calls = run(PredictivePolicy(), [(12_000, 4200)], CURRENT, builder=builder)
    d = verdict.decision
    # THEN only the candidate packed to the fill is built, and it is published: two workers at 81 %
    assert [round(f, 3) for _, f in calls] == [round(d.details["fill"], 3)]
    assert d.redeploy and verdict.candidate is not None and len(verdict.candidate.workers) == 2
    assert "packed to the fill (the grow band would need at least 1 more)" in d.reasons[0]
    assert d.candidate_metrics is not None and d.candidate_metrics.max_utilisation == pytest.approx(0.81)


def test_a_fill_candidate_that_cannot_relieve_the_overload_on_the_fleet_falls_back_to_the_grow_band():
    # GIVEN the same overload, but packed to the fill the builder still leaves w0001 at 120 %
    def builder(c: Counts, fill: float) -> Spec:
        if fill < 0.8:
            return make_spec([("p0001", "w0001", A[:2], 6000.0), ("p0002", "w0002", B, 4200.0),
                              ("p0003", "w0003", A[2:], 6000.0)], CAP, version=2)
        return CURRENT

    verdict, calls = run(PredictivePolicy(), [(12_000, 4200)], CURRENT, builder=builder)
    d = verdict.decision
    # THEN both were built, the fill's first, and the three workers packed to the grow band are published
    assert [round(f, 3) for _, f in calls] == [round(d.details["fill"], 3), round(d.details["build_fill"], 3)]
    assert d.redeploy and verdict.candidate is not None and len(verdict.candidate.workers) == 3
    assert "packed to the fill" not in d.reasons[0]


def test_hysteresis_keeps_a_spec_one_worker_too_big_when_the_margin_is_two():
    # GIVEN a margin of two workers (shrink_margin 0.5 of 3 workers) and a load needing one worker fewer
    three = make_spec([("p0001", "w0001", A[:2], 5000.0), ("p0002", "w0002", A[2:], 5000.0),
                       ("p0003", "w0003", B, 5000.0)], CAP, version=1)

    def no_build(c: Counts, fill: float) -> Spec:
        raise AssertionError("nothing should be built")

    verdict, _ = run(PredictivePolicy(shrink_margin=0.5), [(9000, 1000)] * 6, three, no_build)
    # THEN it is kept: a shrink must save at least two workers
    assert not verdict.decision.redeploy and "a shrink must save 2" in verdict.decision.reasons[0]


def test_headroom_grows_with_the_observed_forecast_error():
    # GIVEN the same last windows after a calm history and after a jumpy one
    calm = [(6000, 6000)] * 8
    jumpy = [(6000, 6000), (7500, 6000), (5000, 6000), (7600, 6000), (5200, 6000), (7400, 6000), (5000, 6000),
             (6000, 6000)]
    policy = PredictivePolicy()
    d_calm, _ = run(policy, calm, CURRENT)
    d_jumpy, _ = run(policy, jumpy, CURRENT)
    # THEN the jumpy history gets more headroom (a lower fill)
    assert d_jumpy.decision.details["headroom"] > 2 * d_calm.decision.details["headroom"]
    assert d_calm.decision.details["headroom"] == pytest.approx(policy.min_headroom)


def test_a_declared_crowds_ramp_does_not_raise_the_headroom_of_the_whole_fleet():
    # GIVEN a calm history in which region A's load doubles over the last windows (a crowd arriving), with the same
    # windows once unannounced and once with the crowd declared at A (reserved, not forecast)
    series = [(6000, 6000)] * 5 + [(8000, 6000), (10000, 6000), (12000, 6000)]
    b = bounds(quadkey_to_tile(A[0]))
    crowd = DeclaredCrowd("final", (b.south + b.north) / 2, (b.west + b.east) / 2, 0.0, 100 * S, 10.0)
    policy = PredictivePolicy(surge_ratio=0)  # every region's error measured, a surge's too

    # WHEN the policy measures its forecast error on both
    undeclared, _ = run(policy, series, CURRENT)
    declared, _ = run(policy, series, CURRENT, crowds=(crowd,))

    # THEN the unannounced ramp is a forecast error that raises the headroom of every worker
    assert undeclared.decision.details["headroom"] > 0.1
    # AND the declared one is left out of it: only B's calm load is measured (its forecast shares a little of the
    # rise with A through their common ancestor)
    assert declared.decision.details["headroom"] < 0.25 * undeclared.decision.details["headroom"]
    assert declared.decision.details["declared_crowds"] == 1


def test_an_undeclared_surge_is_left_out_of_the_error_while_a_jumpy_load_is_not():
    # GIVEN the same unannounced ramp (A 6,000 -> 12,000 in three windows: more than 1.5 times its forecast) and a
    # jumpy load whose errors stay within a quarter of the forecast
    surge = [(6000, 6000)] * 5 + [(8000, 6000), (10000, 6000), (12000, 6000)]
    jumpy = [(6000, 6000), (7500, 6000), (5000, 6000), (7600, 6000), (5200, 6000), (7400, 6000), (5000, 6000),
             (6000, 6000)]
    calm = [(6000, 6000)] * 8
    policy = PredictivePolicy()

    # WHEN the default policy measures its headroom on each
    h = {name: run(policy, series, CURRENT)[0].decision.details["headroom"]
         for name, series in (("surge", surge), ("jumpy", jumpy), ("calm", calm))}

    # THEN the surge's region is left out (only B's calm load is measured), as a declared crowd's venue is, while
    #      the jumpy load still raises the headroom
    assert h["surge"] < 0.25 * run(PredictivePolicy(surge_ratio=0), surge, CURRENT)[0].decision.details["headroom"]
    assert h["jumpy"] > 2 * h["calm"] and h["calm"] == pytest.approx(policy.min_headroom)


def test_a_surge_ratio_below_one_is_refused():
    with pytest.raises(PolicyError, match=r"surge_ratio must be 0 \(off\) or >= 1, got 0\.5"):
        PredictivePolicy(surge_ratio=0.5)


def test_the_headroom_on_a_sparse_flat_load_is_the_noise_of_a_worker_not_of_its_empty_regions():
    # GIVEN a flat load of about one event per region and window (Poisson) over 1,024 regions, the west half on
    # w0001 and the east half on w0002: ~512 events a worker, whose window-to-window noise is ~4.4 %
    rng = np.random.default_rng(7)
    policy = PredictivePolicy()
    rz = policy.region_zoom(Z)  # regions are zoom-6 tiles, each 16 x 16 cells at zoom 10
    west = [qk(x, y, rz) for x in range(16) for y in range(32)]
    east = [qk(x, y, rz) for x in range(16, 32) for y in range(32)]
    two = make_spec([("p0001", "w0001", west, 512.0), ("p0002", "w0002", east, 512.0)], 1_000.0, version=1)
    centres = [qk(16 * x + 8, 16 * y + 8, Z) for x in range(32) for y in range(32)]
    h = LoadHistory.empty(rz, S)
    levels = CellLevels.empty(Z)
    snap = make_counts({centres[0]: 1.0})
    for k in range(12):
        n = rng.poisson(1.0, len(centres))
        snap = make_counts({q: float(v) for q, v in zip(centres, n, strict=True) if v})
        h = h.absorb(cells_of(snap), (k + 1) * S, S, policy.history_windows)
        g = snap.grid()
        levels = levels.update((g.x << Z) | g.y, g.weight, alpha=policy.cell_alpha, jump_z=policy.cell_jump_z)
    obs = Observation(snap, cells_of(snap), snap.grid(), snap.grid(), h, levels)

    # WHEN the policy sizes its headroom from its backtested forecast errors
    verdict = policy.decide(two, obs, window_end=12 * S, latency_s=S, max_load=1_000.0,
                            build=lambda c, fill: build_spec(c, 1_000.0, previous=two, fill=fill))

    # THEN it is about 2.5 x the noise of a worker's sum: the noise's slopes are not extrapolated (trend_z 3)
    d = verdict.decision
    assert d.details["error_groups"] == 2
    assert d.details["headroom"] < 0.2
    # AND extrapolating slopes of one standard error (trend_z 1) makes it 0.28 (0.44 when the regions were grouped
    # by the last window's own counts, every region empty in it in one group: forecast > 0, actual 0)
    loose = PredictivePolicy(trend_z=1.0).decide(two, obs, window_end=12 * S, latency_s=S, max_load=1_000.0,
                                                 build=lambda c, fill: build_spec(c, 1_000.0, previous=two, fill=fill))
    assert loose.decision.details["headroom"] < 0.32


def test_the_first_spec_on_a_sparse_window_sizes_its_catch_all_for_the_places_not_seen_yet():
    # GIVEN a first window of 200 lone events scattered over the map (each the only one of its square)
    cells = {qk((37 * i) % 1024, (91 * i) % 1024, Z): 1.0 for i in range(200)}
    counts = make_counts(cells)
    policy = PredictivePolicy()
    g = counts.grid()
    levels = CellLevels.empty(Z).update((g.x << Z) | g.y, g.weight, alpha=policy.cell_alpha, jump_z=policy.cell_jump_z)
    h = LoadHistory.empty(policy.region_zoom(Z), S).absorb(cells_of(counts), S, S, policy.history_windows)
    obs = Observation(counts, cells_of(counts), g, g, h, levels)
    # WHEN the first spec is decided, packed to 60 a worker
    verdict = policy.decide(None, obs, window_end=S, latency_s=S, max_load=60 / (0.95 / 1.2), build=lambda c, f:
                            build_spec(c, 60 / (0.95 / 1.2), fill=f))
    spec = verdict.candidate
    assert spec is not None
    # THEN the catch-all expects the share of events that were alone in their square, of the forecast total
    # (the builder lists coarse squares over the empty map between them: a few stay alone)
    share = verdict.decision.details["unseen_share"]
    assert 0 < share < 0.5
    assert spec.catch_all.load == pytest.approx(share * verdict.decision.details["forecast_total"])
    # AND its worker stays within the packing level, as the decision says
    host = next(w for w in spec.workers if w.id == spec.catch_all.worker)
    assert host.load <= 60.0 + 1e-9
    assert f"catch-all sized for {100 * share:.1f}% of the load in places not seen yet" in verdict.decision.reasons[0]
