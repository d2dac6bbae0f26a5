"""Deployer and ECS lifecycle-hook Lambdas with recorded events (moto)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.spec_pointer import spec_key
from geokernel.partition_spec.model import Spec
from lambdas.deploy import deployer, hooks, runtime
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.records import read_active
from tests.lambdas.conftest import CTX, Aws, FakeLambdaContext, load_event, make_spec


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ECS lifecycle hooks take part in whole-fleet swaps (ECS's blue/green deployment): whole mode unless a
    # test says otherwise.
    monkeypatch.setenv("SWAP_MODE", "whole")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()


@dataclass(frozen=True)
class ShortContext(FakeLambdaContext):
    """A Lambda context with ``remaining_ms`` left in the invocation."""

    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def publish(aws: Aws, spec: Spec) -> None:
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                        "published_at": "x"})


def spec_event(version: int) -> dict[str, Any]:
    event = copy.deepcopy(load_event("s3_spec_created.json"))
    event["Records"][0]["s3"]["object"]["key"] = spec_key(version)
    return event


def hook_event(name: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    event = copy.deepcopy(load_event(name))
    if details is not None:
        event["hookDetails"] = details
    return event


def ready(aws: Aws, spec: Spec, **kw: Any) -> None:
    for w in spec.workers:
        aws.put_lease(spec.version, w.id, **kw)


def test_deployer_starts_the_version_from_the_recorded_s3_event(aws: Aws) -> None:
    # GIVEN spec v1 published (object + desired pointer)
    v1 = make_spec(1)
    publish(aws, v1)
    # WHEN the recorded S3 ObjectCreated event for specs/v00000001.json reaches the deployer
    out = deployer.handler(load_event("s3_spec_created.json"), CTX)
    # THEN the geo stream exists and the ECS service runs one task per worker with SPEC_VERSION=1
    assert (out["version"], out["status"]) == (1, DeployStatus.WAITING_GREEN)
    assert aws.stream_names() == ["georebal-geo-v1"]
    svc = aws.clients.ecs.describe_services(cluster="georebal", services=["georebal-geo-workers"])["services"][0]
    assert svc["desiredCount"] == len(v1.workers)
    td = aws.clients.ecs.describe_task_definition(taskDefinition=svc["taskDefinition"])["taskDefinition"]
    assert {"name": "SPEC_VERSION", "value": "1"} in td["containerDefinitions"][0]["environment"]


def test_deployer_ignores_a_spec_object_that_was_never_made_desired(aws: Aws,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a spec object v1 whose desired pointer never moved (publish lost a race or crashed)
    aws.specs.put_new(make_spec(1))
    monkeypatch.setattr(deployer, "DESIRED_WAIT_S", 0.2)
    # WHEN its S3 event arrives
    out = deployer.handler(spec_event(1), CTX)
    # THEN nothing is deployed
    assert out["status"] == "idle" and aws.stream_names() == []


def test_deployer_direct_invoke_and_bad_version(aws: Aws) -> None:
    # GIVEN spec v1 published
    publish(aws, make_spec(1))
    # WHEN invoked directly with {"version": 1} / THEN it deploys
    assert deployer.handler({"version": 1}, CTX)["status"] == DeployStatus.WAITING_GREEN
    # WHEN invoked with a bad version / THEN the error names the value
    with pytest.raises(deployer.DeployEventError, match="'one'"):
        deployer.handler({"version": "one"}, CTX)


def test_hooks_hold_green_flip_then_hold_drain(aws: Aws) -> None:
    # GIVEN v1 active, v2 published and started by the deployer
    v1 = make_spec(1)
    publish(aws, v1)
    deployer.handler({"version": 1}, CTX)
    ready(aws, v1)
    assert deployer.handler({"action": "step"}, CTX)["status"] == DeployStatus.DONE
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    deployer.handler(spec_event(2), CTX)
    # WHEN ECS calls the POST_SCALE_UP hook before green is ready
    first = hooks.handler(hook_event("ecs_hook_post_scale_up.json"), CTX)
    # THEN it holds the shift and tracks v2
    assert first == {"hookStatus": "IN_PROGRESS", "callBackDelay": 15, "hookDetails": {"version": 2}}
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]
    # WHEN green leases every partition and ECS calls again with the returned hookDetails
    ready(aws, v2)
    second = hooks.handler(hook_event("ecs_hook_post_scale_up.json", first["hookDetails"]), CTX)
    # THEN the active pointer flips to v2 and the hook succeeds
    assert second["hookStatus"] == "SUCCEEDED"
    assert read_active(aws.control).version == 2  # type: ignore[union-attr]
    # WHEN the drain hook runs while blue still has records
    drain = hooks.handler(hook_event("ecs_hook_post_production_traffic_shift.json"), CTX)
    # THEN it holds
    assert drain["hookStatus"] == "IN_PROGRESS" and runtime.controller().state().status == DeployStatus.DRAINING
    # WHEN blue has drained
    ready(aws, v1, drained=True, owner=None)
    done = hooks.handler(hook_event("ecs_hook_post_production_traffic_shift.json", drain["hookDetails"]), CTX)
    # THEN the hook succeeds and blue's stream is gone
    assert done["hookStatus"] == "SUCCEEDED" and aws.stream_names() == ["georebal-geo-v2"]


def test_hook_fails_on_green_timeout_so_ecs_rolls_back(aws: Aws) -> None:
    # GIVEN v1 active, v2 deploying, a controller on a controllable clock with a 60 s green timeout
    now = [1_800_000_000.0]
    fleet = EcsFleet(EcsService(aws.clients.ecs, "georebal", "georebal-geo-workers"))
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, green_timeout_s=60,
                           clock=lambda: now[0])
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    ctl.step()
    ready(aws, v1, now=now[0])
    ctl.step()
    publish(aws, make_spec(2, loads=(900, 900, 900, 900), previous=v1))
    ctl.request(2)
    ctl.step()
    event = hooks.HookEvent.parse(hook_event("ecs_hook_post_scale_up.json"))
    first = hooks.run_hook(ctl, event, 15)
    assert first["hookStatus"] == "IN_PROGRESS"
    # WHEN the timeout passes and ECS calls again
    now[0] += 61
    again = hooks.run_hook(ctl, hooks.HookEvent.parse(hook_event("ecs_hook_post_scale_up.json",
                                                                 first["hookDetails"])), 15)
    # THEN the hook returns FAILED (ECS rolls back), the controller rolled back, v1 stays active
    assert again["hookStatus"] == "FAILED"
    assert ctl.state().status == DeployStatus.ROLLED_BACK
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]


def test_hook_passes_stages_it_does_not_hold_and_rejects_malformed_events(aws: Aws) -> None:
    # GIVEN a PRE_SCALE_UP invocation / WHEN handled / THEN nothing is held
    event = hook_event("ecs_hook_post_scale_up.json")
    event["lifecycleStage"] = "PRE_SCALE_UP"
    assert hooks.handler(event, CTX)["hookStatus"] == "SUCCEEDED"
    # GIVEN a payload without a stage / WHEN parsed / THEN the error names the field
    with pytest.raises(hooks.HookEventError, match="lifecycleStage"):
        hooks.HookEvent.parse({"executionDetails": {}})
    # AND the handler answers it (ECS rolls back on an exception), nothing being in flight: SUCCEEDED
    assert hooks.handler({"executionDetails": {}}, CTX)["hookStatus"] == "SUCCEEDED"


@pytest.mark.parametrize(("hold", "status", "tracked", "expected"), [
    ("green", DeployStatus.WAITING_GREEN, 2, "IN_PROGRESS"),
    ("green", DeployStatus.DRAINING, 2, "SUCCEEDED"),
    ("green", DeployStatus.ROLLED_BACK, 2, "FAILED"),
    ("green", DeployStatus.ROLLED_BACK, None, "SUCCEEDED"),
    ("drain", DeployStatus.DRAINING, 2, "IN_PROGRESS"),
    ("drain", DeployStatus.DONE, 2, "SUCCEEDED"),
    (None, DeployStatus.WAITING_GREEN, 2, "SUCCEEDED"),
])
def test_decide_maps_controller_state_to_hook_status(hold: str | None, status: str, tracked: int | None,
                                                     expected: str) -> None:
    # GIVEN a controller state for v2 / WHEN mapped / THEN the hookStatus follows the hold's rule
    from geokernel.contracts.control import DeployState

    assert hooks.decide(hold, DeployState(version=2, status=status), tracked) == expected


def test_hook_retries_step_errors_until_the_green_timeout(aws: Aws) -> None:
    # GIVEN v2 waiting for green whose spec object then becomes unreadable (every step raises)
    now = [1_800_000_000.0]

    def make_ctl() -> DeployController:
        fleet = EcsFleet(EcsService(aws.clients.ecs, "georebal", "georebal-geo-workers"))
        return DeployController(aws.control, aws.leases, type(aws.specs)(aws.clients.s3, aws.cfg.specs_bucket),
                                aws.streams, fleet, green_timeout_s=60, clock=lambda: now[0])

    publish(aws, make_spec(2))
    ctl = make_ctl()
    ctl.request(2)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    aws.clients.s3.delete_object(Bucket=aws.cfg.specs_bucket, Key=spec_key(2))
    ctl = make_ctl()
    event = hooks.HookEvent.parse(hook_event("ecs_hook_post_scale_up.json"))
    # WHEN the hook runs before the timeout / THEN it asks ECS to call again instead of failing
    assert hooks.run_hook(ctl, event, 15)["hookStatus"] == "IN_PROGRESS"
    # WHEN it runs after the green timeout / THEN it fails so ECS rolls back, and v2 is marked rolled back
    now[0] += 61
    assert hooks.run_hook(ctl, event, 15)["hookStatus"] == "FAILED"
    st = ctl.state()
    assert (st.status, st.failed_version) == (DeployStatus.ROLLED_BACK, 2) and "specs/v00000002.json" in st.reason
    assert "georebal-geo-v2" not in aws.stream_names()


def test_deployer_in_carry_mode_sets_only_the_desired_count(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN carry mode and spec v1 published
    monkeypatch.setenv("SWAP_MODE", "carry")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()
    v1 = make_spec(1)
    publish(aws, v1)
    base = aws.clients.ecs.describe_services(cluster="georebal", services=["georebal-geo-workers"])["services"][0]
    # WHEN the deployer handles its S3 event with too little time left to step the swap further
    out = deployer.handler(spec_event(1), ShortContext(remaining_ms=5_000))
    # THEN the stream exists, the plan is stored, and the service only got its desired count: same task definition
    svc = aws.clients.ecs.describe_services(cluster="georebal", services=["georebal-geo-workers"])["services"][0]
    assert (out["version"], out["status"]) == (1, DeployStatus.WAITING_GREEN) and aws.stream_names() == ["georebal-geo-v1"]
    assert svc["desiredCount"] == len(v1.workers) and svc["taskDefinition"] == base["taskDefinition"]
    assert aws.control.get("plan")["started"] == [w.id for w in v1.workers]  # type: ignore[index]


def test_settle_steps_a_carry_swap_until_it_is_done_or_time_runs_out(aws: Aws) -> None:
    # GIVEN a carry-mode controller with v1 deploying and a clock the test moves with each sleep
    now = [0.0]
    fleet = EcsFleet(EcsService(aws.clients.ecs, "georebal", "georebal-geo-workers"))
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, swap_mode=SwapMode.CARRY)
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    sleeps: list[float] = []

    def sleep(s: float) -> None:  # the workers get ready during the second wait
        sleeps.append(s)
        now[0] += s
        if len(sleeps) == 2:
            ready(aws, v1)

    # WHEN settling with 100 s left, stepping every 15 s
    st = deployer.settle(ctl, 100.0, 15.0, sleep=sleep, clock=lambda: now[0])
    # THEN it stepped until the flip finished the deployment, then stopped
    assert st.status == DeployStatus.DONE and sleeps == [15.0, 15.0]
    # WHEN a deployment never gets ready / THEN settling stops before the invocation's time is up
    publish(aws, make_spec(2, loads=(900, 900, 900, 900), previous=v1))
    ctl.request(2)
    ctl.step()
    sleeps.clear()
    st = deployer.settle(ctl, 100.0, 15.0, sleep=sleep, clock=lambda: now[0])
    assert st.status == DeployStatus.WAITING_GREEN and sum(sleeps) <= 100.0 - deployer.SETTLE_MARGIN_S
