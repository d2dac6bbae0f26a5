"""Helpers for the DeployController tests: a settable clock, the controller over moto, specs, leases, ECS."""

from __future__ import annotations

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.spec_pointer import spec_key
from geokernel.partition_spec.model import Spec
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.ecs import EcsService
from tests.lambdas.conftest import Aws, make_spec

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def controller(aws: Aws, clock: Clock, mode: SwapMode = SwapMode.CARRY, **kw: float) -> DeployController:
    fleet = EcsFleet(EcsService(aws.clients.ecs, aws.cfg.ecs_cluster, aws.cfg.ecs_service))
    return DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, prefix="georebal",
                            green_timeout_s=kw.get("green", 600.0), drain_timeout_s=kw.get("drain", 600.0),
                            swap_mode=mode, clock=clock)


def publish(aws: Aws, spec: Spec) -> None:
    aws.specs.put_new(spec)
    assert aws.control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                               "published_at": "x"})


def leases(aws: Aws, spec: Spec, clock: Clock, **kw: object) -> None:
    for w in spec.workers:
        aws.put_lease(spec.version, w.id, now=clock.now, **kw)  # type: ignore[arg-type]


def service(aws: Aws) -> tuple[int, dict[str, str]]:
    svc = aws.clients.ecs.describe_services(cluster=aws.cfg.ecs_cluster, services=[aws.cfg.ecs_service])["services"][0]
    td = aws.clients.ecs.describe_task_definition(taskDefinition=svc["taskDefinition"])["taskDefinition"]
    env = {e["name"]: e["value"] for e in td["containerDefinitions"][0]["environment"]}
    return int(svc["desiredCount"]), env


def revisions(aws: Aws) -> int:
    return len(aws.clients.ecs.list_task_definitions(familyPrefix="georebal-geo-worker")["taskDefinitionArns"])


def deploy_v1(aws: Aws, clock: Clock, ctl: DeployController) -> Spec:
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    ctl.step()
    leases(aws, v1, clock)
    assert ctl.step().status == DeployStatus.DONE
    return v1


def start_v2(aws: Aws, clock: Clock, ctl: DeployController) -> Spec:
    """v1 deployed and active, then v2 (one more slot) published, requested and started."""
    v1 = deploy_v1(aws, clock, ctl)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    ctl.step()
    return v2
