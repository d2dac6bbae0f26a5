"""Control-table records (spec pointers, the partitioner's marks, the plan and its head): the stored items."""

from __future__ import annotations

import pytest

from geokernel.contracts.control import (
    LATENCY_SAMPLES,
    LatencySample,
    PolicyMark,
    SnapshotMark,
    latency_item,
    latency_samples,
)
from geokernel.contracts.errors import ContractError
from geokernel.contracts.plan import PlanItem, PlanStatus, SwapHead, SwapMode
from geokernel.contracts.spec_pointer import ActivePointer, DesiredPointer

AT = "2026-01-01T00:00:00.000000Z"


def test_pointers_store_the_items_the_tables_hold_and_read_them_back() -> None:
    # GIVEN the two spec pointers WHEN stored THEN the item bodies are the ones already in the control table
    desired = DesiredPointer(3, "specs/v00000003.json", AT)
    active = ActivePointer(3, "specs/v00000003.json", "g-geo-v3", AT)
    assert desired.to_item() == {"version": 3, "spec_key": "specs/v00000003.json", "published_at": AT}
    assert list(active.to_item()) == ["version", "spec_key", "stream_name", "flipped_at"]
    # AND they read back (a table's item carries its pk too)
    assert DesiredPointer.from_item({"pk": "desired", **desired.to_item()}) == desired
    assert ActivePointer.from_item(active.to_item()) == active


def test_a_malformed_pointer_is_refused_naming_the_item_and_the_field() -> None:
    with pytest.raises(ContractError, match=r"control item 'active': 'stream_name' must be a string, got None"):
        ActivePointer.from_item({"version": 3, "spec_key": "specs/v00000003.json"})
    with pytest.raises(ContractError, match=r"control item 'desired': 'version' must be an integer, got '3'"):
        DesiredPointer.from_item({"version": "3", "spec_key": "k"})


def test_the_active_version_alone_reads_from_either_form() -> None:
    # GIVEN the active item in plain values and in attribute-value form WHEN its version alone is read THEN 4
    assert ActivePointer.version_of({"pk": "active", "version": 4}) == 4
    assert ActivePointer.version_of_raw({"pk": {"S": "active"}, "version": {"N": "4"}}) == 4
    assert ActivePointer.version_of({"pk": "active"}) is None
    with pytest.raises(ContractError, match=r"control item 'active' has a bad 'version': 'four'"):
        ActivePointer.version_of({"version": "four"})


def test_the_partitioners_marks_store_their_fields() -> None:
    mark = SnapshotMark("k", "c", "2026-01-01T00:05:00Z", "p", "held")
    assert mark.to_item() == {"manifest_key": "k", "checksum": "c", "window_end": "2026-01-01T00:05:00Z",
                              "processed_at": "p", "outcome": "held"}
    assert SnapshotMark.from_item(mark.to_item()) == mark and SnapshotMark.from_item({}).manifest_key == ""
    policy = PolicyMark(1.5, {"a": 1})
    assert policy.to_item() == {"last_published_at": 1.5, "last_decision": {"a": 1}}
    assert PolicyMark.from_item({"last_published_at": True}) == PolicyMark(None, {})


def test_latency_keeps_the_last_samples_and_refuses_a_bad_one() -> None:
    samples = [LatencySample(v, "e", "l", 2.5) for v in range(LATENCY_SAMPLES + 3)]
    item = latency_item(samples)
    assert item["samples"][0] == {"version": 3, "snapshot_end": "e", "live_at": "l", "latency_s": 2.5}
    assert latency_samples(item) == tuple(samples[3:]) and latency_samples(None) == ()
    with pytest.raises(ContractError, match="'latency_s' must be a number, got 'x'"):
        latency_samples({"samples": [{"version": 1, "latency_s": "x"}]})


def test_the_plan_item_is_the_one_the_controller_stored() -> None:
    # GIVEN a carry plan WHEN stored THEN the fields are in the controller's order with the same values
    plan = PlanItem(1, 2, SwapMode.CARRY, ("w2", "w1"), ("w4",), ("w3",), 2, {"w2": 1, "w1": 0},
                    PlanStatus.STARTED, 123.0)
    item = plan.to_item()
    assert item == {"from_version": 1, "to_version": 2, "mode": "carry", "kept": ["w2", "w1"], "started": ["w4"],
                    "stopped": ["w3"], "moved_cells": 2, "gains": {"w2": 1, "w1": 0}, "status": "started",
                    "updated_at": 123.0}
    assert list(item) == list(PlanItem.__dataclass_fields__)[:-1]
    # AND it reads back, also once the fleet started (the flag is stored only then)
    assert PlanItem.from_item({"pk": "plan", **item}) == plan
    started = PlanItem.from_item({**item, "fleet_started": True})
    assert started.fleet_started and started.to_item() == {**item, "fleet_started": True}


@pytest.mark.parametrize(("change", "named"), [
    ({"kept": "w1"}, "'kept' must be a list of worker ids, got 'w1'"),
    ({"to_version": None}, "bad versions 1 -> None"),
    ({"mode": "half"}, "control item 'plan' mode must be one of \\['carry', 'whole'\\], got 'half'"),
    ({"status": "maybe"}, "'status' must be one of"),
])
def test_a_malformed_plan_is_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    item = {"from_version": 1, "to_version": 2, "mode": "whole", "kept": [], "started": [], "stopped": [],
            "status": "done"}
    with pytest.raises(ContractError, match=named):
        PlanItem.from_item({**item, **change})


def test_an_empty_mode_is_carry() -> None:
    assert SwapMode.parse(" ", "m") is SwapMode.CARRY and SwapMode.parse("WHOLE", "m") is SwapMode.WHOLE


def test_the_swap_head_reads_from_either_form() -> None:
    head = SwapHead(None, 2, "carry", "started", 3.0)
    assert head.to_item() == {"from_version": None, "to_version": 2, "mode": "carry", "status": "started",
                              "updated_at": 3.0}
    raw = {"pk": {"S": "swap"}, "from_version": {"NULL": True}, "to_version": {"N": "2"}, "mode": {"S": "carry"},
           "status": {"S": "started"}, "updated_at": {"N": "3.0"}}
    assert SwapHead.from_raw(raw) == head == SwapHead.from_item(head.to_item())
    assert SwapHead.from_raw({"to_version": {"S": "2"}}) == SwapHead(None, 2, "", "", 0.0)
    with pytest.raises(ContractError, match="control item 'swap' has a bad 'from_version': 'x'"):
        SwapHead.from_raw({"to_version": {"N": "2"}, "from_version": {"S": "x"}})
