"""infra.stack: least-privilege grants (no '*' or service-wide actions, scoped resources), outputs, environment."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from geokernel.contracts.env import ENV_VARS, Component, EnvVar

REPO_ROOT = Path(__file__).resolve().parents[2]

SERVICE_WIDE = re.compile(r"^[a-z0-9-]+:\*$")
# Actions AWS only allows on Resource "*" (no resource-level permissions); anything else must be scoped.
STAR_RESOURCE_OK = {
    "xray:PutTraceSegments", "xray:PutTelemetryRecords", "ecs:RegisterTaskDefinition", "ecs:DescribeTaskDefinition",
    "cloudwatch:PutMetricData", "ecr:GetAuthorizationToken", "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses", "kinesis:DescribeLimits", "kinesis:ListStreams",
}  # fmt: skip


def _text(value: Any) -> str:
    """Fn::Join / Ref / GetAtt rendered as text (tokens as <Ref> / <Id.Attr>)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<{'.'.join(value['Fn::GetAtt'])}>"
    return json.dumps(value)


def _actions(statement: dict) -> list[str]:
    actions = statement.get("Action", [])
    return [actions] if isinstance(actions, str) else list(actions)


def _resources(statement: dict) -> list[str]:
    resources = statement.get("Resource", [])
    return [_text(r) for r in (resources if isinstance(resources, list) else [resources])]


@pytest.mark.parametrize("variant", ["emr", "glue"])
def test_no_policy_grants_all_actions_or_a_whole_service(variant: str, request: pytest.FixtureRequest) -> None:
    # GIVEN every identity-policy statement of the synthesized stack
    synth = request.getfixturevalue(variant)
    statements = synth.policy_statements()
    assert len(statements) > 20
    # WHEN the actions are inspected
    actions = [a for s in statements for a in _actions(s)]
    # THEN none is "*" or "<service>:*"
    assert "*" not in actions
    assert [a for a in actions if SERVICE_WIDE.match(a)] == []


@pytest.mark.parametrize("variant", ["emr", "glue"])
def test_resource_star_only_for_actions_without_resource_level_permissions(variant: str, request: pytest.FixtureRequest) -> None:
    # GIVEN every statement WHEN it has Resource "*"
    synth = request.getfixturevalue(variant)
    loose = [
        (a, s.get("Condition"))
        for s in synth.policy_statements()
        if "*" in _resources(s)
        for a in _actions(s)
    ]
    # THEN its actions cannot be scoped, and PutMetricData is limited to one namespace
    assert {a for a, _ in loose} <= STAR_RESOURCE_OK
    for action, condition in loose:
        if action == "cloudwatch:PutMetricData":
            assert condition and "cloudwatch:namespace" in condition["StringEquals"]


def test_geo_stream_permissions_are_scoped_to_this_deployments_geo_streams(emr: Any) -> None:
    # GIVEN the statements that manage or use Kinesis streams
    kinesis = [s for s in emr.policy_statements() if any(a.startswith("kinesis:CreateStream") or a == "kinesis:PutRecords" for a in _actions(s))]
    assert kinesis, "the deployer and the router need geo stream permissions"
    # THEN each is limited to <prefix>-geo-v*
    for statement in kinesis:
        assert all(r.endswith(":stream/georebal-geo-v*") for r in _resources(statement)), statement


def test_deployer_can_pass_only_the_worker_roles_to_ecs_tasks(emr: Any) -> None:
    # GIVEN the iam:PassRole statements WHEN inspected
    passes = [s for s in emr.policy_statements() if "iam:PassRole" in _actions(s)]
    ecs_passes = [s for s in passes if s.get("Condition", {}).get("StringEquals", {}).get("iam:PassedToService") == "ecs-tasks.amazonaws.com"]
    # THEN exactly one (the deployer's: it registers the revisions) passes to ECS tasks, naming the task and
    # execution roles (no wildcard)
    assert len(ecs_passes) == 1
    resources = _resources(ecs_passes[0])
    assert len(resources) == 2 and all("*" not in r for r in resources)
    # AND every PassRole in the stack is conditioned on the service it passes to
    assert all("iam:PassedToService" in s.get("Condition", {}).get("StringEquals", {}) for s in passes)


def test_update_service_is_scoped_to_the_worker_service(emr: Any) -> None:
    # GIVEN the statement allowing ecs:UpdateService (the deployer's)
    (statement,) = [s for s in emr.policy_statements() if "ecs:UpdateService" in _actions(s)]
    # THEN its resource is the worker service only
    assert _resources(statement) == [
        "arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:service/georebal-workers/georebal-geo-workers"]


