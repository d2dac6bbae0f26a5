"""Tests for partitioner.control.forecast: the load history per region and the trend forecast."""

from __future__ import annotations

import numpy as np
import pytest
from spec_factory import make_counts, qk

from geokernel.errors import PolicyError
from partitioner.control.forecast import (
    TREND_Z,
    LoadHistory,
    backtest,
    fit,
    forecast_at,
    forecast_load,
    peak_by_ancestor,
    pooled_fit,
    region_codes,
)
from partitioner.control.levels import CellLevels
from partitioner.load.loads import cells_of

S = 600.0
# two regions at zoom 6 (levels 4 above zoom 10), under different zoom-4 parents
A = [qk(1, 1, 10), qk(2, 3, 10)]
B = [qk(80, 1, 10)]
SIBLING = qk(17, 1, 10)  # a zoom-6 region next to A's, under the same zoom-4 parent


def window(a: float, b: float) -> object:
    return cells_of(make_counts({A[0]: a / 2, A[1]: a / 2, B[0]: b}))


def history(series: list[tuple[float, float]], keep: int = 12) -> LoadHistory:
    h = LoadHistory.empty(6, S)
    for k, (a, b) in enumerate(series):
        h = h.absorb(window(a, b), (k + 1) * S, S, keep)  # type: ignore[arg-type]
    return h


def test_regions_are_the_ancestors_at_the_region_zoom():
    # GIVEN cells at zoom 10 / WHEN coded at zoom 6 / THEN cells under one zoom-6 tile share a code
    codes = region_codes(window(10, 5), 6)  # type: ignore[arg-type]
    assert codes[0] == codes[1] != codes[2]


def test_absorb_keeps_the_last_windows_and_is_idempotent_for_the_same_window():
    # GIVEN three windows absorbed with keep=2
    h = history([(100, 10), (200, 20), (300, 30)], keep=2)
    # THEN only the last two remain, oldest first
    assert h.ends == (2 * S, 3 * S) and h.totals.tolist() == [[200, 20], [300, 30]]
    # WHEN the last window is absorbed again with other numbers (a retried snapshot)
    again = h.absorb(window(999, 9), 3 * S, S, 2)  # type: ignore[arg-type]
    # THEN it replaces that window, not appends
    assert again.ends == h.ends and again.totals.tolist() == [[200, 20], [999, 9]]
    # AND an older window is ignored
    assert h.absorb(window(1, 1), 1 * S, S, 2) is h  # type: ignore[arg-type]


def test_a_region_that_empties_for_the_whole_history_is_dropped():
    h = history([(100, 10), (100, 0), (100, 0)], keep=2)
    assert len(h.regions) == 1 and h.totals.tolist() == [[100], [100]]


def test_history_json_round_trip_and_bad_documents():
    h = history([(100, 10), (120.5, 20)])
    back = LoadHistory.from_dict(h.to_dict())
    assert back.ends == h.ends and np.array_equal(back.regions, h.regions) and np.allclose(back.totals, h.totals)
    with pytest.raises(PolicyError, match=r"not a geo-rebalancer\.load-history/1"):
        LoadHistory.from_dict({"format": "x"})
    bad = {**h.to_dict(), "totals": [[1, -2], [3, 4]]}
    with pytest.raises(PolicyError, match="finite and >= 0"):
        LoadHistory.from_dict(bad)


def test_a_linear_trend_is_extrapolated():
    # GIVEN region A growing by 1000 events per window (large counts: the trend dominates Poisson noise)
    h = history([(10_000 + 1000 * k, 500) for k in range(5)])
    # WHEN forecast two windows after the last window's centre
    f = forecast_at(h, [h.centres[-1] + 2 * S], span=4, half_life=2.0)
    # THEN A follows the line (14000 + 2000)
    assert f[0, 0] == pytest.approx(16_000, rel=0.02)
    # AND the flat region B keeps its own flat line where its data say so (at trend_z 1) and otherwise leans
    # towards the trend of the whole map, which A makes +8 % a window, by at most half of it (partial pooling)
    own = forecast_at(h, [h.centres[-1] + 2 * S], span=4, half_life=2.0, trend_z=1.0)
    assert own[0, 1] == pytest.approx(500, rel=0.02) and 500 < f[0, 1] < 500 * (1 + 0.5 * 2.5 * 0.08)


