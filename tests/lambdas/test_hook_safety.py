"""Lifecycle hooks around the flip: every path answers a hookStatus, none rolls ECS back once the router may
follow green, and an ECS rollback after the flip is undone by the deployer (moto)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.spec_pointer import spec_key
from geokernel.partition_spec.model import Spec
from lambdas.deploy import deployer, hooks, runtime
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.records import read_active
from tests.lambdas.conftest import CTX, Aws, FakeLambdaContext, load_event, make_spec

SERVICE = ("georebal", "georebal-geo-workers")
T0 = 1_800_000_000.0


class ShortContext(FakeLambdaContext):
    def get_remaining_time_in_millis(self) -> int:
        return 25_000


@pytest.fixture(autouse=True)
def whole_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWAP_MODE", "whole")
    monkeypatch.setenv("GREEN_TIMEOUT_S", "60")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()


def publish(aws: Aws, spec: Spec) -> None:
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                        "published_at": "x"})


def event(name: str = "ecs_hook_post_scale_up.json", **changes: Any) -> dict[str, Any]:
    e = copy.deepcopy(load_event(name))
    for k, v in changes.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def two_versions(aws: Aws, now: list[float]) -> DeployController:
    """v1 live, v2 started (waiting for green) on a controller whose clock the test moves."""
    fleet = EcsFleet(EcsService(aws.clients.ecs, *SERVICE))
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, green_timeout_s=60,
                           swap_mode=runtime.config().swap_mode, clock=lambda: now[0])
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    ctl.step()
    for w in v1.workers:
        aws.put_lease(1, w.id, now=now[0])
    ctl.step()
    publish(aws, make_spec(2, loads=(900, 900, 900, 900), previous=v1))
    ctl.request(2)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    return ctl


@pytest.mark.parametrize("bad", [
    event(lifecycleStage=None),                    # no stage
    event(executionDetails="not an object"),       # wrong shape
    ["not", "an", "object"],                       # not even an object
])
def test_a_malformed_event_gets_a_hook_status_not_an_exception(aws: Aws, bad: Any) -> None:
    # GIVEN nothing in flight WHEN ECS sends a payload the hook cannot parse THEN it answers (SUCCEEDED: nothing held)
    out = hooks.handler(bad, CTX)
    assert out["hookStatus"] == "SUCCEEDED"


def test_a_malformed_event_after_the_flip_never_fails(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN v2 flipped and draining, far past the green timeout
    now = [T0]
    ctl = two_versions(aws, now)
    for w in ctl.spec(2).workers:
        aws.put_lease(2, w.id, now=now[0])
    assert ctl.step().status == DeployStatus.DRAINING
    now[0] += 3600
    monkeypatch.setattr(hooks, "controller", lambda: ctl)
    # WHEN the hook gets a payload without a stage
    out = hooks.handler(event(lifecycleStage=None), CTX)
    # THEN it asks ECS to call again (a FAILED would roll back onto blue, which is draining)
    assert out["hookStatus"] == "IN_PROGRESS" and out["hookDetails"]["version"] == 2


def test_a_malformed_event_before_the_flip_fails_only_after_the_green_timeout(aws: Aws,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    now = [T0]
    ctl = two_versions(aws, now)
    monkeypatch.setattr(hooks, "controller", lambda: ctl)
    assert hooks.handler(event(lifecycleStage=None), CTX)["hookStatus"] == "IN_PROGRESS"
    now[0] += 61
    assert hooks.handler(event(lifecycleStage=None), CTX)["hookStatus"] == "FAILED"
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]


def test_missing_config_is_answered_not_raised(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the hooks function without its CONTROL_TABLE setting
    monkeypatch.delenv("CONTROL_TABLE")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()
    # WHEN ECS calls it THEN it answers IN_PROGRESS (ECS calls again) instead of raising (which rolls back)
    out = hooks.handler(event(), CTX)
    assert out["hookStatus"] == "IN_PROGRESS" and out["callBackDelay"] == hooks.DEFAULT_CALLBACK_DELAY_S


def test_a_flip_whose_save_was_lost_is_never_rolled_back(aws: Aws) -> None:
    # GIVEN v2 waiting for green; a stepper flipped the active pointer, then crashed before saving FLIPPED
    now = [T0]
    ctl = two_versions(aws, now)
    v2 = ctl.spec(2)
    for w in v2.workers:
        aws.put_lease(2, w.id, now=now[0])
    assert ctl.flip(2)
    # AND one green worker then died (its lease expired) and the green timeout passed
    aws.put_lease(2, v2.workers[0].id, now=now[0], expires_in=-1)
    now[0] += 120
    # WHEN ECS calls the POST_SCALE_UP hook
    out = hooks.run_hook(ctl, hooks.HookEvent.parse(event()), 15)
    # THEN it succeeds (the router already follows v2) and the controller moved on instead of rolling back
    assert out["hookStatus"] == "SUCCEEDED"
    assert ctl.state().status in (DeployStatus.FLIPPED, DeployStatus.DRAINING)
    assert read_active(aws.control).version == 2  # type: ignore[union-attr]
    assert "georebal-geo-v2" in aws.stream_names()


def spec_version_running(aws: Aws) -> int | None:
    return EcsService(aws.clients.ecs, *SERVICE).running_spec_version()


def test_an_ecs_rollback_after_the_flip_is_redeployed_by_the_schedule(aws: Aws) -> None:
    # GIVEN whole mode, v1 then v2 deployed to done through the deployer and hooks
    v2, v1_revision = whole_v2_done(aws)
    assert spec_version_running(aws) == 2 and aws.stream_names() == ["georebal-geo-v2"]
    # WHEN ECS rolls the service back to v1's revision after the flip (circuit breaker, hook timeout)
    aws.clients.ecs.update_service(cluster=SERVICE[0], service=SERVICE[1], taskDefinition=v1_revision)
    assert spec_version_running(aws) == 1
    # THEN the next scheduled step deploys the live version again with its slot count; the router never moved
    deployer.handler({"action": "step"}, ShortContext())
    svc = aws.clients.ecs.describe_services(cluster=SERVICE[0], services=[SERVICE[1]])["services"][0]
    assert spec_version_running(aws) == 2 and svc["desiredCount"] == len(v2.workers)
    assert read_active(aws.control).version == 2  # type: ignore[union-attr]
    # AND once it runs the live version, a step changes nothing
    revision = svc["taskDefinition"]
    deployer.handler({"action": "step"}, ShortContext())
    assert EcsService(aws.clients.ecs, *SERVICE).current_task_definition() == revision


def whole_v1_then_v2_started(aws: Aws) -> tuple[Spec, Spec, str]:
    """Whole mode through the deployer: v1 live; v2 published and its ECS deployment started (waiting for green)."""
    v1 = make_spec(1)
    publish(aws, v1)
    deployer.handler({"version": 1}, ShortContext())
    for w in v1.workers:
        aws.put_lease(1, w.id)
    deployer.handler({"action": "step"}, ShortContext())
    v1_revision = EcsService(aws.clients.ecs, *SERVICE).current_task_definition()
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    assert deployer.handler({"version": 2}, ShortContext())["status"] == DeployStatus.WAITING_GREEN
    assert spec_version_running(aws) == 2
    return v1, v2, v1_revision


def whole_v2_done(aws: Aws) -> tuple[Spec, str]:
    """Whole mode through the deployer: v1, then v2 leased, v1 drained and the swap done; v2 and v1's revision."""
    v1, v2, v1_revision = whole_v1_then_v2_started(aws)
    for w in v2.workers:
        aws.put_lease(2, w.id)
    for w in v1.workers:
        aws.put_lease(1, w.id, drained=True, owner=None)
    assert deployer.handler({"action": "step"}, ShortContext())["status"] == "done"
    return v2, v1_revision


