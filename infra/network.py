"""Network: reuse a VPC by id (context ``vpc_id``) or create one.

A created VPC has public and private-with-egress subnets in two AZs, ``nat_gateways`` NAT gateways (default 2: one
per AZ, so one AZ's outage does not cut the other's egress), free gateway endpoints for S3 and DynamoDB (snapshots,
specs, output, leases) and an interface endpoint for Kinesis (every event, twice). ECR, CloudWatch Logs, STS and the
EMR/Glue APIs go through the NAT: little data, fewer dollars than an endpoint each. VPC flow logs go to CloudWatch Logs.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import GeoConfig
from infra.fleet_size import MAX_AZS, PRIVATE_SUBNET_MASK
from infra.functions import retention


class Network(Construct):
    """``vpc``, ``private_subnets`` (where workers and the Spark job run) and ``security_group`` (egress only)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig) -> None:
        super().__init__(scope, construct_id)
        if config.vpc_id:
            self.vpc: ec2.IVpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=config.vpc_id)
        else:
            vpc = ec2.Vpc(
                self,
                "Vpc",
                max_azs=MAX_AZS,
                nat_gateways=config.nat_gateways,
                subnet_configuration=[
                    ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                    ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                            cidr_mask=PRIVATE_SUBNET_MASK),
                ],
                gateway_endpoints={
                    "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
                    "DynamoDB": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
                },
                restrict_default_security_group=True,
            )
            flow_logs = logs.LogGroup(
                self,
                "FlowLogs",
                retention=retention(config.log_retention_days),
                removal_policy=RemovalPolicy.DESTROY,
            )
            vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
            self.vpc = vpc
        self.private_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.security_group = ec2.SecurityGroup(
            self,
            "WorkloadSg",
            vpc=self.vpc,
            description="Geo Rebalancer workers and Spark job: no inbound, HTTPS egress to AWS APIs",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to AWS APIs")
        if not config.vpc_id:
            self._kinesis_endpoint()

    def _kinesis_endpoint(self) -> None:
        """Kinesis carries every event twice inside the VPC (the Spark job reads the ingest stream, the workers
        their geo streams): through an interface endpoint at 0.01 USD/GB instead of NAT processing at 0.045 USD/GB
        (https://aws.amazon.com/privatelink/pricing/, https://aws.amazon.com/vpc/pricing/). Private DNS makes the
        SDK's default endpoint resolve to it, so nothing else changes; only the workload group may reach it."""
        endpoint_sg = ec2.SecurityGroup(self, "KinesisEndpointSg", vpc=self.vpc, allow_all_outbound=False,
                                        description="Kinesis interface endpoint: HTTPS from the workload group only")
        endpoint_sg.add_ingress_rule(self.security_group, ec2.Port.tcp(443), "HTTPS from workers and the Spark job")
        self.kinesis_endpoint = self.vpc.add_interface_endpoint(
            "Kinesis",
            service=ec2.InterfaceVpcEndpointAwsService.KINESIS_STREAMS,
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            private_dns_enabled=True,
            security_groups=[endpoint_sg],
            open=False,
        )
