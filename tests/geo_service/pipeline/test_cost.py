"""CPU cost per quadkey: calibration, normalisation to calibration units, report format."""

from __future__ import annotations

import time

import pytest

from geo_service.pipeline.cost import Calibration, CostError, CostTracker, calibrate, reference_workload
from geokernel.contracts.cost import cost_key


class Ticker:
    """A manually advanced timer (stands in for thread CPU time or the wall clock)."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t


def test_rates_are_cpu_per_event_in_calibration_units() -> None:
    # GIVEN a calibration of 2 ms per unit and a tracker with injected CPU and wall clocks
    cpu, wall = Ticker(), Ticker(1000.0)
    tracker = CostTracker(Calibration(0.002), grid_zoom=12, interval_s=300, clock=wall, cpu_timer=cpu)

    def work(cost: float) -> str:
        cpu.t += cost
        return "ok"

    # WHEN quadkey A gets 4 events of 1 ms each and B 1 event of 10 ms, and 300 s pass
    for _ in range(4):
        assert tracker.measure("A", lambda: work(0.001)) == "ok"
    tracker.measure("B", lambda: work(0.010))
    wall.t += 300
    assert tracker.due()
    report = tracker.take()
    # THEN A costs 0.5 units per event and B 5 units, with the event counts and the interval
    assert report.rates == pytest.approx({"A": 0.5, "B": 5.0})
    assert report.events == {"A": 4, "B": 1} and report.interval_s == 300
    body = report.to_dict(7, "w0002", ["p0003", "p0004"])
    assert body["version"] == 7 and body["worker"] == "w0002" and body["partition_ids"] == ["p0003", "p0004"]
    assert body["calibration"] == 0.002 and body["quadkey_zoom"] == 12 and body["events"] == {"A": 4, "B": 1}
    # AND a new interval starts empty and is not due yet
    assert tracker.pending_events == 0 and not tracker.due()


def test_failed_work_is_still_charged() -> None:
    # GIVEN a tracker and work that burns 3 ms then raises
    cpu = Ticker()
    tracker = CostTracker(Calibration(0.001), grid_zoom=12, interval_s=10, clock=Ticker(), cpu_timer=cpu)

    def boom() -> None:
        cpu.t += 0.003
        raise RuntimeError("bad event")

    # WHEN it runs under measure
    with pytest.raises(RuntimeError):
        tracker.measure("Q", boom)
    # THEN the CPU time and the event are recorded
    assert tracker.take().rates == pytest.approx({"Q": 3.0})


def test_calibration_takes_the_median_of_the_samples() -> None:
    # GIVEN a timer whose successive readings give runs of 5, 1 and 3 ms
    readings = iter([0.0, 0.005, 0.005, 0.006, 0.006, 0.009])
    # WHEN calibrating with three repeats
    cal = calibrate(repeats=3, workload=lambda: None, timer=lambda: next(readings))
    # THEN seconds_per_unit is the median run
    assert cal.seconds_per_unit == pytest.approx(0.003)
    assert cal.samples == pytest.approx((0.005, 0.001, 0.003))


def test_normalisation_makes_a_k_times_heavier_workload_cost_about_k_units() -> None:
    # GIVEN a real calibration on this machine (thread CPU time of the reference workload)
    cal = calibrate(repeats=5)
    tracker = CostTracker(cal, grid_zoom=12, interval_s=60)
    # WHEN events doing one and three reference workloads are measured
    for _ in range(5):
        tracker.measure("light", reference_workload)
        tracker.measure("heavy", lambda: [reference_workload() for _ in range(3)])
    rates = tracker.take().rates
    # THEN the rates are about 1 and 3 units (wide bounds: CPU time still varies on a loaded shared machine;
    # the exact arithmetic is checked with injected timers above)
    assert 0.33 < rates["light"] < 3.0
    assert 1.5 < rates["heavy"] / rates["light"] < 6.0


def test_thread_time_ignores_waiting() -> None:
    # GIVEN a real tracker
    tracker = CostTracker(calibrate(repeats=3), grid_zoom=12, interval_s=60)
    # WHEN an event mostly sleeps (I/O wait, not CPU)
    tracker.measure("sleepy", lambda: time.sleep(0.05))
    # THEN it is charged far less than the 0.05 s it took
    assert tracker.take().cpu_seconds["sleepy"] < 0.02


def test_bad_values_are_rejected_with_the_value() -> None:
    # GIVEN / WHEN / THEN non-positive calibration, interval, repeats and negative costs are refused
    with pytest.raises(CostError, match=r"got 0\.0"):
        Calibration(0.0)
    with pytest.raises(CostError, match="-5"):
        CostTracker(Calibration(0.001), grid_zoom=12, interval_s=-5)
    with pytest.raises(CostError, match="repeats"):
        calibrate(repeats=0)
    with pytest.raises(CostError, match="'Q'"):
        CostTracker(Calibration(0.001), grid_zoom=12, interval_s=1).record("Q", -1.0)
    with pytest.raises(CostError, match="no CPU time"):
        calibrate(repeats=2, workload=lambda: None, timer=lambda: 1.0)


def test_cost_key_follows_the_contract() -> None:
    # GIVEN / WHEN a report key is built / THEN it is costs/v<version>/<worker>/<epoch_s>.json
    assert cost_key(12, "w0003", 1_763_700_000.9) == "costs/v12/w0003/1763700000.json"
