"""Tests for bench/datasets.py: the benchmark generators are deterministic and shaped as documented."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import datasets
import shifts

from partitioner.commands.demo import DEMO_MAX_LOAD, SAMPLE_COUNTS
from partitioner.load.read import read_counts_csv


@pytest.fixture(scope="module")
def small_global() -> datasets.Dataset:
    return datasets.sparse_global(points=50_000)


def test_generators_are_deterministic(small_global):
    again = datasets.sparse_global(points=50_000)
    assert again.counts.quadkeys == small_global.counts.quadkeys
    assert np.array_equal(again.counts.weights, small_global.counts.weights)


@pytest.mark.parametrize("make", [
    lambda: datasets.sparse_global(points=50_000),
    lambda: datasets.dense_metro(radius_km=6.0, events=50_000, workers=15),
    lambda: datasets.dense_continent("us", zoom=8, workers=20),
    lambda: datasets.linear_shapes(points=50_000, workers=20),
])
def test_every_dataset_is_single_zoom_positive_with_a_sensible_lower_bound(make):
    ds = make()
    assert set(ds.counts.zooms) == {ds.zoom}
    assert float(ds.counts.weights.min()) > 0
    assert 10 <= ds.lower_bound <= 200


def test_dense_metro_covers_every_tile_of_its_disc_and_has_one_hot_cell():
    ds = datasets.dense_metro(radius_km=6.0, events=50_000, workers=15)
    assert int(np.count_nonzero(ds.counts.weights > ds.max_load)) == 1  # the stadium
    assert float(ds.counts.weights.min()) >= 1.0


def test_sized_gives_exactly_n_quadkeys():
    assert len(datasets.sized(5_000).counts) == 5_000


def test_noise_stays_within_ten_percent(small_global):
    noisy = shifts.noise(small_global.counts, 0.10)
    ratio = noisy.weights / small_global.counts.weights
    assert ratio.min() >= 0.9 and ratio.max() <= 1.1 and noisy.quadkeys == small_global.counts.quadkeys


def test_day_night_shifts_load_and_adds_a_hotspot_with_no_history(small_global):
    day, night = shifts.day_night(small_global)
    assert day.max_load == night.max_load == small_global.max_load
    assert len(night.counts) > len(day.counts)  # new quadkeys at the hotspot
    assert night.total != day.total


def test_bundled_sample_matches_its_generator():
    # GIVEN the committed sample CSV and the generator it documents
    committed = read_counts_csv(SAMPLE_COUNTS)
    sample = datasets.sample()
    # THEN they are the same rows, sized for the demo's max_load (lower bound 12, one hot cell)
    assert committed.quadkeys == sample.counts.quadkeys
    assert np.array_equal(committed.weights, sample.counts.weights)
    assert sample.max_load == DEMO_MAX_LOAD and sample.lower_bound == 12
