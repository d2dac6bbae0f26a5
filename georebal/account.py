"""The account's values of the level quotas (:mod:`geokernel.aws_budget.levels`), read as the account applies them.

==================================  ===================================================================================
quota                               read from
==================================  ===================================================================================
Kinesis shards, on-demand streams   Kinesis ``DescribeLimits``: ``ShardLimit`` (in use: ``OpenShardCount``),
                                    ``OnDemandStreamCountLimit`` (in use: ``OnDemandStreamCount``)
Lambda concurrent executions        Lambda ``GetAccountSettings``: ``AccountLimit.ConcurrentExecutions``; in use: what
                                    other functions reserve (the limit less ``UnreservedConcurrentExecutions``)
private subnets' addresses          a created VPC: its two /20 private subnets (``infra/network.py``); ``vpc_id``:
                                    EC2 ``DescribeSubnets``, the free addresses (``AvailableIpAddressCount``) of its
                                    private subnets
Fargate launches per service        the ECS documentation (the rate is not adjustable and cannot be read)
every other row                     Service Quotas ``GetServiceQuota`` (the applied value); when there is none
                                    (``NoSuchResourceException``), ``GetAWSDefaultServiceQuota``
==================================  ===================================================================================

Notes
-----
* A call that fails (no permission, throttled past the retries, no network) leaves that row *not read*, with the
  error: the verdict is then not a pass.
* ``vpc_id``'s private subnets are the ones tagged ``aws-cdk:subnet-type=Private`` when any subnet of the VPC has
  that tag (what ``Vpc.from_lookup`` reads first); otherwise those that do not map public IPs on launch (an
  approximation of CDK's route-table test).
* The network interfaces already in use are not counted (reading them takes a scan of the account's interfaces).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from geokernel.aws_budget.levels import Have, LevelQuota
from georebal.aws import Aws
from infra.config import GeoConfig
from infra.fleet_size import MAX_AZS, PRIVATE_SUBNET_MASK, private_subnet_ips

CDK_SUBNET_TYPE = "aws-cdk:subnet-type"


def read_account(aws: Aws, config: GeoConfig, quotas: Iterable[LevelQuota]) -> dict[str, Have]:
    """The account's :class:`~geokernel.aws_budget.levels.Have` of each of ``quotas``, keyed by the quota's key."""
    reader = _Reader(aws, config)
    return {q.key: reader.have(q) for q in quotas}


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


class _Reader:
    """Reads each quota once; ``DescribeLimits`` is asked once for both Kinesis rows."""

    def __init__(self, aws: Aws, config: GeoConfig) -> None:
        self.aws, self.config = aws, config
        self._limits: dict[str, Any] | None = None

    def have(self, quota: LevelQuota) -> Have:
        try:
            return self._read(quota)
        except (ClientError, BotoCoreError) as exc:
            return Have(None, "", error=_reason(exc), via=self._via(quota))

    def _via(self, quota: LevelQuota) -> str:
        return {"kinesis.shards": "Kinesis DescribeLimits", "kinesis.on_demand_streams": "Kinesis DescribeLimits",
                "lambda.concurrent_executions": "Lambda GetAccountSettings",
                "vpc.private_subnet_ips": "EC2 DescribeSubnets"}.get(quota.key, "Service Quotas")

    def _read(self, quota: LevelQuota) -> Have:
        if quota.key == "kinesis.shards":
            limits = self._kinesis()
            return Have(limits["ShardLimit"], "applied", used=limits["OpenShardCount"], via="Kinesis DescribeLimits")
        if quota.key == "kinesis.on_demand_streams":
            limits = self._kinesis()
            return Have(limits["OnDemandStreamCountLimit"], "applied", used=limits["OnDemandStreamCount"],
                        via="Kinesis DescribeLimits")
        if quota.key == "lambda.concurrent_executions":
            limit = self.aws.client("lambda").get_account_settings()["AccountLimit"]
            total = limit["ConcurrentExecutions"]
            return Have(total, "applied", used=total - limit["UnreservedConcurrentExecutions"],
                        via="Lambda GetAccountSettings")
        if quota.key == "vpc.private_subnet_ips":
            return self._subnets()
        if quota.quota_code is None:
            return Have(quota.default, "documented", via="AWS documentation (no value to read)")
        return self._service_quota(quota)

    def _kinesis(self) -> dict[str, Any]:
        if self._limits is None:
            self._limits = dict(self.aws.client("kinesis").describe_limits())
        return self._limits

    def _service_quota(self, quota: LevelQuota) -> Have:
        client = self.aws.client("service-quotas")
        ask = {"ServiceCode": quota.service_code, "QuotaCode": quota.quota_code}
        try:
            return Have(client.get_service_quota(**ask)["Quota"]["Value"], "applied", via="Service Quotas")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                raise
        value = client.get_aws_default_service_quota(**ask)["Quota"]["Value"]
        return Have(value, "AWS default", via="Service Quotas (no applied value)")

    def _subnets(self) -> Have:
        vpc_id = self.config.vpc_id
        if vpc_id is None:
            return Have(private_subnet_ips(), f"in {MAX_AZS} new /{PRIVATE_SUBNET_MASK} subnets",
                        via="the stack's VPC (infra/network.py)")
        ec2, subnets, token = self.aws.client("ec2"), [], None
        while True:
            page = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}],
                                        **({"NextToken": token} if token else {}))
            subnets += page.get("Subnets", [])
            token = page.get("NextToken")
            if not token:
                break
        private = private_subnets(subnets)
        if not private:
            return Have(None, "", error=f"no private subnet in {vpc_id!r} ({len(subnets)} subnets)",
                        via="EC2 DescribeSubnets")
        free = sum(int(s.get("AvailableIpAddressCount", 0)) for s in private)
        return Have(free, f"free in {vpc_id}'s {len(private)} private subnets", via="EC2 DescribeSubnets")


def private_subnets(subnets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The private ones of a VPC's ``subnets`` (``DescribeSubnets`` items; see the module Notes)."""
    def kind(subnet: dict[str, Any]) -> str | None:
        return next((t.get("Value") for t in subnet.get("Tags", []) if t.get("Key") == CDK_SUBNET_TYPE), None)

    if any(kind(s) is not None for s in subnets):
        return [s for s in subnets if kind(s) == "Private"]
    return [s for s in subnets if not s.get("MapPublicIpOnLaunch", False)]
