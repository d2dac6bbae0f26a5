"""cdk-nag (v3) acknowledgments. Each names one exact finding (``Rule[Finding]``) on the narrowest construct that
owns it, with the reason it is acceptable here. v3 has no prefix matching: a new kind of finding fails synth.

The widest scope is the :class:`~infra.rebalancer.GeoRebalancer` construct, plus the stack-level singletons CDK added
for it (``stack_level``: bucket-notification and custom-resource handlers): embedded in a stack of yours, nothing here
acknowledges a finding of your own resources.

checkov acknowledgments (:class:`CheckovSkips`): resource ``Metadata.checkov.skip`` entries ``{id, comment}``, one
per check and resource kind, with the reason; ``scripts/synth-check`` fails on any checkov finding not skipped so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Acknowledgment, ArnFormat, Aspects, CfnResource, IAspect, Stack, Validations
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.stream import stream_manifest_key
from geokernel.contracts.surge import SIGNAL_PREFIX
from infra.aggregation import AggregationJob, EmrServerlessAggregation
from infra.config import GeoConfig
from infra.storage import Storage

IAM4_LAMBDA_BASIC = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
# Action families the CDK grant helpers emit for one named bucket or key (never s3:* or kms:*).
GRANT_ACTION_FAMILIES = (
    "s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:Abort*", "s3:DeleteObject*", "kms:GenerateDataKey*",
    "kms:ReEncrypt*",
)  # fmt: skip


@dataclass(frozen=True)
class Ack:
    """One acknowledged cdk-nag finding: the construct path it is scoped to, the rule id, the reason."""

    path: str
    rule: str
    reason: str


ACK_METADATA = "geo-rebalancer:acknowledgement"  # stack metadata type (cloud assembly manifest, not the template)


def _ack(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge ``finding`` on ``scope`` and record it as stack metadata: the cloud assembly's manifest and
    :func:`write_acknowledgements` list it. Not in the template: cdk-nag's CloudFormation metadata for the
    acknowledgements was 79 % of its bytes."""
    rule = finding if finding.startswith("AwsSolutions::") else f"AwsSolutions::{finding}"
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
    Stack.of(scope).node.add_metadata(ACK_METADATA, asdict(Ack(scope.node.path, rule, reason)))


def acknowledgements(stack: Stack) -> list[Ack]:
    """Every finding :func:`acknowledge_findings` acknowledged in ``stack``, in order."""
    return [Ack(**entry.data) for entry in stack.node.metadata if entry.type == ACK_METADATA]


def write_acknowledgements(stack: Stack, outdir: str) -> Path:
    """Write ``<outdir>/<stack>.acknowledgements.json`` (path, rule, reason per acknowledgement) beside the
    template, where ``scripts/synth-check`` reports them; return the file."""
    out = Path(outdir) / f"{stack.artifact_id}.acknowledgements.json"
    out.write_text(json.dumps([asdict(a) for a in acknowledgements(stack)], indent=1) + "\n", encoding="utf-8")
    return out


def _arn_token(stack: Stack, construct: IConstruct) -> str:
    """cdk-nag's rendering of ``Fn::GetAtt [<logical id>, Arn]``: ``<LogicalId.Arn>``."""
    default = construct.node.default_child
    assert isinstance(default, CfnResource)
    return f"<{stack.resolve(default.logical_id)}.Arn>"


def _bucket_arn(stack: Stack, bucket: s3.IBucket) -> str:
    """cdk-nag's rendering of a bucket's ARN: ``<LogicalId.Arn>`` for one of the stack's, the ARN with its pseudo
    parameters as ``<AWS::Partition>`` for one imported by name or ARN (a bucket of your own)."""
    return _nag_text(stack.resolve(bucket.bucket_arn))


def _arn(stack: Stack, service: str, resource: str, name: str,
         arn_format: ArnFormat = ArnFormat.SLASH_RESOURCE_NAME) -> str:
    """cdk-nag's rendering of ``stack.format_arn(...)``, as the grants build it: pseudo parameters as
    ``<AWS::Region>`` in an environment-agnostic stack, the account, region and partition themselves in a stack with
    a concrete environment (``enablePartitionLiterals``)."""
    return _nag_text(stack.resolve(stack.format_arn(service=service, resource=resource, resource_name=name,
                                                   arn_format=arn_format)))