def test_an_ecs_rollback_before_the_flip_ends_the_swap_at_once(aws: Aws) -> None:
    # GIVEN v2's ECS deployment in flight, not flipped
    _, _, v1_revision = whole_v1_then_v2_started(aws)
    # WHEN ECS rolls it back (a POST_SCALE_UP hook invocation failed) and sends its deployment event
    aws.clients.ecs.update_service(cluster=SERVICE[0], service=SERVICE[1], taskDefinition=v1_revision)
    out = deployer.handler(load_event("ecs_deployment_state_change.json"), ShortContext())
    # THEN v2 is rolled back at once (not after GREEN_TIMEOUT_S), its stream deleted, and v1 keeps serving
    assert out["status"] == DeployStatus.ROLLED_BACK and "ECS rolled the deployment of v2 back" in out["reason"]
    assert read_active(aws.control).version == 1 and spec_version_running(aws) == 1  # type: ignore[union-attr]
    assert aws.stream_names() == ["georebal-geo-v1"]


def test_an_ecs_rollback_after_the_flip_is_redeployed_while_blue_still_drains(aws: Aws) -> None:
    # GIVEN v2 flipped, v1 still draining (in flight)
    _, v2, v1_revision = whole_v1_then_v2_started(aws)
    for w in v2.workers:
        aws.put_lease(2, w.id)
    assert deployer.handler({"action": "step"}, ShortContext())["status"] == DeployStatus.DRAINING
    # WHEN ECS rolls the service back to v1's revision (the POST_PRODUCTION_TRAFFIC_SHIFT hook timed out)
    aws.clients.ecs.update_service(cluster=SERVICE[0], service=SERVICE[1], taskDefinition=v1_revision)
    out = deployer.handler(load_event("ecs_deployment_state_change.json"), ShortContext())
    # THEN the deployer deploys v2 again at once, without waiting for the drain; the router stays on v2
    svc = aws.clients.ecs.describe_services(cluster=SERVICE[0], services=[SERVICE[1]])["services"][0]
    assert spec_version_running(aws) == 2 and svc["desiredCount"] == len(v2.workers)
    assert out["status"] == DeployStatus.DRAINING and read_active(aws.control).version == 2  # type: ignore[union-attr]
    # AND v1's stream is still there for its remaining records
    assert "georebal-geo-v1" in aws.stream_names()


