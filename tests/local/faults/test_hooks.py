"""local.faults.hooks: ``hook-fail`` before the flip and ``hook-timeout`` after it, and how each recovers."""

from __future__ import annotations

from dataclasses import dataclass

from local.faults.hooks import HookFault, Reconcile, SwapForHooks


@dataclass
class Deploy:
    version: int | None
    status: str
    old_version: int | None


class HookWorld:
    """The controller's state, the active version, the deployer's reconciles and what is served, on a test clock."""

    def __init__(self) -> None:
        self.now = 500.0
        self.deploy = Deploy(2, "waiting_green", 1)
        self.active: int | None = 1
        self.reconciled: list[Reconcile] = []
        self.served: set[int] = {1}
        self.served_at: dict[int, float] = {}  # since when a served version's slots are held (default: now)

    def fault(self, name: str) -> HookFault:
        return HookFault(name, lambda: self.deploy, lambda: self.active, lambda: self.reconciled,
                         lambda v: self.served_at.get(v, self.now) if v in self.served else None, lease_s=9.0,
                         clock=lambda: self.now)


def test_hook_fail_fails_the_first_pre_flip_green_hold_and_recovers_when_the_deployer_rolled_back() -> None:
    # GIVEN v2 in flight before its flip, blue v1
    w = HookWorld()
    fault = w.fault("hook-fail")
    # WHEN ECS calls the hooks: the drain stage is not this fault's, the green stage fails once
    assert fault.intercept(2, "POST_PRODUCTION_TRAFFIC_SHIFT") is None
    assert "hookStatus" in str(fault.intercept(2, "POST_SCALE_UP"))
    assert fault.intercept(2, "POST_SCALE_UP") is None and fault.record.injected_at == 500.0
    # THEN nothing is detected until the deployer reconciled (a redeploy is not this fault's recovery)
    w.now += 1
    w.reconciled.append(Reconcile(w.now, "redeployed", 2))
    fault.poll()
    assert fault.record.detected_at is None
    w.now += 1
    w.reconciled.append(Reconcile(w.now, "rolled_back", 2))
    w.deploy = Deploy(2, "rolled_back", 1)
    fault.poll()
    # AND it recovered: v2 rolled back, v1 still active and served, within two lease durations
    assert fault.record.detected_at == 502.0 and fault.record.recovered_at == 502.0 and fault.record.within_deadline
    assert "blue v1 kept serving" in fault.record.did
    assert not fault.record.outage  # blue kept serving: no outage to excuse


def test_hook_fail_does_not_fire_on_a_first_deployment_or_after_the_flip() -> None:
    w = HookWorld()
    w.deploy, w.active = Deploy(1, "waiting_green", None), None  # the first deployment: no blue to fall back on
    fault = w.fault("hook-fail")
    assert fault.intercept(1, "POST_SCALE_UP") is None
    w.deploy, w.active = Deploy(2, "flipped", 1), 2
    assert fault.intercept(2, "POST_SCALE_UP") is None and fault.record.injected_at is None


def test_hook_timeout_fails_after_the_flip_and_recovers_only_when_the_live_version_is_served_again() -> None:
    # GIVEN v2 flipped and draining blue v1
    w = HookWorld()
    w.deploy, w.active, w.served = Deploy(2, "draining", 1), 2, {2}
    fault = w.fault("hook-timeout")
    assert fault.intercept(2, "POST_PRODUCTION_TRAFFIC_SHIFT") is not None
    # (an outage of the live version the fault makes itself: held to its deadline, not to one lease)
    assert fault.record.outage
    # WHEN ECS stopped v2's tasks and the deployer redeployed v2, but no v2 worker runs yet
    w.served = set()
    w.now += 0.5
    w.reconciled.append(Reconcile(w.now, "redeployed", 2))
    fault.poll()
    assert fault.record.detected_at == 500.5 and fault.record.recovered_at is None
    # THEN it recovers once every v2 slot is served again
    w.now += 4
    w.served = {2}
    fault.poll()
    assert fault.record.recovered_at == 504.5 and fault.record.within_deadline
    assert "deployed v2 again 0.5s later" in fault.record.did


def test_hook_timeout_recovery_is_dated_by_the_workers_claims_not_the_late_poll() -> None:
    # GIVEN hook-timeout injected at 500 and the deployer's redeploy at 501
    w = HookWorld()
    w.deploy, w.active, w.served = Deploy(2, "draining", 1), 2, {2}
    fault = w.fault("hook-timeout")
    fault.intercept(2, "POST_PRODUCTION_TRAFFIC_SHIFT")
    w.served = set()
    w.now = 501.0
    w.reconciled.append(Reconcile(w.now, "redeployed", 2))
    fault.poll()
    # WHEN the last v2 slot was claimed at 507 but the loop polls only at 515
    w.now, w.served, w.served_at = 515.0, {2}, {2: 507.0}
    fault.poll()
    # THEN the fault recovered at 507, 7 s after the failure
    assert fault.record.recovered_at == 507.0 and "7.0s after the failure" in fault.record.did


def test_a_hook_fault_left_without_a_swap_gets_one_publish_per_idle_deployer_and_the_tail_waits_for_it() -> None:
    # GIVEN hook-fail armed and never injected (the replay's swaps went to other faults), and a deployer in flight
    w = HookWorld()
    fault, said = w.fault("hook-fail"), []
    published, idle = [], {"now": False}

    def publish() -> int:
        published.append(len(published) + 7)
        return published[-1]

    swap = SwapForHooks([fault], publish, lambda: idle["now"], said.append, wait_s=60.0, max_swaps=2,
                        clock=lambda: w.now)
    # WHEN the tail asks while a deployment is in flight THEN nothing is published and the tail need not wait
    assert swap.waiting() is False and not published
    # WHEN the deployer is idle THEN the live spec goes out again once, and the tail waits for its swap
    idle["now"] = True
    assert swap.waiting() is True and published == [7]
    assert "no swap left for hook-fail" in said[0] and "v7" in said[0]
    idle["now"] = False  # that deployment in flight
    w.now += 30
    assert swap.waiting() is True and published == [7]
    # WHEN that swap passed without the fault (the deployer idle again) THEN one more, and then no more
    idle["now"] = True
    assert swap.waiting() is True and published == [7, 8]
    w.now += 61
    assert swap.waiting() is False and published == [7, 8]  # two swaps at most, the last one's wait is over
    # WHEN the fault was injected THEN the tail no longer waits for a swap (the fault's own deadline holds it)
    fault.record.injected_at = w.now
    assert swap.waiting() is False