def test_a_small_region_s_noise_is_shrunk_but_a_large_region_s_trend_is_kept():
    # GIVEN the same relative steps in a region of ~20 events and in one of ~20,000 events
    t = np.array([0.0, S, 2 * S])
    small = np.array([18.0, 20.0, 24.0])
    w = np.sqrt(0.5 ** ((t[-1] - t) / (2.0 * S)))
    raw = np.polyfit(t, small, 1, w=w)[0]  # the plain weighted least-squares slope
    # WHEN fitted with one standard error asked for (trend_z 1)
    fitted = fit(t, np.stack([small, 1000 * small], axis=1), S, span=4, half_life=2.0, trend_z=1.0).slope
    # THEN the small region keeps at most 60% of its slope (its steps are Poisson-sized), the large one >= 95%
    assert abs(fitted[0]) <= 0.6 * raw and fitted[1] >= 0.95 * 1000 * raw
    # AND at the default three standard errors (TREND_Z), the small one keeps at most 15%, the large one (whose three
    # points bend, so its standard error is their residual, not Poisson) still most of it
    assert TREND_Z == 3.0
    strict = fit(t, np.stack([small, 1000 * small], axis=1), S, span=4, half_life=2.0).slope
    assert abs(strict[0]) <= 0.15 * raw and strict[1] >= 0.7 * 1000 * raw
    # AND a large region's straight ramp is kept whole
    t4 = np.array([0.0, S, 2 * S, 3 * S])
    straight = fit(t4, np.array([[18_000.0], [20_000.0], [22_000.0], [24_000.0]]), S, span=4, half_life=2.0).slope
    assert float(straight[0]) * S == pytest.approx(2000, rel=0.02)
    # AND a wobble with no direction is not extrapolated
    wobble = fit(t, np.array([[24.0], [18.0], [22.0]]), S, span=4, half_life=2.0).slope
    assert abs(float(wobble[0])) * S < 0.05


def test_a_small_region_follows_its_parent_s_relative_trend():
    # GIVEN a large region rising 10% a window and a tiny sibling whose few counts show no clear trend
    h = LoadHistory.empty(6, S)
    for k in range(5):
        a = 10_000 * 1.1 ** k
        tiny = [20.0, 19.0, 23.0, 21.0, 22.0][k]
        h = h.absorb(cells_of(make_counts({A[0]: a, SIBLING: tiny})), (k + 1) * S, S, 12)
    # WHEN forecast two windows ahead, with and without its parent
    at = [h.centres[-1] + 2 * S]
    pooled = forecast_at(h, at, span=4, half_life=2.0)[0]
    alone = fit(h.centres, h.totals, S, span=4, half_life=2.0).at(at)[0]
    # THEN the sibling borrows the parent's growth (~10% a window) where alone it would stay about flat
    sib = int(np.nonzero(h.regions == region_codes(cells_of(make_counts({SIBLING: 1.0})), 6)[0])[0][0])
    assert pooled[sib] > 1.15 * alone[sib] and alone[sib] < 1.05 * h.totals[-2:, sib].mean()
    assert pooled[1 - sib] == pytest.approx(alone[1 - sib], rel=0.01)  # the large region needs no help


def test_a_ramp_shared_by_many_small_far_apart_regions_is_followed_through_the_whole_map_s_trend():
    # GIVEN 64 regions of a few events each, one per zoom-3 tile (no two under one zoom-4 parent), all rising by
    # about 3 events a window: each region's own slope is 1-2 standard errors, the map's is ~10
    rng = np.random.default_rng(3)
    cells = [qk(128 * x + 5, 128 * y + 5, 10) for x in range(8) for y in range(8)]
    h = LoadHistory.empty(6, S)
    for k in range(5):
        n = rng.poisson(4.0 + 3.0 * k, len(cells))
        h = h.absorb(cells_of(make_counts({c: float(v) for c, v in zip(cells, n, strict=True) if v})), (k + 1) * S, S,
                     12)
    # WHEN forecast two windows after the last window's centre at trend_z 3 (the default)
    f = forecast_at(h, [h.centres[-1] + 2 * S], span=4, half_life=2.0, trend_z=3.0)[0]
    alone = fit(h.centres, h.totals, S, span=4, half_life=2.0, trend_z=3.0).at([h.centres[-1] + 2 * S])[0]
    # THEN the map's total follows the line (64 x (4 + 3 x 6) = 1,408) within 8 %, where each region on its own
    # data alone keeps too little of its slope to reach it
    assert f.sum() == pytest.approx(64 * (4 + 3 * 6), rel=0.08)
    assert alone.sum() < 0.9 * 64 * (4 + 3 * 6)