def _nag_text(value: Any) -> str:
    """An intrinsic as cdk-nag writes it in a finding: ``Ref`` -> ``<Id>``, ``Fn::GetAtt`` -> ``<Id.Attr>``,
    ``Fn::Join`` joined."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_nag_text(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<{'.'.join(value['Fn::GetAtt'])}>"
    return str(value)


LOG_GROUP_SKIPS = (
    ("CKV_AWS_158", "Operational logs only, encrypted at rest by CloudWatch Logs; event payloads that fail go to the "
                    "KMS-encrypted quarantine bucket, not to the logs."),
)
FUNCTION_SKIPS = (
    ("CKV_AWS_117", "The functions call only AWS APIs (S3, DynamoDB, Kinesis, ECS); outside a VPC they need no NAT or "
                    "interface endpoints and start faster."),
    ("CKV_AWS_115", "Concurrency is bounded by the event sources (router: shards x parallelization factor) and the "
                    "control writes are conditional (optimistic locks); reserving capacity would take it from the "
                    "account's pool."),
    ("CKV_AWS_173", "The environment holds resource names and tuning numbers only (docs/CONTRACTS.md), no secrets; "
                    "Lambda encrypts it at rest."),
)
NO_DLQ_SKIP = ("CKV_AWS_116", "Not invoked asynchronously by a source that would drop a failed event: the router's "
                              "Kinesis source has an on-failure queue, ECS calls the hooks synchronously, CloudFormation "
                              "calls the custom-resource handlers (the CDK's and the geo-stream teardown) and fails "
                              "the stack operation when one never answers; the S3-triggered functions have a DLQ.")
ACCESS_LOG_BUCKET_SKIPS = (
    ("CKV_AWS_21", "The server-access-logs bucket holds S3's delivery logs (expired after 90 days); versioning them "
                   "protects no data of the system."),
    ("CKV_AWS_18", "The server-access-logs bucket is the access-log target itself; logging it to itself would loop."),
)


@jsii.implements(IAspect)
class CheckovSkips:
    """Adds ``Metadata.checkov.skip`` to the log groups, functions and the access-logs bucket (see the constants)."""

    def __init__(self, access_logs: IConstruct) -> None:
        default = access_logs.node.default_child
        assert default is not None
        self._access_logs_path = default.node.path  # jsii hands out a new proxy per visit: compare paths

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, CfnResource):
            return
        skips: tuple[tuple[str, str], ...] = ()
        if node.cfn_resource_type == "AWS::Logs::LogGroup":
            skips = LOG_GROUP_SKIPS
        elif node.cfn_resource_type == "AWS::Lambda::Function":
            has_dlq = isinstance(node, lambda_.CfnFunction) and node.dead_letter_config is not None
            skips = FUNCTION_SKIPS if has_dlq else (*FUNCTION_SKIPS, NO_DLQ_SKIP)
        elif node.node.path == self._access_logs_path:
            skips = ACCESS_LOG_BUCKET_SKIPS
        if skips:
            node.add_metadata("checkov", {"skip": [{"id": i, "comment": c} for i, c in skips]})


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingOwners:
    """The constructs of the stack that own an acknowledged finding (the narrowest scope of each)."""

    config: GeoConfig
    storage: Storage
    # dead-letter queues of the S3-triggered functions (partitioner, deployer)
    s3_dead_letters: tuple[sqs.IQueue, ...]
    router_failures: sqs.IQueue
    # the project's functions: partitioner, router, deployer, hooks, teardown (X-Ray, AWSLambdaBasicExecutionRole)
    functions: tuple[lambda_.IFunction, ...]
    worker_task: ecs.TaskDefinition
    aggregation: AggregationJob


def acknowledge_findings(scope: IConstruct, owners: FindingOwners, *, stack_level: Sequence[IConstruct] = ()) -> None:
    """Acknowledge every cdk-nag finding ``scope`` (the deployment's construct) and the ``stack_level`` constructs
    CDK added for it are known to have (each with its reason) and add the checkov skips to them; the order is the
    order of ``<stack>.acknowledgements.json``."""
    for each in (scope, *stack_level):
        Aspects.of(each).add(CheckovSkips(owners.storage.access_logs))
    _ack_s3_dead_letter_queues(owners)
    _ack_grant_helpers(scope, owners)
    _ack_run_time_names(scope, owners)
    _ack_unscoped_actions(scope, owners, stack_level)
    _ack_router_failure_queue(owners)
    _ack_container_environment(owners)
    _ack_aggregation(Stack.of(scope), owners.aggregation)


def _ack_s3_dead_letter_queues(owners: FindingOwners) -> None:
    for queue in owners.s3_dead_letters:
        _ack(queue, "AwsSolutions-SQS3",
             "This queue is itself the dead-letter queue of an S3-triggered function; it has no further DLQ.")


def _ack_grant_helpers(scope: IConstruct, owners: FindingOwners) -> None:
    """The wildcards of CDK's grant helpers: action families, and the objects of one named bucket."""
    stack = Stack.of(scope)
    for family in GRANT_ACTION_FAMILIES:
        _ack(
            scope,
            f"AwsSolutions-IAM5[Action::{family}]",
            f"Emitted by a CDK grant helper (grant_read/grant_put/grant_read_write/grant_encrypt_decrypt) for one named "
            f"bucket or key; '{family}' is the narrowest family covering the multipart, versioned and bucket-key calls.",
        )
    for name, bucket in owners.storage.data_buckets.items():
        _ack(
            scope,
            f"AwsSolutions-IAM5[Resource::{_bucket_arn(stack, bucket)}/*]",
            f"Objects of the {name} bucket only: object keys are created at run time (window, version, worker, time).",
        )
    specs = _bucket_arn(stack, owners.storage.specs)
    for key, what in ((spec_key(0), "new spec versions (partitioner, deployer)"),
                      (stream_manifest_key(0), "geo stream manifests (deployer, hooks)")):
        _ack(
            scope,
            f"AwsSolutions-IAM5[Resource::{specs}/{key.split('/')[0]}/*]",
            f"Puts of {what} under one fixed prefix of the specs bucket, one key per version named at run time; no "
            "delete (infra/grants.py).",
        )
    _ack(
        scope,
        f"AwsSolutions-IAM5[Resource::{specs}/{SIGNAL_PREFIX}*]",
        "The routers' surge signals, one key per spec version, worker and cell named at run time, put once "
        "(If-None-Match) under one fixed prefix of the specs bucket; no delete (docs/CONTRACTS.md 'Surge signal').",
    )


def _ack_run_time_names(scope: IConstruct, owners: FindingOwners) -> None:
    """Resources named at run time under a fixed prefix: geo streams, worker tasks."""
    config, stack = owners.config, Stack.of(scope)
    _ack(
        scope,
        f"AwsSolutions-IAM5[Resource::{_arn(stack, 'kinesis', 'stream', f'{config.geo_stream_prefix}*')}]",
        f"Per-version geo streams are created and deleted at run time by the deployer; every statement is limited to "
        f"this deployment's '{config.geo_stream_prefix}*' streams (docs/CONTRACTS.md).",
    )
    if config.state_handoff:  # infra/grants.py _grant_state_handoff: objects under one fixed prefix each
        _ack(
            scope,
            f"AwsSolutions-IAM5[Resource::{_bucket_arn(stack, owners.storage.specs)}/router-ledger/*]",
            "The router's ledger objects, one per ingest shard named at run time (docs/CONTRACTS.md 'Router ledger').",
        )
        _ack(
            scope,
            f"AwsSolutions-IAM5[Resource::{_bucket_arn(stack, owners.storage.output)}/state/*]",
            "Slot state objects, one per slot and version named at run time (docs/CONTRACTS.md 'Slot states').",
        )
    _ack(
        owners.worker_task,
        f"AwsSolutions-IAM5[Resource::{_arn(stack, 'ecs', 'task', f'{config.prefix}-workers/*')}]",
        "A worker sets its own task's scale-in protection (ecs:UpdateTaskProtection/GetTaskProtection); task ids are "
        "created at run time; limited to the worker cluster's tasks.",
    )


def _ack_unscoped_actions(scope: IConstruct, owners: FindingOwners, stack_level: Sequence[IConstruct]) -> None:
    """Actions without resource-level permissions, and AWS's managed Lambda policy."""
    star_owners: list[IConstruct] = [*owners.functions, owners.worker_task]
    if owners.aggregation.engine == "glue":
        star_owners.append(owners.aggregation)
    for owner in star_owners:
        _ack(
            owner,
            "AwsSolutions-IAM5[Resource::*]",
            "Only actions without resource-level permissions: X-Ray PutTraceSegments/PutTelemetryRecords (Lambda "
            "tracing), ecs:RegisterTaskDefinition/DescribeTaskDefinition (deployer, hooks), kinesis:DescribeLimits (deployer: "
            "the account's shard quota), kinesis:ListStreams (geo-stream teardown: stream names only), "
            "ecr:GetAuthorizationToken (task "
            "execution role), cloudwatch:PutMetricData (Glue job, limited by the cloudwatch:namespace condition to Glue).",
        )
    for owner in (scope, *stack_level):
        _ack(
            owner,
            IAM4_LAMBDA_BASIC,
            "AWSLambdaBasicExecutionRole only allows creating log streams and putting log events; used by the "
            "project's functions and by the CDK-provided bucket-notification, AwsCustomResource and provider-framework "
            "handlers.",
        )


def _ack_router_failure_queue(owners: FindingOwners) -> None:
    _ack(
        owners.router_failures,
        "AwsSolutions-SQS3",
        "This queue is itself the on-failure destination of the router's Kinesis event source; it has no further DLQ.",
    )


def _ack_container_environment(owners: FindingOwners) -> None:
    _ack(
        owners.worker_task,
        "AwsSolutions-ECS2",
        "The container environment holds only resource names and tuning numbers (docs/CONTRACTS.md), no secrets.",
    )


def _ack_aggregation(stack: Stack, aggregation: AggregationJob) -> None:
    """The log groups and job runs each engine names at run time."""
    if aggregation.engine == "glue":
        _ack(
            aggregation,
            f"AwsSolutions-IAM5[Resource::{_arn(stack, 'logs', 'log-group', '/aws-glue/*', ArnFormat.COLON_RESOURCE_NAME)}]",
            "Glue names its job log groups itself under /aws-glue/ (per security configuration and role); the job role "
            "may only write there.",
        )
    if isinstance(aggregation, EmrServerlessAggregation):
        job_runs = f"{aggregation.application.attr_application_id}/jobruns/*"
        _ack(
            aggregation,
            f"AwsSolutions-IAM5[Resource::{_arn(stack, 'emr-serverless', '/applications', job_runs)}]",
            "Job run ids are created by StartJobRun at deploy time; limited to this application's runs.",
        )
        _ack(
            aggregation.job_run.function,
            "AwsSolutions-IAM5[Resource::*]",
            "Only X-Ray PutTraceSegments/PutTelemetryRecords (Lambda tracing), which have no resource-level permissions.",
        )
        _ack(
            aggregation.job_run.provider,
            f"AwsSolutions-IAM5[Resource::{_arn_token(stack, aggregation.job_run.function)}:*]",
            "The CDK provider framework invokes its one onEvent handler (lambda:InvokeFunction on that function's "
            "versions and aliases).",
        )
        _ack(
            aggregation.job_role,
            f"AwsSolutions-IAM5[Resource::{_arn(stack, 'logs', 'log-group', '*', ArnFormat.COLON_RESOURCE_NAME)}]",
            "logs:DescribeLogGroups (only) is a list call with no single-group resource; EMR Serverless uses it to "
            "find the job's log group.",
        )
