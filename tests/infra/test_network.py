"""infra.network: a created VPC with a NAT gateway per AZ, a Kinesis interface endpoint, free S3/DynamoDB endpoints, flow logs, egress-only SG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.config import load_config


def test_created_vpc_has_a_nat_gateway_per_az_and_endpoints_for_the_bulk_traffic(emr: Any) -> None:
    # GIVEN the default config (no vpc_id) WHEN synthesized
    # THEN a VPC with a NAT gateway in each of its two AZs (no single-AZ egress), S3 + DynamoDB gateway endpoints,
    # and a Kinesis interface endpoint with private DNS (every event crosses Kinesis twice; NAT data costs 4.5x)
    emr.template.resource_count_is("AWS::EC2::VPC", 1)
    emr.template.resource_count_is("AWS::EC2::NatGateway", 2)
    endpoints = [e["Properties"] for e in emr.resources("AWS::EC2::VPCEndpoint").values()]
    assert sorted(e["VpcEndpointType"] for e in endpoints) == ["Gateway", "Gateway", "Interface"]
    (kinesis,) = [e for e in endpoints if e["VpcEndpointType"] == "Interface"]
    assert "kinesis-streams" in str(kinesis["ServiceName"]) and kinesis["PrivateDnsEnabled"] is True
    assert len([s for s in emr.resources("AWS::EC2::Subnet").values() if s["Properties"]["MapPublicIpOnLaunch"] is False]) == 2
    # AND flow logs go to CloudWatch Logs
    emr.template.has_resource_properties("AWS::EC2::FlowLog", {"LogDestinationType": "cloud-watch-logs", "TrafficType": "ALL"})


def test_workload_security_group_allows_no_inbound_and_only_https_out(emr: Any) -> None:
    # GIVEN the workload security group THEN it has no ingress and a single HTTPS egress rule
    emr.template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": Match.string_like_regexp("no inbound"),
            "SecurityGroupEgress": [{"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "Description": Match.any_value()}],
            "SecurityGroupIngress": Match.absent(),
        },
    )


def test_vpc_reuse_requires_a_concrete_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a vpc_id but no account/region in the environment
    import aws_cdk as cdk

    from app import build_app

    monkeypatch.delenv("CDK_DEFAULT_ACCOUNT", raising=False)
    monkeypatch.delenv("CDK_DEFAULT_REGION", raising=False)
    # WHEN the app is built THEN it stops with a message naming the setting and value
    with pytest.raises(SystemExit, match=r"context 'vpc_id' \('vpc-0123456789abcdef0'\)"):
        build_app(cdk.App(context={"vpc_id": "vpc-0123456789abcdef0"}))
    assert load_config({"vpc_id": "vpc-0123456789abcdef0"}).vpc_id == "vpc-0123456789abcdef0"


REPO_ROOT = Path(__file__).resolve().parents[2]
EMR_AZ_PAGE = "https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/endpoints-quotas.html"


def _section(markdown: str, heading: str) -> str:
    """The text of the ``## heading`` section (up to the next ``## ``)."""
    start = markdown.index(f"\n## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end != -1 else len(markdown)]


def test_the_emr_subnets_zones_are_unknown_at_synth_so_the_deploy_guide_has_them_checked_first(emr: Any) -> None:
    # GIVEN the EMR Serverless application's subnets (a created VPC's private subnets)
    (app,) = emr.resources("AWS::EMRServerless::Application").values()
    subnet_ids = {s["Ref"] for s in app["Properties"]["NetworkConfiguration"]["SubnetIds"]}
    zones = [emr.resources("AWS::EC2::Subnet")[s]["Properties"]["AvailabilityZone"] for s in sorted(subnet_ids)]
    # THEN their zones are Fn::GetAZs picks, known only at deploy (and a looked-up VPC's carry zone names, not the AZ
    # IDs EMR Serverless lists): synth cannot compare them with the IDs it supports
    assert len(zones) == 2 and all("Fn::GetAZs" in json.dumps(z) for z in zones)
    # AND docs/DEPLOY.md "Before the first deploy" has the check (the preflight item), citing the AZ ID list and
    # saying how to look the IDs up for both kinds of VPC
    checklist = _section((REPO_ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8"), "Before the first deploy")
    assert "- [ ]" in checklist or "* [ ]" in checklist
    assert EMR_AZ_PAGE in checklist and "AvailabilityZoneId" in checklist and "ZoneId" in checklist
    assert "python -m georebal preflight" in checklist


def test_the_docs_count_the_nat_gateways_cdk_json_creates(cdk_context: dict[str, Any]) -> None:
    # GIVEN the default number of NAT gateways (cdk.json) and the per-hour rate docs/COST.md uses
    nats = int(cdk_context["nat_gateways"])
    deploy = (REPO_ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    cost = (REPO_ROOT / "docs" / "COST.md").read_text(encoding="utf-8")
    # THEN the deploy guide's Network row, the cost estimate's defaults and its NAT-hours line say that many
    (network_row,) = [line for line in deploy.splitlines() if line.startswith("| `Network`")]
    assert f"{nats} NAT gateways" in network_row and "1 NAT gateway," not in network_row
    (defaults_row,) = [line for line in cost.splitlines() if line.startswith("| everything else |")]
    assert f"{nats} NAT gateways" in defaults_row
    (hours_row,) = [line for line in cost.splitlines() if line.startswith("| VPC: NAT gateway") and ", hours |" in line]
    monthly = round(nats * 0.045 * 730)  # 0.045 USD per NAT-hour, 730 hours (the table's own rate and month)
    assert [cell.strip() for cell in hours_row.strip("|").split("|")][2:] == [str(monthly), str(monthly)]