def test_the_interval_s_peak_is_taken_per_ancestor_not_per_region():
    # GIVEN forecasts at the two ends of an interval for four regions under one zoom-2 ancestor (4 zooms up from
    # zoom 6) whose noise slopes cancel, and a fifth region elsewhere that ramps
    codes = np.array([(x << 6) | 0 for x in (0, 1, 2, 3)] + [(40 << 6) | 40], dtype=np.int64)
    h = LoadHistory(6, S, (S,), codes, np.ones((1, 5)))
    ahead = np.array([[10.0, 12.0, 8.0, 11.0, 100.0],
                      [12.0, 10.0, 11.0, 8.0, 130.0]])
    # WHEN the peak over the interval is taken
    peak = peak_by_ancestor(h, ahead)
    # THEN the four take the end where their ancestor's sum peaks (41 vs 41: the first), not each its own larger end
    # (46 in all), and the ramping region its later end
    assert peak[:4].tolist() == [10.0, 12.0, 8.0, 11.0] and peak[4] == 130.0
    # AND one time, or no region, passes through
    assert peak_by_ancestor(h, ahead[:1]).tolist() == ahead[0].tolist()
    assert peak_by_ancestor(LoadHistory.empty(6, S), np.zeros((2, 0))).shape == (0,)


def test_backtest_only_uses_windows_known_before_each_target():
    # GIVEN a history where region A jumps in the last window
    h = history([(1000, 100), (1000, 100), (1000, 100), (5000, 100)])
    # WHEN the last windows are re-forecast 1.5 windows ahead
    bt = backtest(h, 1.5 * S, windows=2, span=4, half_life=2.0)
    # THEN the jump's window was forecast from the flat windows only (no peeking): 1000, and it carried 5000
    assert bt.forecast[-1, 0] == pytest.approx(1000) and bt.actual[-1, 0] == 5000


def test_a_crowd_arriving_in_one_cell_is_extrapolated_there():
    # GIVEN region A flat at 10,000 events except one cell where a crowd arrives: 100, 100, 1100, 2100
    crowd = [100.0, 100.0, 1100.0, 2100.0]
    h, levels = LoadHistory.empty(6, S), CellLevels.empty(10)
    for k, c in enumerate(crowd):
        counts = make_counts({A[0]: 10_000.0, A[1]: c})
        h = h.absorb(cells_of(counts), (k + 1) * S, S, 12)
        g = counts.grid()
        levels = levels.update((g.x << 10) | g.y, g.weight, alpha=0.5, jump_z=3.0)
    snap = make_counts({A[0]: 10_000.0, A[1]: 2100.0})
    # WHEN forecast for the interval one to two windows after the last window
    end = h.ends[-1]
    fc = forecast_load(snap, snap.grid(), snap.grid(), h, levels, (end + S, end + 2 * S), span=4, half_life=2.0)
    w = dict(zip(fc.counts.quadkeys, fc.counts.weights.tolist(), strict=True))
    # THEN the crowd's cell is forecast at its level plus its rise per window up to the interval's end
    # (2.5 windows after the last window's centre): 2100 + 1000 x 2.5
    assert w[A[1]] == pytest.approx(2100 + 1000 * 2.5)
    assert w[A[0]] == pytest.approx(10_000, rel=0.02)  # the crowd's growth is not spread over its flat neighbour


def test_regions_picked_for_being_quiet_are_forecast_near_their_true_load_not_their_counts():
    # GIVEN 256 regions (16 parents) of one event a window on average, two windows seen
    rng = np.random.default_rng(11)
    codes = np.array(sorted((x << 6) | y for x in range(16) for y in range(16)), dtype=np.int64)
    h = LoadHistory(6, S, (S, 2 * S), codes, rng.poisson(1.0, size=(2, 256)).astype(float))
    # WHEN the regions that were quietest so far (what a builder packs onto one worker for almost nothing) are
    # forecast
    quiet = h.totals.sum(axis=0) <= 1
    ahead = forecast_at(h, [3 * S], 4, 2.0)[0]
    unpooled = pooled_fit(h.centres, h.totals, h.regions, 6, S, 4, 2.0).at([3 * S])[0]
    # THEN their sum is near their true load (one event each), where the unpooled forecast gives a third of it
    truth = float(quiet.sum())
    assert unpooled[quiet].sum() < 0.35 * truth
    assert 0.7 * truth <= ahead[quiet].sum() <= 1.1 * truth
    # AND the map's total is the unpooled forecast's
    assert ahead.sum() == pytest.approx(unpooled.sum())
