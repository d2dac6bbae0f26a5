"""New worker code reaches the fleet, and the deployer's waits for a geo stream fit in its invocation's timeout.

A ``cdk deploy`` registers a new template revision without touching the service; the deployer gets its ARN
(``WORKER_TASK_DEFINITION``) and rolls it out: the next swap is planned ``whole`` on a copy of it, and an idle
fleet gets the live spec redeployed as a new version (moto ECS, S3, DynamoDB, Kinesis).
"""

from __future__ import annotations

from typing import Any

import pytest

from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.env import EnvVar
from geokernel.contracts.spec_pointer import spec_key
from geokernel.partition_spec.model import Spec
from lambdas.deploy import deployer, runtime
from lambdas.deploy.code import redeploy_live_spec
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.config import SwapMode
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.records import read_desired
from tests.lambdas.conftest import Aws, FakeLambdaContext, make_spec

SERVICE = ("georebal", "georebal-geo-workers")


class ShortContext(FakeLambdaContext):
    def get_remaining_time_in_millis(self) -> int:
        return 25_000  # settle() stops at once: no real sleeps in the test


def publish(aws: Aws, spec: Spec) -> None:
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                        "published_at": "x"})


def new_template(aws: Aws, image: str = "geo-worker:v2") -> str:
    """What a cdk deploy with a new image does: register a revision of the family, leave the service alone."""
    out = aws.clients.ecs.register_task_definition(
        family="georebal-geo-worker", networkMode="awsvpc", requiresCompatibilities=["FARGATE"], cpu="512",
        memory="1024", containerDefinitions=[{"name": "worker", "image": image, "essential": True,
                                              "environment": [{"name": "GEO_PREFIX", "value": "georebal"}]}])
    return str(out["taskDefinition"]["taskDefinitionArn"])


def service(aws: Aws) -> dict[str, Any]:
    return dict(aws.clients.ecs.describe_services(cluster=SERVICE[0], services=[SERVICE[1]])["services"][0])


def container(aws: Aws, arn: str) -> dict[str, Any]:
    return dict(aws.clients.ecs.describe_task_definition(taskDefinition=arn)["taskDefinition"]
                ["containerDefinitions"][0])


def live(aws: Aws, ctl: DeployController, spec: Spec) -> None:
    """Deploy ``spec`` to done (its workers ready)."""
    publish(aws, spec)
    ctl.request(spec.version)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    for w in spec.workers:
        aws.put_lease(spec.version, w.id)
    assert ctl.step().status == DeployStatus.DONE


def controller(aws: Aws, template: str, mode: SwapMode = SwapMode.CARRY) -> DeployController:
    fleet = EcsFleet(EcsService(aws.clients.ecs, *SERVICE), template)
    return DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, swap_mode=mode,
                            code_stale=fleet.code_stale)


def test_the_fleet_runs_stale_code_only_after_a_new_template_revision(aws: Aws) -> None:
    # GIVEN the service created on the family's (template) revision
    first = service(aws)["taskDefinition"]
    fleet = EcsFleet(EcsService(aws.clients.ecs, *SERVICE), first)
    # THEN its code is current
    assert not fleet.code_stale()
    # WHEN the stack registers a new template revision (new image)
    fleet.template = new_template(aws)
    # THEN the service still runs the first one (the stack update left it alone) and its code is stale
    assert service(aws)["taskDefinition"] == first and fleet.code_stale()
    # WHEN a whole swap registers its revision THEN it is a copy of the template, marked with it
    arn = fleet.service.register_revision(3, fleet.template)
    c = container(aws, arn)
    assert c["image"] == "geo-worker:v2"
    assert {"name": "SPEC_VERSION", "value": "3"} in c["environment"]
    assert {"name": EnvVar.CODE_REVISION, "value": fleet.template} in c["environment"]
    fleet.service.deploy(arn, 2)
    assert not fleet.code_stale()


