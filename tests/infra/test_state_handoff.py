"""The state_handoff setting: the router gets STATE_HANDOFF and may write its ledgers; workers may write handoff
items and read slot states; the control table's handoff items expire (TTL)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.config import ConfigError, load_config


def _policies_with(template: Template, action: str, resource_part: str) -> list[str]:
    """Names of IAM policies with a statement allowing ``action`` on a resource whose text holds ``resource_part``."""
    found = []
    for name, pol in template.find_resources("AWS::IAM::Policy").items():
        for st in pol["Properties"]["PolicyDocument"]["Statement"]:
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            if action in actions and resource_part in json.dumps(st.get("Resource")):
                found.append(name)
    return found


def test_off_by_default_the_router_has_no_state_handoff(emr: Any) -> None:
    # GIVEN cdk.json as shipped THEN no Lambda has STATE_HANDOFF and nothing may write router ledgers
    assert load_config({}).state_handoff is False
    for fn in emr.template.find_resources("AWS::Lambda::Function").values():
        assert "STATE_HANDOFF" not in fn["Properties"].get("Environment", {}).get("Variables", {})
    assert _policies_with(emr.template, "s3:PutObject", "router-ledger/") == []


def test_on_the_router_and_workers_get_what_the_handoff_uses(custom: Any) -> None:
    # GIVEN -c state_handoff=true (with the other non-default settings of the `custom` synth, cdk-nag included)
    t = custom.template
    # THEN the router runs with STATE_HANDOFF=1 and may put its ledgers, and only those, in the specs bucket
    t.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like(
        {"STATE_HANDOFF": "1"})}})
    assert _policies_with(t, "s3:PutObject", "router-ledger/*")
    # AND it may list the ingest stream's shards (a new shard's ledger starts from its parents': lambdas.router.ledger)
    (ingest,) = [k for k in t.find_resources("AWS::Kinesis::Stream") if k.startswith("IngestStream")]
    assert any(name.startswith("RouterFunction") for name in _policies_with(t, "kinesis:ListShards", ingest))
    # AND the workers may read slot states back from the output bucket
    assert _policies_with(t, "s3:GetObject*", "state/*")
    # AND the control table expires handoff items
    t.has_resource_properties("AWS::DynamoDB::Table", {"TimeToLiveSpecification": {
        "AttributeName": "expires_at", "Enabled": True}})


def test_state_handoff_with_a_parallel_router_is_refused_naming_the_value() -> None:
    # GIVEN state_handoff on and two router invocations per ingest shard WHEN the config is read
    # THEN it is refused: each shard's ledger must be kept by one invocation at a time
    with pytest.raises(ConfigError, match=r"'router_parallelism' must be 1 with state_handoff=true .*got 2"):
        load_config({"state_handoff": True, "router_parallelism": 2})
    # AND either alone is fine
    assert load_config({"router_parallelism": 2}).router_parallelism == 2
    assert load_config({"state_handoff": True}).router_parallelism == 1
