"""The invariant checks of the observer: two owners of one lease, a flip before green was ready."""

from __future__ import annotations

import time
import uuid

import pytest

from geokernel.contracts.control import ControlKey
from geokernel.contracts.handoff import handoff_key
from geokernel.contracts.plan import PlanItem, PlanStatus, SwapMode
from local.aws import EmbeddedAws, Names, SerialMotoServer
from local.observe import ControlObserver


@pytest.fixture()
def observer() -> ControlObserver:
    # No request is made: the observer's clients are only created, and the checks get items directly.
    obs = ControlObserver(EmbeddedAws("http://127.0.0.1:9", Names("georebal-test"), server=None))
    obs.spec_slots[2] = 2
    return obs


def _lease(worker: str, owner: str | None, expires_in: float, ready: bool = True, **extra: object) -> dict[str, object]:
    return {"lease_key": f"v2#{worker}", "owner": owner, "expires_at": time.time() + expires_in, "ready": ready,
            **extra}


def test_takeover_of_a_live_lease_is_two_owners(observer: ControlObserver) -> None:
    # GIVEN owner A holds v2#w0001 for another 20 s
    observer._observe_leases([_lease("w0001", "A", 20)], time.time())
    # WHEN the next poll shows owner B on it, A neither expired nor released
    observer._observe_leases([_lease("w0001", "B", 30)], time.time())
    # THEN the observer reports two owners of that lease
    assert any(v.startswith("two owners of lease 'v2#w0001'") for v in observer.violations)


def test_takeover_after_expiry_or_release_is_fine(observer: ControlObserver) -> None:
    # GIVEN A's lease on w0001 already expired and C released w0002
    now = time.time()
    observer._observe_leases([_lease("w0001", "A", -1), _lease("w0002", "C", 20, released=True)], now)
    # WHEN B and D take them over
    observer._observe_leases([_lease("w0001", "B", 30), _lease("w0002", "D", 30)], time.time())
    # THEN no violation, and both owner changes are recorded
    assert observer.violations == [] and len(observer.owner_changes) == 2


def test_flip_before_green_ready_is_reported(observer: ControlObserver) -> None:
    # GIVEN only one of the two v2 workers is ready
    observer._observe_leases([_lease("w0001", "A", 20), _lease("w0002", "B", 20, ready=False)], time.time())
    # WHEN the active pointer moves to v2
    observer._observe_control({"active": {"pk": "active", "version": 2, "flipped_at": "2026-11-21T10:00:00Z"}},
                              time.time())
    # THEN the flip is reported as happening before green was ready
    assert any(v.startswith("flip to v2") for v in observer.violations)


def test_flip_after_green_ready_is_fine(observer: ControlObserver) -> None:
    # GIVEN both v2 workers hold live, ready leases
    observer._observe_leases([_lease("w0001", "A", 20), _lease("w0002", "B", 20)], time.time())
    # WHEN the active pointer moves to v2
    observer._observe_control({"active": {"pk": "active", "version": 2}}, time.time())
    # THEN the flip is recorded with no violation
    assert observer.violations == [] and [f[1] for f in observer.flips] == [2]
    assert observer.timeline(2).green_ready_at is not None


def test_lease_tenures_keep_each_owners_own_times(observer: ControlObserver) -> None:
    # GIVEN owner A claimed v2#w0001 at 10, was ready at 11, then released at 20
    now = time.time()
    observer._observe_leases([_lease("w0001", "h:1:a", 20, claimed_at=10.0, ready_at=11.0)], now)
    observer._observe_leases([_lease("w0001", None, -1, ready=False, claimed_at=10.0, ready_at=11.0,
                                     released_at=20.0)], now)
    # WHEN B claims it at 25 (the item still holds A's ready_at until B is ready) and is ready at 27
    observer._observe_leases([_lease("w0001", "h:2:b", 20, ready=False, claimed_at=25.0, ready_at=11.0)], now)
    observer._observe_leases([_lease("w0001", "h:2:b", 20, claimed_at=25.0, ready_at=27.0, serving_at=28.0)], now)
    # THEN there are two tenures, each with its own owner's times and process id
    a, b = observer.tenures["v2#w0001"]
    assert (a.owner, a.pid, a.claimed_at, a.ready_at, a.released_at) == ("h:1:a", 1, 10.0, 11.0, 20.0)
    assert (b.owner, b.pid, b.claimed_at, b.ready_at, b.serving_at) == ("h:2:b", 2, 25.0, 27.0, 28.0)


