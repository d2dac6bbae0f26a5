"""local.report.invariants.served_check: the router's version without a running worker, and injected outages."""

from __future__ import annotations

from local.faults.record import FaultRecord
from local.report.invariants import served_check

LEASE_S = 9.0


def _hook_timeout(injected: float, recovered: float | None) -> FaultRecord:
    return FaultRecord("hook-timeout", injected_at=injected, recovered_at=recovered, deadline_s=2 * LEASE_S,
                       outage=True)


def test_a_span_longer_than_one_lease_fails_without_a_fault() -> None:
    # GIVEN one span of 9.4 s without a running worker of v2, and no injected fault
    # WHEN it is checked
    check = served_check([(100.0, 109.4, 2)], [], LEASE_S)
    # THEN the invariant breaks and says how long and which version
    assert not check.ok and "9.4s (v2)" in check.detail


def test_the_outage_of_an_ecs_rollback_after_the_flip_is_held_to_the_faults_deadline() -> None:
    # GIVEN hook-timeout injected at 100 s (ECS stopped v2's tasks) and recovered at 109.6 s, and the span it opened
    fault = _hook_timeout(100.0, 109.6)
    check = served_check([(100.2, 109.6, 2)], [fault], LEASE_S)
    # THEN the 9.4 s span is within the fault's 18 s deadline: the invariant holds, and the span is still reported
    assert check.ok, check.detail
    assert "9.4s (v2, hook-timeout, deadline 18s)" in check.detail and "longest span" in check.detail
    # AND past the fault's deadline the invariant breaks
    late = served_check([(100.2, 119.0, 2)], [_hook_timeout(100.0, None)], LEASE_S)
    assert not late.ok and "18.8s" in late.detail


def test_a_span_outside_the_outage_is_still_held_to_one_lease() -> None:
    # GIVEN a hook-timeout that recovered at 109 s, and a later 10 s span with no fault open
    fault = _hook_timeout(100.0, 109.0)
    check = served_check([(100.2, 109.0, 2), (150.0, 160.0, 3)], [fault], LEASE_S)
    # THEN the later span breaks the invariant
    assert not check.ok and "10.0s (v3)" in check.detail
    # AND a span that began before the fault was injected is not excused by it either
    assert not served_check([(99.0, 109.0, 2)], [fault], LEASE_S).ok


def test_without_an_observer_the_check_fails() -> None:
    assert not served_check(None, [], LEASE_S).ok
