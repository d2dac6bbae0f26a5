"""Tests for partitioner.control.pooling: sparse regions' forecasts pooled towards their parent's (empirical Bayes)."""

from __future__ import annotations

import numpy as np
import pytest

from partitioner.control.pooling import ancestor_codes, parents, pooled_levels

S = 600.0


def test_ancestors_of_tile_codes():
    # GIVEN tiles (5, 6) and (4, 7) at zoom 4 as codes x << 4 | y
    codes = np.array([(5 << 4) | 6, (4 << 4) | 7], dtype=np.int64)
    # WHEN their ancestors one and two zooms up are taken
    # THEN (2, 3) and (2, 3) at zoom 3, one distinct parent
    assert ancestor_codes(codes, 4, 1).tolist() == [(2 << 3) | 3, (2 << 3) | 3]
    uniq, inv = parents(codes, 4, 2)
    assert uniq.tolist() == [(1 << 2) | 1] and inv.tolist() == [0, 0]


def test_sparse_regions_are_pooled_towards_their_parent_and_dense_ones_keep_their_level():
    # GIVEN 16 regions under one zoom-4 parent (levels 2), each ~1 event a window (Poisson) for two windows, and 16
    # under another whose regions carry 50 to 800 events (a city beside its countryside); a forecast of their
    # weighted mean counts
    rng = np.random.default_rng(3)
    codes = np.array([(x << 6) | y for x in range(4) for y in range(4)]
                     + [(x << 6) | y for x in range(60, 64) for y in range(4)], dtype=np.int64)
    lam = np.concatenate([np.full(16, 1.0), np.linspace(50, 800, 16)])
    totals = rng.poisson(lam, size=(2, 32)).astype(float)
    times = np.array([S / 2, 3 * S / 2])
    own = (totals * (0.5 ** ((times[-1] - times) / (2 * S)))[:, None]).sum(axis=0) / (1 + 0.5 ** 0.5)
    # WHEN pooled
    pooled = pooled_levels(own[None, :], times, totals, codes, 6, S, 2.0)[0]
    # THEN a sparse region seen at 0-4 events is moved most of the way to its parent's mean (its own mean is noise)
    sparse = slice(0, 16)
    mean = own[sparse].mean()
    assert np.all(np.abs(pooled[sparse] - mean) <= 0.35 * np.abs(own[sparse] - mean) + 1e-9)
    # AND a dense region, whose spread is far beyond its noise, moves by less than 1 % of a mean region
    dense = slice(16, 32)
    assert np.all(np.abs(pooled[dense] - own[dense]) <= 0.01 * own[dense].mean())
    # AND each parent's total is kept, and a region alone under its parent keeps its forecast
    assert pooled[sparse].sum() == pytest.approx(own[sparse].sum()) and pooled[dense].sum() == pytest.approx(
        own[dense].sum())
    assert pooled_levels(own[None, :1], times, totals[:, :1], codes[:1], 6, S, 2.0).tolist() == [[own[0]]]
