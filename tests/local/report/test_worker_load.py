"""local.report.worker_load: utilisation measured at the workers: windows by write time, worker-windows, the
over-cap target, cost."""

from __future__ import annotations

import math

import pytest

from geo_service.pipeline.cost import Calibration, CostReport
from local.output import OutRecord
from local.report.worker_load import (
    CostSample,
    Span,
    cost_sample,
    live_spans,
    measure,
    measured_span,
    merge,
    spread,
)

W = 10.0  # window, s
CAP = 10.0  # events per window


def _records(worker: str, version: int, per_window: dict[int, int], sent_offset_s: float = 0.0) -> list[OutRecord]:
    """``n`` records written in the middle of window ``i`` for each ``{i: n}``, sent ``sent_offset_s`` earlier."""
    out = []
    for i, n in per_window.items():
        written = int((i * W + W / 2) * 1000)
        out += [OutRecord(f"{worker}-{version}-{i}-{k}", version, worker, "p1", written - int(sent_offset_s * 1000),
                          written) for k in range(n)]
    return out


def test_received_counts_by_send_time_and_processed_by_write_time() -> None:
    # GIVEN 9 events sent in window 0 that the worker wrote in window 1 (it paused 6 s, then caught up)
    records = _records("w1", 1, {1: 9}, sent_offset_s=6.0)
    # WHEN measured
    load = measure(records, [], live_spans([(1, 0.0)]), Span(0.0, 100.0), W, CAP)
    # THEN the load it was given counts in the window they were sent, the work where it was written
    assert load.window_start(0) == 0.0
    assert load.received["v1/w1"] == (9, 0) and load.processed["v1/w1"] == (0, 9)
    # AND the pause shows as lag, never hidden
    assert load.lag is not None and load.lag.max_s == pytest.approx(6.0) and load.lag.worst_key == "v1/w1"


def test_a_catch_up_burst_is_over_the_cap_by_write_time_only() -> None:
    # GIVEN a worker given 8 events a window (80 %) that paused through window 1 and wrote its 8 in window 2
    records = _records("w1", 1, {0: 8, 2: 8, 3: 8})
    records += [OutRecord(f"late-{k}", 1, "w1", "p1", 15_000, 25_000) for k in range(8)]
    # WHEN measured
    load = measure(records, [], live_spans([(1, 0.0)]), Span(0.0, 40.0), W, CAP)
    # THEN its load is 80 % in every window; by write time window 2 holds 160 %, and the lag says why
    assert load.over_cap().over == 0 and load.over_cap().worst.utilisation == pytest.approx(0.8)  # type: ignore[union-attr]
    assert load.over_cap(load.processed).above_limit == 1 and load.processed["v1/w1"] == (8, 0, 16, 8)
    assert load.lag is not None and load.lag.max_s == pytest.approx(10.0)


def test_the_flip_window_is_partial_for_both_fleets() -> None:
    # GIVEN v1 active from 0 s, v2 from 25 s (inside window [20, 30)), both processing 5 events a window
    records = _records("w1", 1, {0: 5, 1: 5, 2: 5}) + _records("w1", 2, {2: 5, 3: 5, 4: 5})
    # WHEN measured
    load = measure(records, [], live_spans([(1, 0.0), (2, 25.0)]), Span(0.0, 50.0), W, CAP)
    # THEN v1 counts windows 0 and 1, v2 windows 3 and 4; window 2 is partial for both
    assert load.counted["v1/w1"] == (True, True, False, False, False)
    assert load.counted["v2/w1"] == (False, False, False, True, True)
    assert load.over_cap().worker_windows == 4


