"""What a worker reads of the control table: the active version and the swap head."""

from __future__ import annotations

import pytest
from geo_testkit import Resources, set_active, set_plan

from geo_service.adapters.aws import Clients
from geo_service.swap.control import ControlError, ControlView, parse_swap, read_control
from geokernel.contracts.plan import SwapHead


def test_nothing_deployed_reads_as_empty(clients: Clients, resources: Resources) -> None:
    # GIVEN an empty control table WHEN read THEN no active version and no plan
    assert read_control(clients.dynamodb, resources.control_table) == ControlView(None, None)


def test_active_and_swap_head_are_read_together(clients: Clients, resources: Resources) -> None:
    # GIVEN v3 active and a started carry swap 3 -> 4, then a rolled-back first deploy with no from_version
    set_active(clients, resources, 3)
    set_plan(clients, resources, 3, 4)
    ctl = read_control(clients.dynamodb, resources.control_table, consistent=True)
    # THEN both are there; the swap keeps a slot of v3 that v4 has too (not of another version, not one v4 lacks)
    assert ctl.active == 3 and ctl.plan is not None
    assert (ctl.plan.from_version, ctl.plan.to_version, ctl.plan.mode, ctl.plan.status) == (3, 4, "carry", "started")
    new_ids = frozenset({"w0001"})
    assert ctl.plan.keeps(3, "w0001", new_ids) and not ctl.plan.keeps(2, "w0001", new_ids)
    assert not ctl.plan.keeps(3, "w0002", new_ids)
    set_plan(clients, resources, None, 1, status="rolled_back")
    ctl = read_control(clients.dynamodb, resources.control_table, consistent=True)
    assert ctl.plan is not None and ctl.plan.from_version is None and ctl.plan.rolled_back


def test_a_rolled_back_version_is_dropped_until_something_flips_past_it() -> None:
    # GIVEN a rolled-back swap to v5 WHEN v4 is active THEN v5 is dropped; a whole-mode swap never keeps a slot
    rolled = SwapHead(4, 5, "carry", "rolled_back")
    assert ControlView(4, rolled).dropped(5) and not ControlView(4, rolled).dropped(4)
    assert not SwapHead(4, 5, "whole", "started").keeps(4, "w1", frozenset({"w1"}))


def test_a_swap_head_without_its_target_is_rejected_naming_it() -> None:
    with pytest.raises(ControlError, match="to_version"):
        parse_swap({"pk": {"S": "swap"}, "from_version": {"N": "1"}})
