"""The state_handoff setting: the router gets STATE_HANDOFF and may write its ledgers; workers may write handoff
items and read slot states; the control table's handoff items expire (TTL)."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match, Template

from infra.config import load_config


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
    # AND the workers may read slot states back from the output bucket
    assert _policies_with(t, "s3:GetObject*", "state/*")
    # AND the control table expires handoff items
    t.has_resource_properties("AWS::DynamoDB::Table", {"TimeToLiveSpecification": {
        "AttributeName": "expires_at", "Enabled": True}})