def test_warm_up_backlog_and_last_partial_window_do_not_count() -> None:
    # GIVEN live from 5 s; the warm-up backlog (sent before 5 s) came out until 12.3 s, in a burst of 30 events
    backlog = [OutRecord(f"b{k}", 1, "w1", "p1", 1_000, 12_300) for k in range(30)]
    records = backlog + _records("w1", 1, {2: 5, 3: 5, 4: 3})
    # WHEN the replay stopped sending at 47 s
    span = measured_span(records, live_from_s=5.0, replay_end_s=47.0)
    load = measure(records, [], live_spans([(1, 4.0)]), span, W, CAP)
    # THEN the burst window and the replay's last partial window are shown but not counted
    assert span == Span(12.3, 47.0)
    assert load.window_start(0) == 0.0 and load.processed["v1/w1"] == (0, 30, 5, 5, 3)
    assert load.received["v1/w1"] == (30, 0, 5, 5, 3)
    assert load.counted["v1/w1"] == (False, False, True, True, False)
    assert load.over_cap().over == 0


def test_a_process_serving_two_versions_without_a_gap_covers_the_flip_window() -> None:
    # GIVEN a slot served by one process as v3 until 25 s and as v4 after (carry-over)
    spans = live_spans([(3, 0.0), (4, 25.0)])
    # WHEN its spans are merged THEN the window [20, 30) is inside them, though inside neither alone
    merged = merge([spans[3], spans[4]])
    assert merged == [Span(0.0, math.inf)] and merged[0].covers(20.0, 30.0)
    assert not spans[3].covers(20.0, 30.0) and not spans[4].covers(20.0, 30.0)



def test_a_carried_process_is_one_worker_and_its_flip_window_counts() -> None:
    # GIVEN one process (owner host:4242:ab) serving slot w1 as v3 and, after the flip at 25 s, as v4,
    # and a fresh process taking slot w2 in v4 only
    carrier, fresh = "host:4242:ab", "host:5151:cd"
    mid = [int((i * W + W / 2) * 1000) for i in range(5)]
    records = [OutRecord(f"{v}-{i}-{k}", v, "w1", "p1", mid[i], mid[i], carrier)
               for v, windows in ((3, (0, 1, 2)), (4, (2, 3, 4))) for i in windows for k in range(4)]
    records += [OutRecord(f"n-{i}-{k}", 4, "w2", "p2", mid[i], mid[i], fresh)
                for i in (2, 3, 4) for k in range(3)]
    costs = [CostSample(3, "w1", 0.0, 20.0, 2.0, 8), CostSample(4, "w2", 30.0, 40.0, 1.0, 3)]
    # WHEN measured
    load = measure(records, costs, live_spans([(3, 0.0), (4, 25.0)]), Span(0.0, 50.0), W, CAP)
    # THEN the carrier is one worker whose flip window [20, 30) counts, with both versions' events in it
    assert load.received["w1/p4242"] == (4, 4, 8, 4, 4)
    assert load.counted["w1/p4242"] == (True, True, True, True, True)
    # AND the fresh process is another worker, counted from the first whole window after the flip
    assert load.counted["w2/p5151"] == (False, False, False, True, True)
    # AND each cost report is charged to the process that served that slot and version
    assert load.cpu_s["w1/p4242"][:2] == (1.0, 1.0) and load.cpu_s["w2/p5151"][3] == 1.0

def _load_with(over: int, worst_events: int, windows: int = 50) -> object:
    per_window = {i: (11 if i < over else 5) for i in range(windows)}
    if worst_events:
        per_window[windows - 1] = worst_events
    records = _records("w1", 1, per_window)
    return measure(records, [], live_spans([(1, 0.0)]), Span(0.0, windows * W), W, CAP).over_cap()


@pytest.mark.parametrize(("over", "worst", "ok"), [
    (1, 0, True),    # 1 of 50 over (2 %) at 110 %: on the target
    (2, 0, False),   # 2 of 50 (4 %): too many
    (0, 12, False),  # one window at 120 %: above the limit
    (0, 11, True),   # 110 % is not above 110 %
])
def test_over_cap_target(over: int, worst: int, ok: bool) -> None:
    # GIVEN 50 worker-windows with some over the cap WHEN the target is evaluated THEN it holds or not
    oc = _load_with(over, worst)
    assert oc.worker_windows == 50 and oc.ok is ok  # type: ignore[attr-defined]