def test_a_carry_swap_after_new_code_is_planned_whole_on_the_new_code(aws: Aws) -> None:
    # GIVEN carry mode, v1 live on the first revision, then a new template revision
    ctl = controller(aws, service(aws)["taskDefinition"])
    v1 = make_spec(1)
    live(aws, ctl, v1)
    ctl.fleet.template = new_template(aws)  # type: ignore[attr-defined]
    # WHEN the partitioner publishes v2
    publish(aws, make_spec(2, loads=(600, 600, 600, 600), previous=v1))
    ctl.request(2)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    # THEN the plan is whole (no slot stays in an old-code process) and the service runs a copy of the new template
    plan = aws.control.get("plan")
    assert plan is not None and plan["mode"] == "whole" and plan["kept"] == []
    svc = service(aws)
    assert container(aws, svc["taskDefinition"])["image"] == "geo-worker:v2"
    assert svc["desiredCount"] == 4


def test_an_idle_fleet_with_new_code_gets_the_live_spec_redeployed_once(aws: Aws) -> None:
    # GIVEN carry mode, v1 live (done), then a new template revision
    ctl = controller(aws, service(aws)["taskDefinition"])
    v1 = make_spec(1)
    live(aws, ctl, v1)
    template = new_template(aws)
    ctl.fleet.template = template  # type: ignore[attr-defined]
    # WHEN the deployer looks at the idle fleet
    n = redeploy_live_spec(ctl, template, lambda: 1000.0)
    # THEN v2 = a copy of v1's partitions is published (object + desired) and requested
    assert n == 2
    v2 = aws.specs.get(spec_key(2))
    assert v2.partitions == v1.partitions and v2.workers == v1.workers and v2.previous_version == 1
    desired = read_desired(aws.control)
    assert desired is not None and desired.version == 2
    assert ctl.state().queued_version == 2
    # AND once it is requested nothing more is published; nor again for the same template after it finished
    assert redeploy_live_spec(ctl, template, lambda: 1001.0) is None
    assert (aws.control.get(ControlKey.CODE) or {}).get("template") == template
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    assert aws.control.get("plan")["mode"] == "whole"  # type: ignore[index]
    assert redeploy_live_spec(ctl, template, lambda: 1002.0) is None
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1), spec_key(2)]


def test_nothing_is_redeployed_when_the_code_is_current_or_unknown(aws: Aws) -> None:
    # GIVEN v1 live on the template revision
    first = service(aws)["taskDefinition"]
    ctl = controller(aws, first)
    live(aws, ctl, make_spec(1))
    # THEN neither the current template nor an unset one publishes anything
    assert redeploy_live_spec(ctl, first, lambda: 0.0) is None
    assert redeploy_live_spec(ctl, "", lambda: 0.0) is None
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]


@pytest.mark.parametrize(("remaining", "configured", "expected"), [
    (180.0, 120.0, 80.0),   # the old fixed 2 x 120 s would have outlived a 180 s timeout
    (500.0, 120.0, 120.0),
    (25.0, 120.0, 2.5),
    (10.0, 120.0, 0.0),
])
def test_stream_waits_fit_in_the_invocation(remaining: float, configured: float, expected: float) -> None:
    budget = deployer.stream_wait_budget(remaining, configured)
    assert budget == pytest.approx(expected)
    assert 2 * budget + deployer.SETTLE_MARGIN_S <= max(remaining, deployer.SETTLE_MARGIN_S)


def test_the_schedule_event_redeploys_the_live_spec_for_new_code(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN carry mode, v1 live through the deployer, then a cdk deploy registers a new template revision
    monkeypatch.setenv("SWAP_MODE", "carry")
    monkeypatch.setenv("WORKER_TASK_DEFINITION", service(aws)["taskDefinition"])
    runtime.config.cache_clear()
    runtime.controller.cache_clear()
    ctl = runtime.controller()
    live(aws, ctl, make_spec(1))
    monkeypatch.setenv("WORKER_TASK_DEFINITION", new_template(aws))
    runtime.config.cache_clear()
    runtime.controller.cache_clear()
    # WHEN the one-minute schedule's event arrives (infra/deploy.py STEP_EVENT) with little time left
    out = deployer.handler({"action": "step"}, ShortContext())
    # THEN v2 (the live spec again) is deploying on the new code
    assert out["version"] == 2 and out["status"] == DeployStatus.WAITING_GREEN
    assert container(aws, service(aws)["taskDefinition"])["image"] == "geo-worker:v2"
