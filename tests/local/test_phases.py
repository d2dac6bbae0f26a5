"""local/phases.py: the line that says the router fell behind the replay."""

from __future__ import annotations

from local.phases import LAG_SPAN_S, RouterLag


def _feed(lag: RouterLag, send_rate: float, route_rate: float, seconds: float, start: tuple[float, int, int]
          ) -> list[str]:
    t, sent, routed = start
    lines = []
    for i in range(1, int(seconds) + 1):
        line = lag.check(t + i, int(sent + send_rate * i), int(routed + route_rate * i))
        if line:
            lines.append(line)
    return lines


def test_a_router_that_keeps_up_is_not_named() -> None:
    # GIVEN a replay of 500 events/s routed at 480/s with a backlog of a few seconds
    lag = RouterLag()
    # WHEN watched for three spans THEN nothing is said
    assert _feed(lag, 500, 480, 3 * LAG_SPAN_S, (0.0, 2_000, 0)) == []


def test_a_router_that_falls_behind_for_good_is_named_once_with_both_rates() -> None:
    # GIVEN a replay of 1,111 events/s that the router routes at 700/s
    lag = RouterLag()
    # WHEN watched for four spans
    lines = _feed(lag, 1111, 700, 4 * LAG_SPAN_S, (0.0, 0, 0))
    # THEN one line names the backlog, both rates and what to change
    assert len(lines) == 1
    assert "routed 700 events/s against 1,111 sent per second" in lines[0] and "--speed" in lines[0]


def test_a_short_burst_behind_is_not_named() -> None:
    # GIVEN a router that routes nothing for 20 s (shorter than the span), then catches up
    lag = RouterLag()
    lines = _feed(lag, 500, 0, 20, (0.0, 0, 0))
    lines += _feed(lag, 500, 1500, 10, (20.0, 10_000, 0))
    # THEN nothing is said: the span is not full before the router is back
    assert lines == []
