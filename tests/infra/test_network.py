"""infra.network: a created VPC with a NAT gateway per AZ, a Kinesis interface endpoint, free S3/DynamoDB endpoints, flow logs, egress-only SG."""

from __future__ import annotations

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
