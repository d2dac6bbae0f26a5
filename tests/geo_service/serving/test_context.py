"""What a worker process shares between its slots (geo_service.serving.context), against a moto server."""

from __future__ import annotations

import time

import pytest
from geo_testkit import Resources, set_active, set_plan

from geo_service.adapters.aws import Clients
from geo_service.adapters.timebase import SYSTEM
from geo_service.leases.lease import LeaseLost, LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.lifecycle import WorkerState
from geo_service.runtime.protection import ScaleInProtection
from geo_service.runtime.status import StatusBoard, WorkerStatus
from geo_service.serving.context import WorkerContext
from geokernel.contracts.control import ControlKey


def _ctx(clients: Clients, res: Resources) -> WorkerContext:
    status = WorkerStatus(state=WorkerState.STARTING, version=1, owner="me")
    return WorkerContext(res.config(1), clients, owner="me", clock=SYSTEM.time, timebase=SYSTEM,
                         transform_factory=object, calibration=Calibration(seconds_per_unit=0.004),
                         protection=ScaleInProtection(None), board=StatusBoard(status))


def test_the_control_view_never_goes_back_to_an_older_one(clients: Clients, resources: Resources) -> None:
    # GIVEN a process that saw v2 active and the swap head 2 -> 3
    ctx = _ctx(clients, resources)
    set_active(clients, resources, 2)
    set_plan(clients, resources, 2, 3)
    seen = ctx.control()
    assert (seen.active, seen.plan and seen.plan.to_version) == (2, 3)
    # WHEN a later read returns older items (an eventually consistent read, or items rewritten backwards)
    set_active(clients, resources, 1)
    set_plan(clients, resources, 1, 2)
    clients.dynamodb.delete_item(TableName=resources.control_table, Key={"pk": {"S": ControlKey.SWAP}})
    # THEN the view keeps the newest active version and swap head it saw
    again = ctx.control()
    assert again.active == 2 and again.plan == seen.plan
    # AND a newer head replaces it
    set_plan(clients, resources, 3, 4)
    newest = ctx.control().plan
    assert newest is not None and newest.to_version == 4


def test_a_lost_lease_is_forgotten_and_a_dropped_one_released(clients: Clients, resources: Resources) -> None:
    # GIVEN two held leases
    ctx = _ctx(clients, resources)
    expired = LeaseManager(clients.dynamodb, resources.leases_table, 1, "me", 0.001)
    held = ctx.manager(1)
    assert expired.claim("w0001") is not None and held.claim("w0002") is not None
    # WHEN one has expired and another owner claimed it since / THEN the check forgets it and raises LeaseLost
    time.sleep(0.01)
    assert LeaseManager(clients.dynamodb, resources.leases_table, 1, "other", 9.0).claim("w0001") is not None
    with pytest.raises(LeaseLost, match=r"'me' expired and is no longer its own"):
        ctx.check_lease(expired)
    assert expired.lease is None
    # WHEN the other is dropped / THEN it is released (no owner) and forgotten
    ctx.check_lease(held)
    ctx.drop(held)
    st = held.read("w0002")
    assert held.lease is None and st is not None and st.owner is None and st.released


def test_an_expired_lease_no_one_claimed_is_renewed_and_kept(clients: Clients, resources: Resources) -> None:
    # GIVEN a lease whose heartbeats stopped past its expiry (a starved heartbeat thread) and no other claimant
    ctx = _ctx(clients, resources)
    starved = LeaseManager(clients.dynamodb, resources.leases_table, 1, "me", 0.05)
    assert starved.claim("w0001") is not None
    time.sleep(0.1)
    assert not starved.valid()
    # WHEN the slot checks it
    before = time.time()
    ctx.check_lease(starved)
    # THEN it is renewed in the table (still this owner, an expiry after the check began) and the slot keeps it
    # (not asserted through valid(): the renewed 0.05 s lease may expire again before a loaded machine gets here)
    st = starved.read("w0001")
    assert starved.lease is not None and st is not None and st.owner == "me" and st.expires_at >= before
