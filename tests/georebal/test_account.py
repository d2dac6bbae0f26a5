"""georebal.account: the account's quota values through real botocore clients (Stubber) and moto where moto has the
API (EC2 subnets, Kinesis DescribeLimits; moto has no Lambda GetAccountSettings nor GetAWSDefaultServiceQuota)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from geokernel.aws_budget.levels import LEVEL_BY_KEY
from georebal.account import private_subnets, read_account
from georebal.cli import main
from infra.config import load_config
from tests.georebal.recorded import RecordedAws, load_account

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
SUBNET_IPS = "Private subnets' free IPv4 addresses"


class StubbedAws:
    """Real botocore clients (dummy credentials, no network) with a Stubber each."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.clients = {name: boto3.client(name, region_name=region, aws_access_key_id="x", aws_secret_access_key="x")
                        for name in ("service-quotas", "kinesis", "lambda")}
        self.stubs = {name: Stubber(client) for name, client in self.clients.items()}

    def client(self, service: str) -> Any:
        return self.clients[service]


def test_real_clients_are_asked_with_the_parameters_the_apis_take() -> None:
    # GIVEN real botocore clients stubbed with the new account's recorded responses, in the order they are asked
    doc = load_account("new")
    aws = StubbedAws(doc["region"])
    quotas = doc["service-quotas"]
    for key in ("fargate/L-3032A538", "vpc/L-DF5E4CA3", "emr-serverless/L-D05C8A75"):
        service, code = key.split("/")
        ask = {"ServiceCode": service, "QuotaCode": code}
        applied = quotas["GetServiceQuota"][key]
        if "Error" in applied:
            aws.stubs["service-quotas"].add_client_error("get_service_quota", applied["Error"]["Code"],
                                                         applied["Error"]["Message"], expected_params=ask)
            aws.stubs["service-quotas"].add_response("get_aws_default_service_quota",
                                                     quotas["GetAWSDefaultServiceQuota"][key], ask)
        else:
            aws.stubs["service-quotas"].add_response("get_service_quota", applied, ask)
    aws.stubs["kinesis"].add_response("describe_limits", doc["kinesis"]["DescribeLimits"][""], {})
    aws.stubs["lambda"].add_response("get_account_settings", doc["lambda"]["GetAccountSettings"][""], {})
    config = load_config({})
    # WHEN the account's values are read (the stubs check every request's parameters against the API's)
    with aws.stubs["service-quotas"], aws.stubs["kinesis"], aws.stubs["lambda"]:
        haves = read_account(aws, config, [LEVEL_BY_KEY[k] for k in (
            "fargate.on_demand_vcpu", "ecs.fargate_launches_per_service", "vpc.network_interfaces",
            "vpc.private_subnet_ips", "kinesis.shards", "kinesis.on_demand_streams", "lambda.concurrent_executions",
            "emr_serverless.max_vcpu")])
        for stub in aws.stubs.values():
            stub.assert_no_pending_responses()
    # THEN the applied values are read, and the AWS defaults where nothing is applied
    assert (haves["fargate.on_demand_vcpu"].value, haves["fargate.on_demand_vcpu"].source) == (6.0, "applied")
    assert (haves["vpc.network_interfaces"].value, haves["vpc.network_interfaces"].source) == (5000.0, "AWS default")
    assert (haves["kinesis.shards"].value, haves["lambda.concurrent_executions"].value) == (200, 10)
    assert haves["emr_serverless.max_vcpu"].value == 16.0


@pytest.fixture
def moto_vpc() -> Iterator[tuple[str, Any, Any]]:
    """A VPC in moto with two CDK-tagged private subnets (/24: 251 free addresses each) and a public one."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="eu-central-1")
        vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
        for i, kind in enumerate(("Private", "Private", "Public")):
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24")["Subnet"]["SubnetId"]
            ec2.create_tags(Resources=[subnet], Tags=[{"Key": "aws-cdk:subnet-type", "Value": kind}])
        yield vpc, ec2, boto3.client("kinesis", region_name="eu-central-1")


@pytest.mark.parametrize(("workers", "fits"), [(100, True), (1000, False)])
def test_a_given_vpc_is_held_to_the_free_addresses_of_its_private_subnets(
        capsys: pytest.CaptureFixture[str], moto_vpc: tuple[str, Any, Any], workers: int, fits: bool) -> None:
    # GIVEN vpc_id naming moto's VPC (502 free private addresses) and moto's Kinesis limits, the raised account else
    vpc, ec2, kinesis = moto_vpc
    aws = RecordedAws("raised", overrides={"ec2": ec2, "kinesis": kinesis})
    # WHEN preflight checks the fleet
    status = main(["preflight", "--cdk-json", str(CDK_JSON), "--workers", str(workers), "-c", f"vpc_id={vpc}"],
                  aws=lambda region, profile: aws)
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith(SUBNET_IPS))
    # THEN the addresses are the private subnets' free ones (the public subnet's not counted) and moto's 6,000 shards
    assert f"502 free in {vpc}'s 2 private subnets" in row and "EC2 DescribeSubnets" in row
    assert "6,000 applied" in out
    # AND 100 workers (208 addresses at the peak, 416 with the margin) fit; 1,000 do not, naming the way out
    assert status == (0 if fits else 2) and ("TOO LOW" not in row) is fits
    if not fits:
        assert (f"error: {SUBNET_IPS}: the fleet needs 1,008 IPs (2,008 during a code rollout), 4,016 with the 2x "
                f"margin, of 502 free in {vpc}'s 2 private subnets: use a vpc_id whose private subnets have more free "
                f"addresses or lower --workers (fleet_workers) / emr_max_vcpu") in err.splitlines()


def test_untagged_subnets_are_private_when_they_map_no_public_ip() -> None:
    # GIVEN subnets of a VPC not made by the CDK (no aws-cdk:subnet-type tag)
    subnets = [{"SubnetId": "a", "MapPublicIpOnLaunch": False}, {"SubnetId": "b", "MapPublicIpOnLaunch": True},
               {"SubnetId": "c"}]
    # WHEN the private ones are picked THEN those that map no public IP on launch are
    assert [s["SubnetId"] for s in private_subnets(subnets)] == ["a", "c"]
