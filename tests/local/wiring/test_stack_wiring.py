"""local.wiring: the twin reads the synthesized stack (roles, the router's event source, notifications, keys).

The stack is synthesized once with the local run's settings (``local.wiring.synth``, kept under ``.cache``: the
whole-loop runs read the same template) and read with the twin's names.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from geokernel.contracts.stream import geo_stream_prefix
from lambdas.runtime.ecs import EcsService
from local.aws import REGION, Names
from local.config import RunConfig
from local.iam.policy import evaluate, statements_of
from local.twin import stack_context
from local.wiring.stack_wiring import Component, Wiring, read_wiring
from local.wiring.synth import synthesized_template
from local.wiring.template import ACCOUNT_ID, Resolver, StackTemplate, TemplateError, twin_names

NAMES = Names("georebal-local")
GEO = f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/{geo_stream_prefix(NAMES.prefix)}*"


@pytest.fixture(scope="module")
def template() -> StackTemplate:
    path, _ = synthesized_template(stack_context(RunConfig(out=Path("/tmp")), stateful=False))
    return StackTemplate.read(path)


def _wiring(template: StackTemplate) -> Wiring:
    resolver = Resolver(template, twin_names(template, NAMES), REGION, "http://127.0.0.1:5000")
    return read_wiring(template, resolver, GEO)


def test_every_part_runs_as_the_role_the_template_gives_it(template: StackTemplate) -> None:
    # GIVEN the synthesized stack WHEN read THEN each part has the role the template attaches to it, with statements
    wiring = _wiring(template)
    assert set(wiring.roles) == set(Component)
    lambdas = {r["Properties"]["Handler"].rpartition(".")[0]: r["Properties"]["Role"]["Fn::GetAtt"][0]
               for r in template.of_type("AWS::Lambda::Function").values()}
    assert wiring.roles[Component.ROUTER].logical_id == lambdas["lambdas.router.handler"]
    assert wiring.roles[Component.DEPLOYER].logical_id == lambdas["lambdas.deploy.deployer"]
    assert all(role.statements for role in wiring.roles.values())


def test_the_router_event_source_is_the_stacks_and_holds_records_by_age(template: StackTemplate) -> None:
    # GIVEN the stack's event source mapping WHEN read THEN the twin gets its settings, resolved to its own names:
    # the oldest record first, no retry count, records held for the retention less the redrive margin
    es = _wiring(template).event_source(Component.ROUTER)
    assert (es.stream, es.starting_position, es.max_retry_attempts, es.max_record_age_s) == (
        NAMES.ingest_stream, "TRIM_HORIZON", -1, 18 * 3600)
    assert es.bisect_on_error and es.report_batch_item_failures and es.batch_size == 500
    assert es.on_failure == f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{NAMES.router_failures_queue}"


def test_the_notifications_and_encryption_keys_are_the_stacks(template: StackTemplate) -> None:
    # GIVEN the stack WHEN read THEN manifests invoke the partitioner, specs the deployer, the routers' surge signals
    # the partitioner too, and every stream and bucket the parts touch has its KMS key (the ingest stream's, the geo
    # streams' from the deployer's GEO_STREAM_KMS_KEY)
    wiring = _wiring(template)
    snapshots = wiring.notification(NAMES.snapshots_bucket)
    specs = wiring.notification(NAMES.specs_bucket, Component.DEPLOYER)
    signals = wiring.notification(NAMES.specs_bucket, Component.PARTITIONER)
    assert (snapshots.prefix, snapshots.suffix, snapshots.component) == ("snapshots/", "_manifest.json",
                                                                         Component.PARTITIONER)
    assert (specs.prefix, specs.component) == ("specs/", Component.DEPLOYER)
    assert (signals.prefix, signals.suffix) == ("control/surge/", ".json")
    assert signals.matches("control/surge/v00000003/w0001-0231.json") and not signals.matches("control/surges.json")
    with pytest.raises(TemplateError, match="2 notifications on bucket"):
        wiring.notification(NAMES.specs_bucket)
    assert snapshots.matches("snapshots/window_end=x/_manifest.json") and not snapshots.matches("snapshots/x/data.csv")
    keys = wiring.encryption_keys
    assert keys[GEO].endswith(":key/" + next(k for k in template.resources if k.startswith("GeoStreamsKey")))
    assert f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/{NAMES.ingest_stream}" in keys
    assert f"arn:aws:s3:::{NAMES.output_bucket}" in keys


def test_a_changed_template_changes_the_twin(template: StackTemplate, tmp_path: Path) -> None:
    # GIVEN the template with the event source's batch size and starting position edited (as a changed stack)
    doc: dict[str, Any] = {"Resources": copy.deepcopy(dict(template.resources)), "Outputs": dict(template.outputs)}
    esm = next(r for r in doc["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping")
    esm["Properties"].update(BatchSize=123, StartingPosition="LATEST", MaximumRetryAttempts=10)
    path = tmp_path / "changed.template.json"
    path.write_text(json.dumps(doc))
    # WHEN the twin reads it THEN it plays the changed settings: it has none of its own
    es = _wiring(StackTemplate.read(path)).event_source(Component.ROUTER)
    assert (es.batch_size, es.starting_position, es.max_retry_attempts) == (123, "LATEST", 10)


def test_every_ecs_call_the_deploy_parts_make_is_allowed_by_their_role(template: StackTemplate) -> None:
    # GIVEN the ECS adapter's calls (the twin plays ECS with local processes, so moto never sees them) and the
    # deployer's and the hooks' synthesized statements
    import inspect
    import re

    calls = sorted(set(re.findall(r"self\._ecs\.([a-z_]+)\(", inspect.getsource(EcsService))))
    assert calls, "the ECS adapter makes no call: the check would hold nothing"
    wiring = _wiring(template)
    service = f"arn:aws:ecs:{REGION}:{ACCOUNT_ID}:service/{NAMES.prefix}-workers/{NAMES.prefix}-geo-workers"
    # WHEN each call is held against the deployer's role, on the service (RegisterTaskDefinition has no resource type)
    deployer = statements_of([wiring.roles[Component.DEPLOYER].document()])
    denied = []
    for op in calls:
        action = "ecs:" + "".join(w.title() for w in op.split("_"))
        resource = "*" if action in ("ecs:RegisterTaskDefinition", "ecs:DescribeTaskDefinition") else service
        if not evaluate(deployer, action, resource).allowed:
            denied.append(action)
    # THEN none is refused
    assert not denied, f"the deployer's role does not allow {denied} on {service}"


def test_the_fast_path_puts_only_its_own_objects(template: StackTemplate) -> None:
    # GIVEN the router's and the partitioner's synthesized statements
    wiring = _wiring(template)
    router = statements_of([wiring.roles[Component.ROUTER].document()])
    partitioner = statements_of([wiring.roles[Component.PARTITIONER].document()])
    specs = f"arn:aws:s3:::{NAMES.specs_bucket}"
    # WHEN the fast path's writes are held against them
    # THEN the router may put surge signals and nothing else of the specs bucket's control objects; the partitioner
    # may read signals and put the relieved surges
    assert evaluate(router, "s3:PutObject", f"{specs}/control/surge/v00000003/w0001-0231.json").allowed
    for key in ("control/surges.json", "control/crowds.json", "specs/v00000004.json"):
        assert not evaluate(router, "s3:PutObject", f"{specs}/{key}").allowed, key
    assert evaluate(partitioner, "s3:GetObject", f"{specs}/control/surge/v00000003/w0001-0231.json").allowed
    assert evaluate(partitioner, "s3:PutObject", f"{specs}/control/surges.json").allowed
    assert not evaluate(partitioner, "s3:PutObject", f"{specs}/control/surge/v00000003/w0001-0231.json").allowed
