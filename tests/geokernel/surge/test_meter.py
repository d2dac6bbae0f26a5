"""The surge meter: a worker signals when a surge takes it past its cap, and not on a steady load."""

from __future__ import annotations

import numpy as np
import pytest

from geokernel.errors import PolicyError
from geokernel.surge.buckets import Buckets
from geokernel.surge.meter import SurgeMeter, SurgeSettings, interval
from geokernel.surge.view import SPLIT, surge_view
from tests.geokernel.surge.surge_testkit import CAP, WINDOW_S, code, poisson, qk, row_spec

STEP = 60.0  # a fifth of the window: the default interval


def run(meter: SurgeMeter, spec_loads: list[list[float]], rates, steps: int, seed: int = 1) -> list:
    """Feed ``steps`` intervals of ``rates(k)`` (cell -> load per window) and check after each; every signal."""
    view = surge_view(row_spec(spec_loads))
    assert view is not None
    rng = np.random.default_rng(seed)
    found = []
    for k in range(steps):
        meter.record(poisson(rng, rates(k), k * STEP, (k + 1) * STEP), view.zoom)
        found += meter.check(view)
    return found


def test_steady_load_gives_no_signal():
    # GIVEN three workers at 85 % of the cap on four cells each, counted for an hour of steady Poisson load
    loads = [[212.5] * 4, [212.5] * 4, [212.5] * 4]
    rates = {i: 212.5 for i in range(12)}
    # WHEN the meter checks every interval
    found = run(SurgeMeter(), loads, lambda k: rates, 60)
    # THEN no worker signals
    assert found == []


def test_a_crowd_ramping_onto_a_cell_signals_its_worker_once_before_it_is_past_the_cap():
    # GIVEN workers at 85 %, and from interval 10 a crowd ramping onto cell 5 (worker 2) by 10 % of the cap a minute
    loads = [[212.5] * 4, [212.5] * 4, [212.5] * 4]

    def rates(k: int) -> dict[int, float]:
        r = {i: 212.5 for i in range(12)}
        r[5] += max(0, k - 10 + 0.5) * 0.1 * CAP
        return r

    # WHEN the meter checks every interval for 20 more
    meter = SurgeMeter()
    found = run(meter, loads, rates, 30)
    # THEN worker 2 signals once, naming cell 5, within five minutes of the ramp's start
    assert [s.worker for s in found] == ["w0002"]
    s = found[0]
    assert s.cells[0].quadkey == qk(5) and s.version == 3 and s.window_s == WINDOW_S and s.cap == CAP
    assert s.projected > CAP and s.at <= 15 * STEP
    assert s.cells[0].slope > 0 and s.cells[0].now > s.cells[0].base
    assert dict(s.loads)["w0001"] == pytest.approx(850, rel=0.15)


def test_a_rise_that_leaves_room_signals_nothing():
    # GIVEN workers at 50 % and a crowd of 30 % of the cap arriving on cell 5 over ten minutes
    loads = [[125.0] * 4, [125.0] * 4, [125.0] * 4]

    def rates(k: int) -> dict[int, float]:
        r = {i: 125.0 for i in range(12)}
        r[5] += min(max(0, k - 10), 10) * 0.03 * CAP
        return r

    # WHEN the meter checks every interval
    # THEN nothing signals: the worker never heads past its cap
    assert run(SurgeMeter(), loads, rates, 30) == []


def test_a_cell_split_by_entity_hash_is_left_to_the_window_path():
    # GIVEN a spec whose cell 0 is split by hash over two workers
    spec = row_spec([[400.0], [400.0]])
    from geokernel.partition_spec.model import Partition

    p0 = spec.partitions[0]
    parts = (Partition("p0001", "w0001", p0.quadkeys, 200.0, (0, 32768)),
             Partition("p0009", "w0002", p0.quadkeys, 200.0, (32768, 65536)), *spec.partitions[1:])
    view = surge_view(spec.replace(partitions=parts, workers=(spec.workers[0].__class__("w0001", 200.0,
                                                                                        spec.workers[0].hash_key),
                                                              spec.workers[1].__class__("w0002", 600.0,
                                                                                        spec.workers[1].hash_key))))
    # WHEN the meter's view locates it
    # THEN its owner is SPLIT
    assert view is not None and view.owners(np.array([code(0), code(1)])).tolist() == [SPLIT, 1]


