"""local.faults.deployer_crash: the deployer dies once in the next swap's fleet start; a later step finishes it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from local.faults.deployer_crash import CrashingFleet, DeployerCrash, InjectedCrash


@dataclass(frozen=True)
class Plan:
    to_version: int
    from_version: int | None


class Fleet:
    def __init__(self) -> None:
        self.started: list[int] = []

    def start(self, plan: Plan) -> None:
        self.started.append(plan.to_version)

    def poll(self) -> None:
        self.started.append(-1)


def test_deployer_crash_dies_once_in_the_next_swaps_fleet_start_and_recovers_when_it_flipped() -> None:
    # GIVEN a live spec and the crashing view of the fleet
    inner = Fleet()
    fleet = CrashingFleet(inner)
    state = {"active": 1, "started": False}
    fault = DeployerCrash(fleet, lambda v, old: bool(state["started"]), lambda: int(state["active"]),
                          lambda: 90.0, deadline_s=65.0, clock=lambda: 100.0)
    fault.poll()
    assert fleet.armed and fault.record.injected_at is None
    # WHEN the next swap starts its fleet THEN the deployer dies there, once; other calls pass through
    with pytest.raises(InjectedCrash, match="v2"):
        fleet.start(Plan(2, 1))
    fleet.poll()
    fleet.start(Plan(2, 1))
    assert inner.started == [-1, 2]
    fault.poll()
    assert fault.record.injected_at == 100.0 and not fault.record.recovered
    # WHEN a later step started the fleet but v2 has not flipped yet THEN not recovered; once flipped, recovered
    state["started"] = True
    fault.poll()
    assert not fault.record.recovered
    state["active"] = 2
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline
    assert fault.record.took_over_by["fleet"] == "started by a later step; active spec v2 (the crashed swap was to v2)"


def test_a_crashed_swap_whose_carried_slots_flipped_without_a_fleet_start_recovered() -> None:
    # GIVEN a deployer that died in v2's fleet start
    fleet = CrashingFleet(Fleet())
    state = {"active": 1}
    fault = DeployerCrash(fleet, lambda v, old: False, lambda: int(state["active"]), lambda: 90.0,
                          deadline_s=65.0, clock=lambda: 100.0)
    fault.poll()
    with pytest.raises(InjectedCrash):
        fleet.start(Plan(2, 1))
    fault.poll()
    assert not fault.record.recovered
    # WHEN v2 flipped with no fleet start recorded (carry mode: running workers carried every slot), or a later
    # version flipped THEN recovered, and the table says no start was recorded
    state["active"] = 3
    fault.poll()
    assert fault.record.recovered and fault.record.took_over_by["fleet"] == "no fleet start recorded; active spec v3 (the crashed swap was to v2)"


def test_deployer_crash_is_open_from_the_crash_itself_not_from_the_next_poll() -> None:
    # GIVEN an armed crashing fleet and its fault, not yet polled after the crash
    fleet = CrashingFleet(Fleet())
    state = {"active": 1}
    fault = DeployerCrash(fleet, lambda v, old: True, lambda: int(state["active"]), lambda: 90.0, deadline_s=65.0,
                          clock=lambda: 100.0)
    fault.poll()
    assert not fault.is_open()
    # WHEN the deployer dies in the fleet start THEN the fault is open at once (a hook fault must leave that swap alone)
    with pytest.raises(InjectedCrash):
        fleet.start(Plan(2, 1))
    assert fault.record.injected_at is None and fault.is_open()
    # AND it closes once the crashed swap flipped and a poll saw it
    fault.poll()
    state["active"] = 2
    fault.poll()
    assert fault.record.recovered and not fault.is_open()
