"""Tests for partitioner.simulate's scenarios, windows and bundled places: real places, deterministic per seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from geokernel.errors import CountsError
from partitioner.simulate.places import PLACES_FILE, load_places
from partitioner.simulate.scenarios import (
    COST_FACTOR,
    STADIUM_OPEN,
    commute_profiles,
    cost_day,
    global_day,
    metro_day,
    scenario,
    stadium_level,
)
from partitioner.simulate.windows import CellSeries, SimulationError, read_window_dir


@pytest.fixture(scope="module")
def day() -> CellSeries:
    series = global_day(1).series
    assert isinstance(series, CellSeries)
    return series


def test_the_bundled_places_are_every_geonames_place():
    p = load_places()
    assert 30_000 < len(p.pop) < 40_000 and p.pop.min() >= 0 and p.lon.min() >= -180 and p.lon.max() <= 180
    assert PLACES_FILE.stat().st_size < 300_000  # small enough to ship in the library


def test_global_day_is_deterministic_per_seed_and_sized_for_100_workers(day: CellSeries):
    sc = global_day(1)
    assert len(sc.series) == 144 and sc.window_s == 600 and sc.latency_s == 600 and sc.swap_s == 240
    w = day.window(70)
    again = global_day(1).series.window(70)
    assert w.events.quadkeys == again.events.quadkeys and np.array_equal(w.events.weights, again.events.weights)
    other = global_day(2).series.window(70)
    assert not np.array_equal(other.events.weights[:100], w.events.weights[:100])
    peak = max(float(day.expected(t).sum()) for t in range(0, 144, 4))
    assert 95 <= peak / sc.max_load <= 101
    assert 15_000 < len(w.events) < 30_000 and set(w.events.zooms) == {10}


def test_load_follows_local_solar_time(day: CellSeries):
    # the Americas (west of -30) carry more at 20:00 UTC (their afternoon) than at 08:00 UTC (their night)
    from geokernel.geo.tiles import quadkeys_to_arrays
    from partitioner.simulate.places import code_centres

    x, y, z = quadkeys_to_arrays(day.cells)
    lon, _ = code_centres(x, y, z)
    west = lon < -30
    assert day.expected(120)[west].sum() > 2 * day.expected(48)[west].sum()


def test_the_metro_day_has_two_commute_peaks_and_a_stadium_ramping_over_20_minutes():
    h = np.arange(0, 24, 0.25)
    total = np.array([sum(commute_profiles(v)) for v in h])
    morning, evening = h[np.argmax(np.where(h < 12, total, 0))], h[np.argmax(np.where(h >= 12, total, 0))]
    assert 7.5 <= morning <= 9 and 17 <= evening <= 18.5 and total.max() > 3 * total.min()
    start = STADIUM_OPEN[0]
    assert stadium_level(start - 21 / 60) == 0 and stadium_level(start - 10 / 60) == pytest.approx(0.5)
    assert stadium_level(start) == 1.0 and 0 < stadium_level(STADIUM_OPEN[1] + 0.25) < 1
    sc = metro_day(1)
    assert len(sc.series) == 288 and set(sc.series.window(100).events.zooms) == {16}


def test_the_cost_day_makes_some_areas_ten_times_as_expensive():
    sc = cost_day(1)
    assert isinstance(sc.series, CellSeries) and sc.series.rates is not None
    rates = sc.series.rates
    assert set(np.round(np.unique(rates) / rates.min(), 6)) == {1.0, COST_FACTOR}
    w = sc.series.window(72)
    assert w.cost is not None and w.cost.quadkeys == w.events.quadkeys and w.truth is w.cost
    day = np.sum([sc.series.expected(t) for t in range(144)], axis=0)
    assert float((day * rates).sum() / day.sum()) == pytest.approx(1.0)  # cost in events at mean cost


def test_unknown_scenario_and_empty_directory_are_named(tmp_path: Path):
    with pytest.raises(SimulationError, match="unknown scenario 'moon-day'"):
        scenario("moon-day")
    with pytest.raises(SimulationError, match=r"holds no \.csv file"):
        read_window_dir(tmp_path)
    with pytest.raises(CountsError, match="cannot read places file"):
        load_places.__wrapped__(tmp_path / "missing.csv.gz")
