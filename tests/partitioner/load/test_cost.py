"""Tests for partitioner.load.cost: cost rates applied per grid cell and measured from a window."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from geokernel.errors import CountsError
from geokernel.geo.tiles import arrays_to_quadkeys
from partitioner.load.cost import apply_cost_rates, measured_rates
from partitioner.load.counts import Counts, Tiles


def _reference_apply(counts: Counts, rates: Mapping[str, float], grid_zoom: int) -> np.ndarray:
    """The row-by-row definition: each row times its grid-zoom ancestor's rate, else the mean rate."""
    anc = [q[:grid_zoom] for q in counts.quadkeys]
    known = np.array([rates.get(a, np.nan) for a in anc], dtype=np.float64)
    has = ~np.isnan(known)
    if not has.any():
        return np.asarray(counts.weights)
    w = np.asarray(counts.weights)
    sel = has & np.array([len(q) == grid_zoom for q in counts.quadkeys])
    denom = float(w[sel].sum())
    mean = float((w[sel] * known[sel]).sum() / denom) if denom > 0 else float(np.nanmean(known))
    return w * np.where(has, known, mean)


def _random_tree(seed: int, grid_zoom: int = 6, n: int = 400) -> Counts:
    """Grid rows at ``grid_zoom`` and deeper rows under some of them (a rolled-up quadtree)."""
    rng = np.random.default_rng(seed)
    codes = np.unique(rng.integers(0, 1 << (2 * grid_zoom), n))
    gx, gy = codes >> grid_zoom, codes & ((1 << grid_zoom) - 1)
    deep = rng.choice(len(codes), size=len(codes) // 3, replace=False)
    dz = rng.integers(1, 4, len(deep))
    dx = (gx[deep] << dz) + rng.integers(0, 1 << dz)
    dy = (gy[deep] << dz) + rng.integers(0, 1 << dz)
    x = np.concatenate([gx, dx])
    y = np.concatenate([gy, dy])
    z = np.concatenate([np.full(len(gx), grid_zoom), grid_zoom + dz])
    keys = np.unique((z << 60) | (x << 30) | y, return_index=True)[1]  # drop repeated deep rows
    x, y, z = x[keys], y[keys], z[keys]
    w = rng.integers(0, 50, len(x)).astype(np.float64)
    return Counts.from_tiles(Tiles(x, y, z), w, f"tree(seed={seed})")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_apply_cost_rates_matches_the_row_by_row_definition(seed: int) -> None:
    # GIVEN a rolled-up quadtree and rates for a random half of its grid cells (plus a junk key)
    counts = _random_tree(seed)
    rng = np.random.default_rng(seed + 10)
    grid = [q for q in counts.quadkeys if len(q) == 6]
    rates = {q: float(rng.uniform(0.2, 5.0)) for q in grid if rng.random() < 0.5}
    rates["not a quadkey"] = 9.0
    # WHEN applied
    out = apply_cost_rates(counts, rates, 6)
    # THEN every row carries its grid cell's rate, and rows without one the events-weighted mean
    np.testing.assert_allclose(out.weights, _reference_apply(counts, rates, 6), rtol=1e-12)
    assert out.quadkeys == counts.quadkeys


def test_apply_cost_rates_without_a_matching_rate_returns_the_counts() -> None:
    # GIVEN rates only for the root, which no grid-zoom ancestor equals
    counts = _random_tree(4)
    # WHEN applied
    out = apply_cost_rates(counts, {"": 2.0}, 6)
    # THEN nothing changes
    assert out is counts


def test_apply_cost_rates_with_rows_shallower_than_the_grid_zoom_uses_their_own_key() -> None:
    # GIVEN a row at zoom 2 and rates keyed at zoom 3 and zoom 2
    counts = Counts(("01", "0123"), np.array([10.0, 4.0]), "mixed")
    rates = {"01": 2.0, "012": 3.0}
    # WHEN applied at grid zoom 3
    out = apply_cost_rates(counts, rates, 3)
    # THEN the shallow row uses "01", the deep one its ancestor "012"
    np.testing.assert_allclose(out.weights, _reference_apply(counts, rates, 3))
    assert out.weights.tolist() == [20.0, 12.0]


@pytest.mark.parametrize("seed", [5, 6])
def test_measured_rates_are_cost_over_events_per_grid_cell(seed: int) -> None:
    # GIVEN events and a cost per row
    events = _random_tree(seed)
    rng = np.random.default_rng(seed)
    cost = Counts(events.quadkeys, events.weights * rng.uniform(0.5, 2.0, len(events)), "cost")
    # WHEN the rates are measured
    rates = measured_rates(events, cost, 6)
    # THEN each grid cell with events has cost / events of its grid row, and no other key appears
    expected = {q: c / e for q, e, c in zip(events.quadkeys, events.weights, cost.weights, strict=True)
                if len(q) == 6 and e > 0}
    assert rates.keys() == expected.keys()
    for q, r in rates.items():
        assert r == pytest.approx(expected[q], rel=1e-12)


def test_measured_rates_refuse_cost_rows_of_other_quadkeys() -> None:
    # GIVEN cost rows for different quadkeys
    events = Counts(("01", "02"), np.ones(2), "events")
    cost = Counts(("01", "03"), np.ones(2), "cost")
    # WHEN / THEN the mismatch is named
    with pytest.raises(CountsError, match="same quadkeys"):
        measured_rates(events, cost, 2)


def test_random_tree_helper_lists_each_quadkey_once() -> None:
    counts = _random_tree(7)
    t = counts.tiles
    assert len(set(arrays_to_quadkeys(t.x, t.y, t.z))) == len(counts)
