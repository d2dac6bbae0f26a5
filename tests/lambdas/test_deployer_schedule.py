"""The deployer's one-minute schedule advances a stalled deployment (a deployer that died mid-swap; moto)."""

from __future__ import annotations

import pytest

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.spec_pointer import spec_key
from lambdas.deploy import deployer, runtime
from lambdas.deploy.controller import FLEET_START_GRACE_S, DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.deploy.plan import DeployPlan
from lambdas.runtime.config import SwapMode
from lambdas.runtime.ecs import EcsService
from tests.lambdas.conftest import Aws, FakeLambdaContext, load_event, make_spec

T0 = 1_800_000_000.0


class ShortContext(FakeLambdaContext):
    def get_remaining_time_in_millis(self) -> int:
        return 25_000


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWAP_MODE", "whole")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()


def test_a_deploy_whose_deployer_crashed_after_saving_deploying_is_resumed_by_the_schedule(aws: Aws) -> None:
    # GIVEN v1 published and the deploy item saved as deploying, but the deployer died before creating the stream
    spec = make_spec(1)
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": 1, "spec_key": spec_key(1), "published_at": "x"})
    ctl = runtime.controller()
    ctl.request(1)
    st = ctl.state()
    assert ctl._save(st, st.__class__(**{**st.__dict__, "status": DeployStatus.DEPLOYING, "version": 1, "queued_version": None,
                                          "started_at": ctl.clock(), "stage_since": ctl.clock()}))
    assert aws.stream_names() == []
    # WHEN the schedule's events arrive: the rule's constant input, and the default scheduled-event shape
    assert deployer.requested_versions(load_event("eventbridge_scheduled_event.json")) == []
    out = deployer.handler({"action": "step"}, ShortContext())
    # THEN the stream is created, the fleet started and the deployment waits for green
    assert out["status"] == DeployStatus.WAITING_GREEN and aws.stream_names() == ["georebal-geo-v1"]


class CrashOnce(EcsFleet):
    """The deployer's process dies inside its first fleet start (after the waiting_green save)."""

    crashed = False

    def start(self, plan: DeployPlan) -> None:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("Lambda timed out")
        super().start(plan)


def test_a_deployer_that_died_before_starting_the_fleet_is_resumed_once(aws: Aws) -> None:
    # GIVEN carry mode, v1 published, a controller on a clock the test moves, whose first fleet start dies
    now = [T0]
    fleet = CrashOnce(EcsService(aws.clients.ecs, "georebal", "georebal-geo-workers"))
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, swap_mode=SwapMode.CARRY,
                           clock=lambda: now[0])
    spec = make_spec(1)
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": 1, "spec_key": spec_key(1), "published_at": "x"})
    ctl.request(1)
    with pytest.raises(RuntimeError, match="timed out"):
        ctl.step()
    assert ctl.state().status == DeployStatus.WAITING_GREEN and not ctl.fleet_started(1, None)
    assert desired_count(aws) == 0
    # WHEN the schedule steps it within the grace period THEN nothing is started twice
    now[0] += 5
    ctl.step()
    assert desired_count(aws) == 0
    # WHEN it steps after the grace period THEN the fleet of the stored plan starts, once
    now[0] += FLEET_START_GRACE_S
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    assert desired_count(aws) == len(spec.workers) and ctl.fleet_started(1, None)
    # AND once its workers are ready the swap completes (no green timeout, no rollback)
    for w in spec.workers:
        aws.put_lease(1, w.id, now=now[0])
    assert ctl.step().status == DeployStatus.DONE


def desired_count(aws: Aws) -> int:
    svc = aws.clients.ecs.describe_services(cluster="georebal", services=["georebal-geo-workers"])["services"][0]
    return int(svc["desiredCount"])
