"""Tests for infra.outputs: where the dashboard, the log groups and the alarms are, as fixed output keys."""

from __future__ import annotations

from typing import Any

import pytest


def _ref_or_att(value: Any) -> str:
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    raise AssertionError(f"expected a Ref, got {value!r}")


@pytest.mark.parametrize("variant", ["emr", "glue"])
def test_every_log_group_of_the_stack_is_an_output_but_flow_and_provider_logs(variant: str, request: pytest.FixtureRequest
                                                                      ) -> None:
    # GIVEN the synthesized stack and its log groups
    synth = request.getfixturevalue(variant)
    outputs = synth.template.to_json()["Outputs"]
    groups = set(synth.resources("AWS::Logs::LogGroup"))
    # WHEN the LogGroup* outputs are read
    named = {_ref_or_att(v["Value"]) for k, v in outputs.items() if k.startswith("LogGroup")}
    # THEN each names a log group of the stack; left out are only the VPC flow logs and the log groups of CDK's own
    # custom-resource handlers: the AwsCustomResource singleton (it starts the Glue streaming job run) and the
    # provider framework's onEvent function (it calls the handler replacing the EMR job run, LogGroupJobRun)
    keys = {k for k in outputs if k.startswith("LogGroup")}
    expected = {"LogGroupRouter", "LogGroupPartitioner", "LogGroupDeployer", "LogGroupHooks", "LogGroupTeardown",
                "LogGroupWorkers"}
    assert keys == (expected | {"LogGroupAggregation", "LogGroupJobRun"} if variant == "emr" else expected)
    assert named <= groups
    provider = "AWS679f53fac002430cb0da5b7982bd2287"  # the AwsCustomResource singleton's fixed id prefix
    framework = "AggregationStreamingRunProviderLogs"
    assert all("FlowLogs" in g or g.startswith((provider, framework)) for g in groups - named), groups - named


def test_dashboard_and_alarm_names_are_outputs(emr: Any) -> None:
    outputs = emr.template.to_json()["Outputs"]
    assert _ref_or_att(outputs["DashboardName"]["Value"]) in emr.resources("AWS::CloudWatch::Dashboard")
    joined = outputs["AlarmNames"]["Value"]["Fn::Join"]
    assert joined[0] == "," and {_ref_or_att(v) for v in joined[1]} == set(emr.resources("AWS::CloudWatch::Alarm"))


@pytest.mark.parametrize("variant", ["emr", "glue"])
def test_the_smoke_test_finds_every_output_it_reads(variant: str, request: pytest.FixtureRequest) -> None:
    # GIVEN the synthesized stack WHEN held against the outputs `georebal smoke` reads (georebal/smoke/plan.py)
    from georebal.smoke.plan import REQUIRED_OUTPUTS

    outputs = request.getfixturevalue(variant).template.to_json()["Outputs"]
    # THEN every one is there, under its fixed key
    assert [key for key in REQUIRED_OUTPUTS if key not in outputs] == []
