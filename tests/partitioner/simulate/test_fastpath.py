"""The fast path in the simulator: the router's meter on ticks, the partitioner's relief between windows."""

from __future__ import annotations

import numpy as np
import pytest

from geokernel.geo.tiles import arrays_to_quadkeys
from geokernel.surge.meter import SurgeSettings
from partitioner.control.controller import ControlSettings
from partitioner.simulate.fastpath import FastSettings
from partitioner.simulate.loop import Deploys, run
from partitioner.simulate.strategies import RunContext, make
from partitioner.simulate.windows import CellSeries, sum_counts, ticks_of
from tests.geokernel.surge.surge_testkit import row_spec

CAP = 1000.0
WINDOW_S = 300.0
CROWD_AT = 30  # the crowd's ramp starts with this window, 20 minutes long, to 80 % of the cap


def crowd_series(ticks: int) -> CellSeries:
    """Three and a half workers of load over 400 cells, and a crowd ramping onto cell 7 over 20 minutes."""
    rng = np.random.default_rng(5)
    xy = np.unique(rng.integers(16_000, 16_040, (600, 2)), axis=0)[:400]
    share = rng.pareto(3.0, len(xy)) + 0.5
    share /= share.sum()

    def expected(t: float) -> np.ndarray:
        e = share * 3500.0
        e[7] += 0.8 * CAP * float(np.clip((t + 0.5 - CROWD_AT) / 4.0, 0.0, 1.0))
        return e

    return CellSeries(tuple(arrays_to_quadkeys(xy[:, 0], xy[:, 1], 15)), expected, 48, 3, ticks_per_window=ticks)


def test_ticks_split_each_window_and_sum_to_it():
    # GIVEN the crowd day drawn in 5 ticks a window
    series = crowd_series(5)
    # WHEN a window's ticks are summed
    for t in (0, CROWD_AT + 1):
        ticks = ticks_of(series, t)
        total = sum_counts([w.events for w in ticks], "sum")
        # THEN they are the window's own draw, cell for cell
        window = series.window(t).events
        assert len(ticks) == 5 and total.quadkeys == window.quadkeys
        assert np.array_equal(np.asarray(total.weights), np.asarray(window.weights))
    # AND within the crowd's first window its ticks ramp up
    crowd = [float(w.events.weights[list(w.events.quadkeys).index(series.cells[7])]) for w in ticks_of(series, CROWD_AT)]
    assert crowd[-1] > crowd[0]


def test_the_fast_path_relieves_a_crowd_the_window_path_cannot_see_in_time():
    # GIVEN the crowd day in one-minute ticks, 10 minutes from a snapshot to its spec live
    series = crowd_series(5)
    ctx_off = RunContext(CAP, WINDOW_S, 600.0, 0.0)
    fast = FastSettings(SurgeSettings(bucket_share=0.2, horizon_s=150.0), signal_s=15.0, deploy_s=75.0)
    ctx_on = RunContext(CAP, WINDOW_S, 600.0, 0.0, fast.deploy_s, fast)
    # WHEN the default controller runs it without and with the fast path
    off = run(make("default", ControlSettings()), "default", series, ctx_off)
    on = run(make("default", ControlSettings()), "default", series, ctx_on)
    worst_off = max(float(w.utilisation.max()) for w in off.windows)
    worst_on = max(float(w.utilisation.max()) for w in on.windows)
    # THEN the window path alone lets the crowd's worker past 110 %, and with a relief about two minutes after the
    # surge shows the worker stays within it
    assert worst_off > 1.1 and worst_on <= 1.1, (worst_off, worst_on)
    assert on.fast is not None and any(r.spec is not None for _, r in on.fast.reliefs)
    # AND no window before the crowd is any different: the fast path stays silent on a steady load
    before = [w.t for w in off.windows if w.t < CROWD_AT]
    for a, b in zip(off.windows[:len(before)], on.windows[:len(before)], strict=True):
        assert a.workers == b.workers and np.array_equal(a.utilisation, b.utilisation)


def test_deployments_go_one_at_a_time_and_a_waiting_one_is_superseded():
    # GIVEN specs published at 0 (taking 100 s), at 50 and at 60 (each taking 10 s), 20 s of drain
    deploys = Deploys(drain_s=20.0)
    a, b, c = row_spec([[1.0]], 1), row_spec([[1.0]], 2), row_spec([[1.0]], 3)
    # WHEN published
    assert deploys.publish(a, 0.0, 100.0) == 100.0
    assert deploys.publish(b, 50.0, 10.0) == pytest.approx(130.0)  # starts after a's flip and drain
    # THEN c, published while b still waits to start, replaces it and starts when b would have
    assert deploys.publish(c, 60.0, 10.0) == pytest.approx(130.0)
    assert [s.spec.spec.version for s in deploys.schedule] == [1, 3]
    assert deploys.live(129.0) is a and deploys.live(131.0) is c
