"""The synthesized template stays under half of CloudFormation's 1 MB, the cdk-nag acknowledgements stay reviewable
outside it, and a custom bootstrap qualifier synthesizes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.suppressions import acknowledgements, write_acknowledgements

# CloudFormation: "Template body size in an Amazon S3 object: 1 MB"
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html); half of it is the budget.
TEMPLATE_BUDGET = 500_000


def _template(synth: Any) -> Path:
    return Path(synth.assembly.directory) / synth.stack.template_file


@pytest.mark.parametrize("variant", ["emr", "glue"])
def test_the_template_is_under_half_of_cloudformations_limit(variant: str, request: pytest.FixtureRequest) -> None:
    # GIVEN the template as `cdk synth` writes it WHEN its bytes are counted THEN it is within the budget
    synth = request.getfixturevalue(variant)
    size = _template(synth).stat().st_size
    assert size <= TEMPLATE_BUDGET, f"{variant}: {size} bytes > {TEMPLATE_BUDGET}"


def test_acknowledgements_are_listed_beside_the_template_not_inside_it(emr: Any, tmp_path: Path) -> None:
    # GIVEN the synthesized stack WHEN its acknowledgements are written
    written = json.loads(write_acknowledgements(emr.stack, str(tmp_path)).read_text())
    # THEN each names its construct, rule and reason, and none of them is metadata in the template
    assert written and written == [{"path": a.path, "rule": a.rule, "reason": a.reason}
                                   for a in acknowledgements(emr.stack)]
    assert all(a["rule"].startswith("AwsSolutions::") and len(a["reason"]) > 20 for a in written)
    resources = json.loads(_template(emr).read_text())["Resources"].values()
    assert not [r for r in resources if "cdk_nag" in r.get("Metadata", {})]


def test_a_custom_bootstrap_qualifier_synthesizes(custom: Any) -> None:
    # GIVEN -c @aws-cdk/core:bootstrapQualifier=x WHEN the app synthesized (cdk-nag runs in synth: the fixture)
    synth = custom
    # THEN it passes: the Spark job reads its own objects of the x assets bucket, which needs no acknowledgement
    # (only an "every object" wildcard would)
    policies = json.dumps(synth.resources("AWS::IAM::Policy"))
    assert "cdk-x-assets-" in policies and "hnb659fds" not in policies
    rules = [a.rule for a in acknowledgements(synth.stack)]
    assert not any("-assets-" in r for r in rules)
