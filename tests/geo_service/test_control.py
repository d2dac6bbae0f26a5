"""What a worker reads of the control table: the active version and the deploy plan."""

from __future__ import annotations

import pytest
from geo_testkit import Resources, set_active, set_plan

from geo_service.aws import Clients
from geo_service.control import ControlError, ControlView, PlanView, parse_plan, read_control


def test_nothing_deployed_reads_as_empty(clients: Clients, resources: Resources) -> None:
    # GIVEN an empty control table WHEN read THEN no active version and no plan
    assert read_control(clients.dynamodb, resources.control_table) == ControlView(None, None)


def test_active_and_plan_are_read_together(clients: Clients, resources: Resources) -> None:
    # GIVEN v3 active and a started carry plan 3 -> 4 keeping w0001, then a first-deploy plan with no from_version
    set_active(clients, resources, 3)
    set_plan(clients, resources, 3, 4, ["w0001"])
    ctl = read_control(clients.dynamodb, resources.control_table)
    # THEN both are there and the plan keeps w0001 of v3 (not of any other version)
    assert ctl.active == 3 and ctl.plan == PlanView(3, 4, "carry", frozenset({"w0001"}), "started")
    assert ctl.plan.keeps(3, "w0001") and not ctl.plan.keeps(2, "w0001") and not ctl.plan.keeps(3, "w0002")
    set_plan(clients, resources, None, 1, [], status="rolled_back")
    ctl = read_control(clients.dynamodb, resources.control_table)
    assert ctl.plan is not None and ctl.plan.from_version is None and ctl.plan.rolled_back


def test_a_rolled_back_version_is_dropped_until_something_flips_past_it() -> None:
    # GIVEN a rolled-back plan to v5 WHEN v4 is active THEN v5 is dropped; a whole-mode plan never keeps a slot
    rolled = PlanView(4, 5, "carry", frozenset({"w1"}), "rolled_back")
    assert ControlView(4, rolled).dropped(5) and not ControlView(4, rolled).dropped(4)
    assert not PlanView(4, 5, "whole", frozenset({"w1"}), "started").keeps(4, "w1")


def test_a_plan_without_its_target_is_rejected_naming_it() -> None:
    with pytest.raises(ControlError, match="to_version"):
        parse_plan({"pk": {"S": "plan"}, "from_version": {"N": "1"}})
