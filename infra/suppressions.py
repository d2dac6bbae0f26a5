"""cdk-nag (v3) acknowledgments. Each names one exact finding (``Rule[Finding]``) on the narrowest construct that
owns it, with the reason it is acceptable here. v3 has no prefix matching: a new kind of finding fails synth.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct

if TYPE_CHECKING:
    from infra.stack import GeoRebalancerStack

IAM4_LAMBDA_BASIC = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
# Action families the CDK grant helpers emit for one named bucket or key (never s3:* or kms:*).
GRANT_ACTION_FAMILIES = (
    "s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:Abort*", "s3:DeleteObject*", "kms:GenerateDataKey*",
    "kms:ReEncrypt*",
)  # fmt: skip


def _ack(scope: IConstruct, finding: str, reason: str) -> None:
    rule = finding if finding.startswith("AwsSolutions::") else f"AwsSolutions::{finding}"
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def _arn_token(stack: Stack, construct: IConstruct) -> str:
    """cdk-nag's rendering of ``Fn::GetAtt [<logical id>, Arn]``: ``<LogicalId.Arn>``."""
    default = construct.node.default_child
    assert isinstance(default, CfnResource)
    return f"<{stack.resolve(default.logical_id)}.Arn>"


def acknowledge_findings(stack: GeoRebalancerStack) -> None:
    config = stack.config
    for family in GRANT_ACTION_FAMILIES:
        _ack(
            stack,
            f"AwsSolutions-IAM5[Action::{family}]",
            f"Emitted by a CDK grant helper (grant_read/grant_put/grant_read_write/grant_encrypt_decrypt) for one named "
            f"bucket or key; '{family}' is the narrowest family covering the multipart, versioned and bucket-key calls.",
        )
    for name, bucket in stack.storage.data_buckets.items():
        _ack(
            stack,
            f"AwsSolutions-IAM5[Resource::{_arn_token(stack, bucket)}/*]",
            f"Objects of the {name} bucket only: object keys are created at run time (window, version, worker, time).",
        )
    _ack(
        stack,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:kinesis:<AWS::Region>:<AWS::AccountId>:stream/{config.geo_stream_prefix}*]",
        f"Per-version geo streams are created and deleted at run time by the deployer; every statement is limited to "
        f"this deployment's '{config.geo_stream_prefix}*' streams (docs/CONTRACTS.md).",
    )
    _ack(
        stack,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:service-deployment/"
        f"{config.prefix}-workers/{config.prefix}-geo-workers/*]",
        "ECS creates a service-deployment id per blue/green deploy at run time; limited to the worker service.",
    )
    _ack(
        stack.workers.task_definition,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/{config.prefix}-workers/*]",
        "A worker sets its own task's scale-in protection (ecs:UpdateTaskProtection/GetTaskProtection); task ids are "
        "created at run time; limited to the worker cluster's tasks.",
    )
    star_owners: list[IConstruct] = [
        stack.partitioner.function, stack.router.function, stack.deployer.function, stack.hooks.function,
        stack.workers.task_definition,
    ]  # fmt: skip
    if stack.aggregation.engine == "glue":
        star_owners.append(stack.aggregation)
    for owner in star_owners:
        _ack(
            owner,
            "AwsSolutions-IAM5[Resource::*]",
            "Only actions without resource-level permissions: X-Ray PutTraceSegments/PutTelemetryRecords (Lambda "
            "tracing), ecs:RegisterTaskDefinition/DescribeTaskDefinition (deployer), ecr:GetAuthorizationToken (task "
            "execution role), cloudwatch:PutMetricData (Glue job, limited by the cloudwatch:namespace condition to Glue).",
        )
    _ack(
        stack,
        IAM4_LAMBDA_BASIC,
        "AWSLambdaBasicExecutionRole only allows creating log streams and putting log events; used by the project's "
        "functions and by the CDK-provided bucket-notification and AwsCustomResource handlers.",
    )
    _ack(
        stack,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
        "Read access to the CDK asset bucket for the Spark job's entry script and code zip; asset keys are content hashes.",
    )
    _ack(
        stack.router.failures,
        "AwsSolutions-SQS3",
        "This queue is itself the on-failure destination of the router's Kinesis event source; it has no further DLQ.",
    )
    _ack(
        stack.workers.task_definition,
        "AwsSolutions-ECS2",
        "The container environment holds only resource names and tuning numbers (docs/CONTRACTS.md), no secrets.",
    )
    aggregation = stack.aggregation
    if aggregation.engine == "glue":
        _ack(
            aggregation,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/*]",
            "Glue names its job log groups itself under /aws-glue/ (per security configuration and role); the job role "
            "may only write there.",
        )
    if aggregation.engine == "emr":
        app_id = stack.resolve(aggregation.application.logical_id)
        _ack(
            aggregation,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:emr-serverless:<AWS::Region>:<AWS::AccountId>:/applications/<{app_id}.ApplicationId>/jobruns/*]",
            "Job run ids are created by StartJobRun at deploy time; limited to this application's runs.",
        )
        _ack(
            aggregation.job_role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:*]",
            "logs:DescribeLogGroups (only) is a list call with no single-group resource; EMR Serverless uses it to "
            "find the job's log group.",
        )