def test_plans_are_kept_by_target_version(observer: ControlObserver) -> None:
    # GIVEN the plan item moving from a v2 plan to a v3 plan (as the controller writes it: PlanItem.to_item)
    for to in (2, 3):
        item = PlanItem(to - 1, to, SwapMode.CARRY, ("w0001",), (), (), 1, {"w0001": 1}, PlanStatus.STARTED, 5.0)
        # WHEN observed
        observer._observe_control({"plan": {"pk": "plan", **item.to_item()}}, time.time())
    # THEN both are kept by their target version, decoded
    assert sorted(observer.plans) == [2, 3] and observer.plans[3].kept == ("w0001",)
    assert observer.violations == []


def test_an_unreadable_plan_is_a_violation_naming_it(observer: ControlObserver) -> None:
    # GIVEN a plan item whose status is not one of PlanStatus WHEN observed
    observer._observe_control({"plan": {"pk": "plan", "to_version": 2, "from_version": 1, "mode": "carry",
                                        "kept": [], "started": [], "stopped": [], "status": "bogus"}}, 10.0)
    # THEN no plan is kept and the violation names the bad value
    assert observer.plans == {}
    assert len(observer.violations) == 1 and "'bogus'" in observer.violations[0]


def test_the_active_version_without_a_running_worker_is_an_unserved_span() -> None:
    # GIVEN v2 active, its two slots held by processes 11 and 12
    alive = {11, 12}
    obs = ControlObserver(EmbeddedAws("http://127.0.0.1:9", Names("georebal-test"), server=None),
                          alive_pids=lambda: set(alive))
    obs.active_version = 2
    t0 = time.time()
    held = [_lease("w0001", "h:11:a", 20), _lease("w0002", "h:12:b", 20)]
    obs._observe_served(held, t0)
    assert obs.unserved == [] and obs.longest_unserved() == (0.0, None)
    # WHEN both processes stop (their leases not yet expired) and, 4 s later, a new process holds a slot
    alive.clear()
    obs._observe_served(held, t0 + 1)
    alive.add(13)
    obs._observe_served([_lease("w0001", "h:13:c", 20), _lease("w0002", "h:12:b", 20)], t0 + 5)
    # THEN one span of 4 s without a running worker of v2 is recorded
    assert obs.unserved == [(t0 + 1, t0 + 5, 2)]
    gap, version = obs.longest_unserved()
    assert gap == pytest.approx(4.0) and version == 2
    # AND a drained or expired lease does not count as served
    obs._observe_served([_lease("w0001", "h:13:c", 20, drained=True), _lease("w0002", "h:13:c", -1)], t0 + 6)
    assert obs.longest_unserved()[1] == 2 and obs._unserved_since == (t0 + 6, 2)
    # AND a span still open counts up to the last observation, not to whenever the report is written
    obs.last_step_at = t0 + 16
    assert obs.longest_unserved() == (pytest.approx(10.0), 2)


def test_a_step_reads_the_control_items_by_key_and_not_the_handed_over_states() -> None:
    # GIVEN the embedded server's control table with the active pointer, a deployment and 300 handed-over states
    server = SerialMotoServer().start()
    aws = EmbeddedAws(endpoint_url=server.url, names=Names(f"georebal-obs-{uuid.uuid4().hex[:8]}"), server=server)
    try:
        aws.create_resources(ingest_shards=1)
        table = aws.resource("dynamodb").Table(aws.names.control_table)
        table.put_item(Item={"pk": ControlKey.ACTIVE.value, "version": 1})
        table.put_item(Item={"pk": ControlKey.DEPLOY.value, "status": "done", "version": 1})
        with table.batch_writer() as batch:
            for i in range(300):
                batch.put_item(Item={"pk": handoff_key(f"e{i}", 1), "entity": f"e{i}", "state": "{}"})
        calls: list[str] = []
        obs = ControlObserver(aws)
        obs.control.meta.client.meta.events.register(
            "before-call.dynamodb", lambda model, **_: calls.append(model.name))
        # WHEN the observer steps
        obs.step()
        # THEN it saw the control items, none of the states, with one BatchGetItem and no Scan of the control table
        assert sorted(obs.records) == [ControlKey.ACTIVE.value, ControlKey.DEPLOY.value]
        assert obs.active_version == 1
        assert calls.count("BatchGetItem") == 1 and calls.count("Scan") == 1  # the one Scan: the leases table
    finally:
        server.stop()