def test_no_worker_window_fails_the_target() -> None:
    # GIVEN output only in partial windows (no version active for a whole window) WHEN measured
    records = _records("w1", 1, {0: 5})
    oc = measure(records, [], live_spans([(1, 3.0)]), Span(0.0, 10.0), W, CAP).over_cap()
    # THEN nothing was measured, and that is a failure, not a pass
    assert oc.worker_windows == 0 and not oc.ok


def test_counted_events_hide_partial_windows() -> None:
    # GIVEN a burst of 40 events in the flip window and 5 in the counted ones
    records = _records("w1", 1, {0: 5, 1: 40}) + _records("w1", 2, {2: 5})
    load = measure(records, [], live_spans([(1, 0.0), (2, 15.0)]), Span(0.0, 30.0), W, CAP)
    # WHEN the report.json series is built THEN the partial window is 0 (a reader counting values > cap agrees)
    assert load.counted_events() == {"v1/w1": [5, 0, 0], "v2/w1": [0, 0, 5]}
    assert load.received["v1/w1"] == (5, 40, 0)


def test_cost_is_spread_over_the_windows_an_interval_overlaps() -> None:
    # GIVEN 2 CPU seconds measured over [5, 25) WHEN spread over 10 s windows THEN in proportion to overlap
    assert spread(5.0, 25.0, 2.0, W) == pytest.approx({0: 0.5, 1: 1.0, 2: 0.5})


def test_cost_report_from_a_worker_gives_its_cpu_seconds() -> None:
    # GIVEN a cost report as the worker writes it (geo_service.pipeline.cost), 0.3 + 0.1 CPU s over 10 s
    report = CostReport(started_at=100.0, ended_at=110.0, grid_zoom=12, calibration=Calibration(0.002),
                        cpu_seconds={"0123": 0.3, "0132": 0.1}, events={"0123": 30, "0132": 5})
    # WHEN read back
    sample = cost_sample(report.to_dict(3, "w0002", ["p0001"]), "costs/v3/w0002/110.json")
    # THEN it names the worker, the interval and the CPU seconds
    assert (sample.version, sample.worker, sample.events) == (3, "w0002", 35)
    assert (sample.start_s, sample.end_s, sample.cpu_s) == pytest.approx((100.0, 110.0, 0.4))
    with pytest.raises(ValueError, match=r"costs/v3/bad\.json"):
        cost_sample({"version": 3}, "costs/v3/bad.json")


def test_cpu_lands_in_the_workers_windows() -> None:
    # GIVEN a worker's events in windows 0-1 and a cost report of 1 CPU s over [0, 20)
    records = _records("w1", 1, {0: 5, 1: 5})
    costs = [CostSample(1, "w1", 0.0, 20.0, 1.0, 10), CostSample(9, "w9", 0.0, 20.0, 5.0, 10)]
    # WHEN measured THEN its CPU is split between its windows, and a worker with no output is left out
    load = measure(records, costs, live_spans([(1, 0.0)]), Span(0.0, 20.0), W, CAP)
    assert load.cpu_s == {"v1/w1": pytest.approx((0.5, 0.5))} and load.cpu_known == {"v1/w1": (True, True)}


def test_cpu_of_a_window_no_report_covers_is_unknown() -> None:
    # GIVEN events in windows 0-1 but cost reported only for [0, 14) (the rest not reported yet)
    records = _records("w1", 1, {0: 5, 1: 5})
    load = measure(records, [CostSample(1, "w1", 0.0, 14.0, 0.7, 7)], live_spans([(1, 0.0)]), Span(0.0, 20.0), W, CAP)
    # THEN window 1's CPU is not known (it is not 0.2 s: the last 6 s were not reported)
    assert load.cpu_known["v1/w1"] == (True, False)