def test_only_the_deployer_may_read_the_accounts_kinesis_shard_quota(emr: Any) -> None:
    # GIVEN the deployer's statements (it checks the quota before creating a version's stream: shard_shortfall)
    # THEN one allows kinesis:DescribeLimits on "*" (an account-level action, no resource type)
    emr.template.has_resource_properties("AWS::IAM::Policy", {
        "Roles": [{"Ref": Match.string_like_regexp("^DeployerFunctionServiceRole")}],
        "PolicyDocument": {"Statement": Match.array_with([
            Match.object_like({"Action": Match.array_with(["kinesis:DescribeLimits"]), "Effect": "Allow",
                               "Resource": "*"})])},  # merged with the other "*" actions (minimizePolicies)
    })
    # AND no other role has it (the hooks never start a version: step(allow_start=False))
    holders = [k for k, p in emr.resources("AWS::IAM::Policy").items()
               if any("kinesis:DescribeLimits" in _actions(s) for s in p["Properties"]["PolicyDocument"]["Statement"])]
    assert len(holders) == 1 and holders[0].startswith("DeployerFunctionServiceRoleDefaultPolicy")


def ecs_actions_the_adapter_calls(*entry_methods: str) -> set[str]:
    """``ecs:<Operation>`` of every ``self._ecs.<operation>(`` call in lambdas/runtime/ecs.py (the Lambdas' only ECS
    client user), in the whole adapter, or in what ``entry_methods`` of :class:`EcsService` reach (their own calls
    and those of the ``self.<method>(`` they call, transitively)."""
    source = (REPO_ROOT / "lambdas" / "runtime" / "ecs.py").read_text(encoding="utf-8")
    methods = {n.name: ast.get_source_segment(source, n) or "" for c in ast.parse(source).body
               if isinstance(c, ast.ClassDef) and c.name == "EcsService" for n in c.body if isinstance(n, ast.FunctionDef)}
    todo, seen = list(entry_methods or methods), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [m for m in re.findall(r"self\.([a-z_]+)\(", methods[name]) if m in methods]
    calls = {op for name in seen for op in re.findall(r"self\._ecs\.([a-z_]+)\(", methods[name])}
    return {"ecs:" + "".join(part.title() for part in call.split("_")) for call in calls}


def _granted_ecs(synth: Any, role: str) -> set[str]:
    return {a for s in _role_statements(synth, role) for a in _actions(s) if a.startswith("ecs:")}


def test_the_deployer_gets_exactly_the_ecs_actions_the_adapter_calls(emr: Any) -> None:
    # GIVEN the ECS actions the adapter calls (derived from its source) and those the deployer is granted
    called = ecs_actions_the_adapter_calls()
    assert called == {"ecs:DescribeServices", "ecs:DescribeTaskDefinition", "ecs:RegisterTaskDefinition",
                      "ecs:UpdateService"}
    # THEN they are the same set: nothing the code calls is missing, nothing is granted that no code path calls
    assert _granted_ecs(emr, "DeployerFunctionServiceRole") == called


def test_the_hooks_get_exactly_the_ecs_reads_their_path_calls(emr: Any) -> None:
    # GIVEN what the hooks call on ECS: the revision the service is set to (lambdas/deploy/hooks.py run_hook ->
    # EcsFleet.target_version -> EcsService.running_spec_version); their step never starts a fleet
    # (tests/lambdas/test_hook_safety.py) and a whole swap's fleet is stopped by ECS itself
    called = ecs_actions_the_adapter_calls("running_spec_version")
    assert called == {"ecs:DescribeServices", "ecs:DescribeTaskDefinition"}
    # THEN the hooks are granted exactly those: nothing that changes the service
    assert _granted_ecs(emr, "HooksFunctionServiceRole") == called


def _role_statements(synth: Any, role_prefix: str) -> list[dict[str, Any]]:
    """The statements of the default policy of the role whose logical id starts with ``role_prefix``."""
    (policy,) = [p for k, p in synth.resources("AWS::IAM::Policy").items() if k.startswith(f"{role_prefix}DefaultPolicy")]
    return list(policy["Properties"]["PolicyDocument"]["Statement"])


def _specs_bucket(synth: Any) -> str:
    return f"<{synth.stack.resolve(synth.stack.rebalancer.storage.specs.node.default_child.logical_id)}.Arn>"


@pytest.mark.parametrize(("role", "puts"), [
    ("PartitionerFunctionServiceRole", {"/specs/*", "/control/controller-state.json", "/control/surges.json"}),
    ("DeployerFunctionServiceRole", {"/specs/*", "/streams/*"}),
    ("HooksFunctionServiceRole", set()),
    ("RouterFunctionServiceRole", {"/control/surge/*"}),
])  # fmt: skip
def test_published_specs_are_never_deleted_and_each_role_puts_only_what_it_writes(emr: Any, role: str, puts: set[str]) -> None:
    # GIVEN a role's statements on the specs bucket
    bucket = _specs_bucket(emr)
    on_specs = [s for s in _role_statements(emr, role) if any(r.startswith(bucket) for r in _resources(s))]
    actions = {a for s in on_specs for a in _actions(s)}
    # THEN it may read every object and put only the keys its code writes (lambdas/partitioner/logic.py, state.py and
    # surge.py; lambdas/deploy/code.py and steps.py; the router's surge signals, lambdas/router/surge.py), and delete
    # nothing: specs are immutable and the bucket keeps versions
    assert {"s3:GetObject*", "s3:List*"} <= actions and ("s3:PutObject" in actions) == bool(puts)
    assert not [a for a in actions if a.startswith("s3:Delete")]
    put_to = {r.removeprefix(bucket) for s in on_specs if "s3:PutObject" in _actions(s) for r in _resources(s)
              if r.startswith(bucket)}
    assert put_to == puts