def test_a_spec_without_a_window_or_zoom_has_no_view():
    # GIVEN a spec whose source names no window length (an older or hand-written one)
    spec = row_spec([[100.0]])
    # WHEN the meter asks for its view
    # THEN there is none (the router's meter stays silent under it)
    assert surge_view(spec.replace(source={"grid_zoom": 12})) is None
    assert surge_view(spec.replace(source={"window_s": 300.0})) is None


def test_settings_refuse_bad_values_naming_them():
    # GIVEN SURGE_JSON values
    # WHEN one is bad
    # THEN the error names the key and the value
    with pytest.raises(PolicyError, match="unknown key 'horizon'"):
        SurgeSettings.from_json('{"horizon": 3}')
    with pytest.raises(PolicyError, match="slope_buckets must be an integer >= 2, got 1"):
        SurgeSettings(slope_buckets=1)
    with pytest.raises(PolicyError, match="min_baseline must be <= baseline_buckets"):
        SurgeSettings(baseline_buckets=2, min_baseline=3)
    assert SurgeSettings.from_json("") == SurgeSettings()
    assert SurgeSettings.from_json('{"horizon_s": 12}').horizon_s == 12


def test_buckets_close_intervals_by_the_clock_and_fill_idle_ones():
    # GIVEN 10-second intervals
    b = Buckets(10.0, keep=3)
    # WHEN codes arrive at 1 s and 5 s, then at 41 s (three intervals later)
    assert b.add([1, 2, 2], 1.0) == []
    assert b.add([2], 5.0) == []
    closed = b.add([7], 41.0)
    # THEN the first interval closes with its counts, and the idle ones close empty
    assert [(c.start, c.end) for c in closed] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 40.0)]
    assert closed[0].codes.tolist() == [1, 2] and closed[0].counts.tolist() == [1.0, 3.0]
    assert all(c.total == 0 for c in closed[1:])


def test_interval_lookup_gives_zero_for_absent_cells():
    # GIVEN an interval of two cells
    iv = interval(0.0, 1.0, [5, 9, 5])
    # WHEN cells are looked up
    # THEN present ones give their count, absent ones 0
    assert iv.lookup(np.array([5, 6, 9, 100])).tolist() == [2.0, 0.0, 1.0, 0.0]


def test_a_reserved_workers_plan_does_not_inflate_what_the_others_are_read_at():
    # GIVEN three workers at 85 % and a fourth a relief made for a surge, planned at 90 % of the cap while it carries
    # 5 %; then a crowd ramping onto cell 5 (worker 2)
    loads = [[212.5] * 4, [212.5] * 4, [212.5] * 4, [900.0]]

    def rates(k: int) -> dict[int, float]:
        r = {i: 212.5 for i in range(12)}
        r[12] = 50.0
        r[5] += max(0, k - 10 + 0.5) * 0.1 * CAP
        return r

    # WHEN the meter checks every interval
    (s,) = run(SurgeMeter(), loads, rates, 30)
    # THEN worker 2 is read at what it carries (850 plus the crowd so far), not through the inflated plan's total
    carried = 850 + (s.at / STEP - 10) * 0.1 * CAP
    assert s.worker == "w0002" and s.measured == pytest.approx(carried, rel=0.12)
    assert dict(s.loads)["w0004"] == pytest.approx(50, rel=0.5)


def test_recent_buckets_judge_a_sliding_window_at_every_interval():
    # GIVEN 10-second intervals judged three at a time (as the local routers' meter)
    meter = SurgeMeter(SurgeSettings(recent_buckets=3, baseline_buckets=12, min_baseline=4, slope_buckets=4,
                                     horizon_s=20.0))
    view = surge_view(row_spec([[212.5] * 4, [212.5] * 4, [212.5] * 4]))
    assert view is not None
    rng = np.random.default_rng(4)
    found = []
    # WHEN a crowd arrives on cell 5 at 200 s, ramping by 80 % of the cap a minute (per-window load) to 80 %
    for k in range(40):
        r = {i: 212.5 for i in range(12)}
        r[5] += min(max(0.0, (k * 10 - 200) / 60), 1.0) * 0.8 * CAP
        meter.record(poisson(rng, r, k * 10.0, (k + 1) * 10.0), view.zoom)
        found += meter.check(view)
    # THEN worker 2 signals once, within a minute of the crowd's first events (before its ramp ends)
    assert [s.worker for s in found] == ["w0002"] and found[0].at <= 260
