"""Per-version geo streams ``<prefix>-geo-v<version>`` (docs/CONTRACTS.md): created by the deployer, written by
the router, read by the workers, deleted after blue retires. They are not CloudFormation resources; this
construct owns their KMS key (server-side encryption, passed as ``GEO_STREAM_KMS_KEY``) and the scoped
permissions for each role (every statement is limited to the ``<prefix>-geo-v*`` streams).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import GeoConfig

# AddTagsToStream: CreateStream with Tags (the deployment tag) needs it too; ListTagsForStream reads that tag back
# ("Actions defined by Amazon Kinesis Data Streams",
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesisdatastreams.html)
MANAGE_ACTIONS = (
    "kinesis:CreateStream", "kinesis:DeleteStream", "kinesis:DescribeStream", "kinesis:DescribeStreamSummary",
    "kinesis:ListShards", "kinesis:AddTagsToStream", "kinesis:ListTagsForStream", "kinesis:StartStreamEncryption",
)  # fmt: skip
WRITE_ACTIONS = ("kinesis:PutRecord", "kinesis:PutRecords", "kinesis:DescribeStreamSummary", "kinesis:ListShards")
READ_ACTIONS = (
    "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:DescribeStream", "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
)  # fmt: skip


class GeoStreams(Construct):
    """``key`` and ``stream_arns`` (the ARN pattern of every geo stream of this deployment)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(self, "Key", description=f"{config.prefix}: per-version geo streams", enable_key_rotation=True)
        self.stream_arns = Stack.of(self).format_arn(
            service="kinesis",
            resource="stream",
            resource_name=f"{config.geo_stream_prefix}*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def _grant(self, grantee: iam.IGrantable, actions: tuple[str, ...]) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[self.stream_arns])
        )

    def grant_manage(self, grantee: iam.IGrantable) -> None:
        """Create (encrypted with ``key``), describe and delete geo streams."""
        self._grant(grantee, MANAGE_ACTIONS)
        self.key.grant(grantee, "kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt")

    def grant_shard_quota(self, grantee: iam.IGrantable) -> None:
        """``kinesis:DescribeLimits``: the account's shard quota and open shards, read before a new geo stream is
        created (lambdas/runtime/kinesis.py ``shard_quota``). An account-level action: "Actions defined by Amazon
        Kinesis Data Streams" lists no resource type for it
        (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesisdatastreams.html),
        so it takes Resource "*"; it reads two numbers and changes nothing."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["kinesis:DescribeLimits"], resources=["*"])
        )

    def grant_teardown(self, grantee: iam.IGrantable) -> None:
        """List the account's streams and delete this deployment's geo streams (lambdas/teardown/handler.py).
        ListStreams has no resource type in the service authorization reference (it lists names, and reads and
        changes nothing): Resource "*"; DeleteStream only on the ``<prefix>-geo-v*`` streams."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["kinesis:ListStreams"], resources=["*"])
        )
        self._grant(grantee, ("kinesis:DeleteStream",))

    def grant_write(self, grantee: iam.IGrantable) -> None:
        self._grant(grantee, WRITE_ACTIONS)
        self.key.grant(grantee, "kms:GenerateDataKey")

    def grant_read(self, grantee: iam.IGrantable) -> None:
        self._grant(grantee, READ_ACTIONS)
        self.key.grant_decrypt(grantee)