@pytest.mark.parametrize(
    "output",
    ["IngestStreamName", "SnapshotsBucket", "SpecsBucket", "QuarantineBucket", "CostsBucket", "OutputBucket",
     "CheckpointsBucket", "ControlTable", "LeasesTable", "ClusterName", "ServiceName", "DashboardUrl", "AlarmTopic"],
)  # fmt: skip
def test_operator_outputs(emr: Any, output: str) -> None:
    # GIVEN the stack WHEN its outputs are listed THEN what an operator needs is there
    emr.template.has_output(output, Match.any_value())


def test_engine_specific_outputs(emr: Any, glue: Any) -> None:
    # GIVEN both variants THEN each exports its own engine's handle
    emr.template.has_output("EmrApplicationId", Match.any_value())
    emr.template.has_output("EmrJobRunId", Match.any_value())
    glue.template.has_output("GlueJobName", Match.any_value())
    assert "GlueJobName" not in emr.template.to_json()["Outputs"]
    assert "EmrApplicationId" not in glue.template.to_json()["Outputs"]


#: The custom-resource handler that replaces the EMR streaming job run at deploy time: it reads only its resource's
#: properties (lambdas/jobrun/handler.py), none of the contract environment.
JOB_RUN_HANDLER = "lambdas.jobrun.handler.on_event"


def test_every_lambda_gets_the_contract_environment(emr: Any) -> None:
    # GIVEN the four project functions of the running system (python runtime; the streaming job run's resource and the
    # geo-stream teardown read none of it)
    functions = [f for f in emr.resources("AWS::Lambda::Function").values()
                 if f["Properties"]["Handler"].startswith("lambdas.") and f["Properties"]["Handler"] != JOB_RUN_HANDLER
                 and not f["Properties"]["Handler"].startswith("lambdas.teardown.")]
    assert len(functions) == 4
    required = {"GEO_PREFIX", "CONTROL_TABLE", "LEASES_TABLE", "SNAPSHOTS_BUCKET", "SPECS_BUCKET", "COSTS_BUCKET",
                "QUARANTINE_BUCKET", "OUTPUT_BUCKET", "MAX_LOAD", "SHARDS_PER_WORKER", "GRID_ZOOM", "POLICY_JSON", "ECS_CLUSTER", "ECS_SERVICE"}  # fmt: skip
    # THEN each has every contract variable, with the fixed names of the ECS cluster and service
    for function in functions:
        variables = function["Properties"]["Environment"]["Variables"]
        assert required <= set(variables)
        assert (variables["ECS_CLUSTER"], variables["ECS_SERVICE"], variables["GRID_ZOOM"]) == ("georebal-workers", "georebal-geo-workers", "12")
        assert variables["SHARDS_PER_WORKER"] == "1"  # the default cap (10,000 per 300 s) fits half a shard
        assert "AWS_ENDPOINT_URL" not in variables



def test_the_stack_sets_exactly_the_variables_the_contract_says_it_sets(emr: Any) -> None:
    # GIVEN the environment of every project function and of the worker container (default settings)
    functions = [f for f in emr.resources("AWS::Lambda::Function").values() if f["Properties"]["Handler"].startswith("lambdas.")]
    names = {name for f in functions for name in f["Properties"].get("Environment", {}).get("Variables", {})}
    (task,) = emr.resources("AWS::ECS::TaskDefinition").values()
    names |= {v["Name"] for v in task["Properties"]["ContainerDefinitions"][0]["Environment"]}
    # THEN every name is a contract variable, and the stack sets every one geokernel/contracts/env.py lists as
    # set by it (GEO_TRANSFORM, EVENT_FIELDS, STATE_HANDOFF, ROUTER_PARALLELISM and GEOFENCE_EVENT_BUS only when
    # configured: test_geo_transform.py, test_event_fields.py, test_state_handoff.py, test_router.py, test_workers.py)
    assert names <= set(EnvVar)
    assert names | {EnvVar.GEO_TRANSFORM, EnvVar.EVENT_FIELDS, EnvVar.STATE_HANDOFF, EnvVar.ROUTER_PARALLELISM,
                    EnvVar.GEOFENCE_EVENT_BUS} == {
        var for var, use in ENV_VARS.items() if Component.STACK in use.set_by}
