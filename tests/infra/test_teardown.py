"""infra.teardown: the geo streams go with the stack (a custom resource deleted after everything that uses them)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

#: The custom resource's logical id. Never change it: CloudFormation would create a new resource and delete this
#: one, and that Delete deletes the live geo streams.
TEARDOWN_ID = "GeoStreamTeardownB7CD8CD8"


def test_a_teardown_resource_names_this_deployments_geo_stream_prefix(emr: Any) -> None:
    # GIVEN the stack THEN one Custom::GeoStreamTeardown, with a stable logical id, backed by the project's function
    resources = emr.resources("Custom::GeoStreamTeardown")
    assert list(resources) == [TEARDOWN_ID]
    emr.template.has_resource_properties("Custom::GeoStreamTeardown", {
        "ServiceToken": {"Fn::GetAtt": [Match.string_like_regexp("^GeoStreamTeardownFunction"), "Arn"]},
        "StreamPrefix": "georebal-geo-v",
    })
    emr.template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "lambdas.teardown.handler.handler", "Timeout": 300})


def test_everything_that_creates_writes_or_reads_a_geo_stream_is_deleted_before_the_teardown(emr: Any) -> None:
    # GIVEN the resources that depend on the teardown (CloudFormation deletes dependents first)
    candidates = (emr.resources("AWS::Lambda::Function") | emr.resources("AWS::ECS::Service")
                  | emr.resources("AWS::Events::Rule"))
    dependents = {k: r["Type"] for k, r in candidates.items() if TEARDOWN_ID in r.get("DependsOn", [])}
    # THEN the deployer (and both its triggers), the hooks, the router and the worker service are among them
    handlers = {emr.resources("AWS::Lambda::Function")[k]["Properties"]["Handler"] for k, t in dependents.items()
                if t == "AWS::Lambda::Function"}
    assert handlers == {"lambdas.deploy.deployer.handler", "lambdas.deploy.hooks.handler", "lambdas.router.handler.handler"}
    assert list(dependents.values()).count("AWS::ECS::Service") == 1
    assert list(dependents.values()).count("AWS::Events::Rule") == 2


def test_the_teardown_may_list_streams_and_delete_only_geo_streams(emr: Any) -> None:
    # GIVEN the teardown function's policy
    (policy,) = [p for k, p in emr.resources("AWS::IAM::Policy").items()
                 if k.startswith("GeoStreamTeardownFunctionServiceRoleDefaultPolicy")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    kinesis = {(a, json.dumps(s["Resource"])) for s in statements
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]) if a.startswith("kinesis:")}
    # THEN ListStreams (no resource type: "*") and DeleteStream on <prefix>-geo-v* streams, nothing else of Kinesis
    assert {a for a, _ in kinesis} == {"kinesis:ListStreams", "kinesis:DeleteStream"}
    assert ("kinesis:ListStreams", '"*"') in kinesis
    (delete,) = [r for a, r in kinesis if a == "kinesis:DeleteStream"]
    assert delete.endswith(':stream/georebal-geo-v*"]]}')


def test_the_deploy_functions_tag_their_streams_with_the_stacks_id(emr: Any) -> None:
    # GIVEN the deployer and the hooks THEN DEPLOYMENT_ID is the stack's id (new with every new stack)
    for handler in ("lambdas.deploy.deployer.handler", "lambdas.deploy.hooks.handler"):
        emr.template.has_resource_properties("AWS::Lambda::Function", {
            "Handler": handler,
            "Environment": {"Variables": Match.object_like({"DEPLOYMENT_ID": {"Ref": "AWS::StackId"}})},
        })
