"""infra.deploy: the deployer runs on each new spec; the hooks function is the service's lifecycle hook target."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match


def test_deployer_is_triggered_by_new_specs(emr: Any) -> None:
    # GIVEN the bucket notifications THEN the specs bucket invokes the deployer for objects under specs/ (and the
    # partitioner for the routers' surge signals: tests/infra/test_partitioner_fn.py)
    emr.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": Match.array_with([
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "specs/"}]}},
                        "LambdaFunctionArn": {"Fn::GetAtt": [Match.string_like_regexp("^DeployerFunction"), "Arn"]},
                    }
                ])
            }
        },
    )


def test_deployer_timeout_covers_the_stream_activation_wait(emr: Any) -> None:
    # GIVEN STREAM_ACTIVE_WAIT_S = 120 (docs/CONTRACTS.md) THEN the deployer has at least 180 s
    emr.template.has_resource_properties("AWS::Lambda::Function", {"Handler": "lambdas.deploy.deployer.handler", "Timeout": 180})


def test_a_one_minute_schedule_advances_a_stalled_deployment(emr: Any) -> None:
    # GIVEN the rules THEN one fires every minute and invokes the deployer with a plain step
    (deployer,) = [k for k, r in emr.resources("AWS::Lambda::Function").items()
                   if r["Properties"].get("Handler") == "lambdas.deploy.deployer.handler"]
    rules = [r["Properties"] for r in emr.resources("AWS::Events::Rule").values()
             if r["Properties"].get("ScheduleExpression")]
    assert len(rules) == 1 and rules[0]["ScheduleExpression"] == "rate(1 minute)" and rules[0]["State"] == "ENABLED"
    (target,) = rules[0]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [deployer, "Arn"]} and json.loads(target["Input"]) == {"action": "step"}
    # AND EventBridge may invoke it
    emr.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {"Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
         "FunctionName": {"Fn::GetAtt": [deployer, "Arn"]}},
    )


def test_deployer_may_create_and_delete_only_geo_streams(emr: Any) -> None:
    # GIVEN the deployer's policy
    (policy,) = [p for k, p in emr.resources("AWS::IAM::Policy").items() if k.startswith("DeployerFunctionServiceRoleDefaultPolicy")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (streams,) = [s for s in statements if "kinesis:CreateStream" in s["Action"]]
    # THEN create/delete are on <prefix>-geo-v* only, and ECS RegisterTaskDefinition is present
    assert "kinesis:DeleteStream" in streams["Action"]
    assert streams["Resource"]["Fn::Join"][1][-1] == ":stream/georebal-geo-v*"
    assert any("ecs:RegisterTaskDefinition" in s["Action"] for s in statements)


def test_hooks_function_can_read_leases_and_flip_control(emr: Any) -> None:
    # GIVEN the hooks function's policy
    (policy,) = [p for k, p in emr.resources("AWS::IAM::Policy").items() if k.startswith("HooksFunctionServiceRoleDefaultPolicy")]
    actions = {a for s in policy["Properties"]["PolicyDocument"]["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    # THEN DynamoDB reads/writes, geo stream deletion and service description are allowed, nothing ECS-mutating
    assert {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "kinesis:DeleteStream", "ecs:DescribeServices"} <= actions
    assert "ecs:UpdateService" not in actions and "ecs:RegisterTaskDefinition" not in actions


def test_every_ecs_deployment_state_change_of_the_service_steps_the_deployer(emr: Any) -> None:
    # GIVEN the rules THEN one matches the service's ECS deployment events (a rollback after a failed hook among
    # them) and invokes the deployer with the event itself, which the deployer treats as a step
    (deployer,) = [k for k, r in emr.resources("AWS::Lambda::Function").items()
                   if r["Properties"].get("Handler") == "lambdas.deploy.deployer.handler"]
    rules = [r["Properties"] for r in emr.resources("AWS::Events::Rule").values()
             if r["Properties"].get("EventPattern", {}).get("detail-type") == ["ECS Deployment State Change"]
             and any(t["Arn"] == {"Fn::GetAtt": [deployer, "Arn"]} for t in r["Properties"]["Targets"])]
    assert len(rules) == 1
    pattern = rules[0]["EventPattern"]
    assert pattern["source"] == ["aws.ecs"] and "detail" not in pattern
    assert "georebal-geo-workers" in json.dumps(pattern["resources"])
    (target,) = rules[0]["Targets"]
    assert "Input" not in target


@pytest.mark.parametrize("handler", ["lambdas.deploy.deployer.handler", "lambdas.deploy.hooks.handler"])
def test_the_deployer_and_the_hooks_have_room_for_two_large_specs(emr: Any, handler: str) -> None:
    # GIVEN the functions that parse the live and the next spec THEN each has 1 GB (512 MB held one 1M-quadkey spec)
    emr.template.has_resource_properties("AWS::Lambda::Function", {"Handler": handler, "MemorySize": 1024})