def test_a_redeploy_of_the_live_version_after_a_rollback_is_not_failed_by_its_hook(aws: Aws) -> None:
    # GIVEN v2's deployment rolled back by ECS before its flip (the controller says v2 rolled_back; v1 serves)
    _, _, v1_revision = whole_v1_then_v2_started(aws)
    aws.clients.ecs.update_service(cluster=SERVICE[0], service=SERVICE[1], taskDefinition=v1_revision)
    assert deployer.handler(load_event("ecs_deployment_state_change.json"), ShortContext())["status"] == "rolled_back"
    ctl = runtime.controller()
    # WHEN ECS runs the hooks of a deployment of v1's revision (the deployer deploying the live version again)
    out = hooks.run_hook(ctl, hooks.HookEvent.parse(event()), 15)
    # THEN the hook lets it through: failing it would make ECS roll the live version back, in a loop
    assert out["hookStatus"] == "SUCCEEDED" and out["hookDetails"]["version"] == 1
    # AND the first hook call of v2's own deployment (the service set to v2's revision) still fails
    EcsService(aws.clients.ecs, *SERVICE).deploy(EcsService(aws.clients.ecs, *SERVICE).register_revision(2), 4)
    assert hooks.run_hook(ctl, hooks.HookEvent.parse(event()), 15)["hookStatus"] == "FAILED"


def test_no_swap_starts_while_ecs_has_rolled_the_live_version_back(aws: Aws) -> None:
    # GIVEN v2 live and done, then ECS rolls the service back to v1's revision (a hook timed out after the flip)
    v2, v1_revision = whole_v2_done(aws)
    aws.clients.ecs.update_service(cluster=SERVICE[0], service=SERVICE[1], taskDefinition=v1_revision)
    # WHEN v3 is published in the same moment and the deployer runs for it
    publish(aws, make_spec(3, loads=(800, 800, 800, 800), previous=v2))
    out = deployer.handler({"version": 3}, ShortContext())
    # THEN the live v2 is deployed again first; v3 waits (queued), so no swap drains a version no worker reads
    assert spec_version_running(aws) == 2 and read_active(aws.control).version == 2  # type: ignore[union-attr]
    assert out["version"] == 2 and out["queued_version"] == 3, out


class RecordingEcs:
    """The moto ECS client, recording the name of every call made through it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self._client, name)


def test_a_hooks_step_never_starts_the_fleet_the_deployers_step_does(aws: Aws) -> None:
    # GIVEN v1 deploying with its geo stream ACTIVE (the deployer saved 'deploying' and created the stream), seen
    # through ECS and S3 clients that record what is called
    ecs = RecordingEcs(aws.clients.ecs)
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, EcsFleet(EcsService(ecs, *SERVICE)),
                           swap_mode=runtime.config().swap_mode)
    publish(aws, make_spec(1))
    ctl.request(1)
    st = ctl.state()
    assert ctl._save(st, dataclasses.replace(st, version=1, status=DeployStatus.DEPLOYING, queued_version=None,
                                             started_at=ctl.clock(), stage_since=ctl.clock()))
    ctl.start(1)
    # WHEN a lifecycle hook steps it (allow_start=False)
    st = ctl.step(allow_start=False)
    # THEN nothing starts: still deploying, no ECS call that changes the service, no stream manifest
    assert st.status == DeployStatus.DEPLOYING
    assert not {"register_task_definition", "update_service"} & set(ecs.calls)
    assert aws.keys(aws.cfg.specs_bucket, "streams/") == []
    # AND the deployer's next step starts the fleet
    assert ctl.step(allow_start=True).status == DeployStatus.WAITING_GREEN
    assert aws.keys(aws.cfg.specs_bucket, "streams/") == ["streams/v00000001.json"]
