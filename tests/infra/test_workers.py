"""infra.workers: ECS cluster, Fargate task from the worker image asset, headless blue/green service + hooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Match


def test_service_is_headless_blue_green_with_lifecycle_hooks(emr: Any) -> None:
    # GIVEN the worker service THEN it is a Fargate service without load balancer, ECS-native BLUE_GREEN,
    # with the hooks Lambda on the two stages the deploy protocol holds (green ready, blue drained), invoked with the hook role
    emr.template.has_resource_properties(
        "AWS::ECS::Service",
        {
            "ServiceName": "georebal-geo-workers",
            "LaunchType": "FARGATE",
            "DesiredCount": Match.absent(),
            "LoadBalancers": Match.absent(),
            "DeploymentConfiguration": Match.object_like(
                {
                    "Strategy": "BLUE_GREEN",
                    "BakeTimeInMinutes": 0,
                    "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True},
                    "LifecycleHooks": [
                        {
                            "HookTargetArn": {"Fn::GetAtt": [Match.string_like_regexp("^HooksFunction"), "Arn"]},
                            "RoleArn": {"Fn::GetAtt": [Match.string_like_regexp("^WorkersHookRole"), "Arn"]},
                            "LifecycleStages": ["POST_SCALE_UP", "POST_PRODUCTION_TRAFFIC_SHIFT"],
                        }
                    ],
                }
            ),
            "NetworkConfiguration": {"AwsvpcConfiguration": Match.object_like({"AssignPublicIp": "DISABLED"})},
        },
    )


def test_hook_role_may_only_invoke_the_hooks_function(emr: Any) -> None:
    # GIVEN the hook role's policy THEN it allows lambda:InvokeFunction on the hooks function only
    (policy,) = [p for k, p in emr.resources("AWS::IAM::Policy").items() if k.startswith("WorkersHookRoleDefaultPolicy")]
    (statement, *rest) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert rest == []
    assert statement["Action"] == "lambda:InvokeFunction"
    assert statement["Resource"] == {"Fn::GetAtt": [statement["Resource"]["Fn::GetAtt"][0], "Arn"]}
    assert statement["Resource"]["Fn::GetAtt"][0].startswith("HooksFunction")


def test_task_definition_from_the_worker_image_asset(emr: Any) -> None:
    # GIVEN the task definition THEN Fargate with the configured size, the image from the CDK asset repository,
    # the contract environment and awslogs
    emr.template.has_resource_properties(
        "AWS::ECS::TaskDefinition",
        {
            "Family": "georebal-geo-worker",
            "Cpu": "512",
            "Memory": "1024",
            "RequiresCompatibilities": ["FARGATE"],
            "ContainerDefinitions": [
                Match.object_like(
                    {
                        "Name": "worker",
                        "Image": {"Fn::Sub": Match.string_like_regexp(r"\.dkr\.ecr\..*/cdk-hnb659fds-container-assets-")},
                        "Environment": Match.array_with([{"Name": "GEO_PREFIX", "Value": "georebal"}, {"Name": "LEASE_S", "Value": "30"}]),
                        "LogConfiguration": Match.object_like({"LogDriver": "awslogs"}),
                        "HealthCheck": Match.object_like({"Command": ["CMD", "python", "-m", "geo_service.healthcheck"]}),
                    }
                )
            ],
        },
    )


def test_image_asset_is_built_from_the_repo_root_with_the_worker_dockerfile(emr: Any) -> None:
    # GIVEN the cloud assembly's asset manifest
    manifest = json.loads((Path(emr.assembly.directory) / f"{emr.stack.artifact_id}.assets.json").read_text())
    images = [image["source"] for image in manifest["dockerImages"].values()]
    # THEN one image, Dockerfile geo_service/Dockerfile, linux/amd64 (synth only fingerprints it: no Docker needed)
    assert len(images) == 1
    assert images[0]["dockerFile"] == "geo_service/Dockerfile" and images[0]["platform"] == "linux/amd64"


def test_cluster_has_container_insights(emr: Any) -> None:
    emr.template.has_resource_properties(
        "AWS::ECS::Cluster",
        {"ClusterName": "georebal-workers", "ClusterSettings": [{"Name": "containerInsights", "Value": "enhanced"}]},
    )


def test_workers_and_deploy_lambdas_get_the_swap_mode_and_tasks_may_protect_themselves(emr: Any) -> None:
    # GIVEN the synthesized stack THEN the worker container carries SWAP_MODE (carry by default)
    emr.template.has_resource_properties(
        "AWS::ECS::TaskDefinition",
        {"ContainerDefinitions": [Match.object_like({"Environment": Match.array_with([{"Name": "SWAP_MODE", "Value": "carry"}])})]},
    )
    # AND so does the deployer (it picks desired-count swaps or a blue/green revision by it)
    emr.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "lambdas.deploy.deployer.handler", "Environment": {"Variables": Match.object_like({"SWAP_MODE": "carry"})}},
    )
    # AND a task may set its own scale-in protection, on the worker cluster's tasks only
    statements = [s for s in emr.policy_statements() if "ecs:UpdateTaskProtection" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert len(statements) == 1 and set(statements[0]["Action"]) == {"ecs:UpdateTaskProtection", "ecs:GetTaskProtection"}
    assert ":task/georebal-workers/*" in json.dumps(statements[0]["Resource"])



def test_a_stack_update_leaves_the_running_fleet_alone(emr: Any) -> None:
    # GIVEN the service THEN it has no DesiredCount (CloudFormation would write it back over the deployer's count
    # on any update) and names the task definition by family only: a new image or setting changes the revision's
    # ARN but not this string, so CloudFormation starts no deployment of a revision without SPEC_VERSION
    (svc,) = emr.resources("AWS::ECS::Service").values()
    assert "DesiredCount" not in svc["Properties"]
    assert svc["Properties"]["TaskDefinition"] == "georebal-geo-worker"
    # AND the deployer learns the template's revision (Ref of the task definition = its ARN) to roll new code out
    (task_def,) = emr.resources("AWS::ECS::TaskDefinition")
    emr.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "lambdas.deploy.deployer.handler",
         "Environment": {"Variables": Match.object_like({"WORKER_TASK_DEFINITION": {"Ref": task_def}})}},
    )


def test_the_worker_container_has_a_read_only_root_filesystem_and_no_volume(emr: Any) -> None:
    # GIVEN the worker task definition (the worker writes no file: tests/geo_service/test_no_file_writes.py)
    # THEN its container's root filesystem is read-only, with no writable volume mounted anywhere
    emr.template.has_resource_properties(
        "AWS::ECS::TaskDefinition",
        {
            "Family": "georebal-geo-worker",
            "ContainerDefinitions": [Match.object_like({"Name": "worker", "ReadonlyRootFilesystem": True,
                                                        "MountPoints": Match.absent()})],
            "Volumes": Match.absent(),
        },
    )


def _task_role_statements(synth: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The statements of the worker task role's policies, and the container's environment."""
    (task,) = synth.resources("AWS::ECS::TaskDefinition").values()
    role = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    statements = [st for p in synth.resources("AWS::IAM::Policy").values()
                  if {"Ref": role} in p["Properties"]["Roles"] for st in p["Properties"]["PolicyDocument"]["Statement"]]
    env = {v["Name"]: v["Value"] for v in task["Properties"]["ContainerDefinitions"][0]["Environment"]}
    return statements, env


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_without_a_geofence_bus_no_role_may_put_events_and_the_workers_get_no_bus(emr: Any) -> None:
    # GIVEN the default settings (geofence_event_bus "")
    statements, env = _task_role_statements(emr)
    # THEN no role of the stack may call events:PutEvents, and the workers have no GEOFENCE_EVENT_BUS
    assert not [st for st in emr.policy_statements() if any(a.startswith("events:") for a in _actions(st))]
    assert "GEOFENCE_EVENT_BUS" not in env and statements


def test_the_geofence_bus_is_granted_to_the_task_role_alone_for_that_bus_alone(custom: Any) -> None:
    # GIVEN geofence_event_bus=fences
    statements, env = _task_role_statements(custom)
    # THEN the workers get the bus's name, and the task role one statement: events:PutEvents on that bus's ARN in the
    # stack's account and region
    assert env["GEOFENCE_EVENT_BUS"] == "fences"
    (put,) = [st for st in statements if any(a.startswith("events:") for a in _actions(st))]
    assert _actions(put) == ["events:PutEvents"] and put["Effect"] == "Allow" and "Condition" not in put
    assert put["Resource"] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":events:", {"Ref": "AWS::Region"},
                                                 ":", {"Ref": "AWS::AccountId"}, ":event-bus/fences"]]}
    # AND no other role may put events
    assert sum(1 for st in custom.policy_statements() if any(a.startswith("events:") for a in _actions(st))) == 1
