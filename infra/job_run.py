"""The EMR Serverless streaming job run as a custom resource that replaces a run by resuming it.

``Custom::EmrServerlessStreamingJobRun``: a CDK provider framework whose ``onEvent`` is
``lambdas/jobrun/handler.py`` (a :class:`~infra.functions.LambdaKit` function). On create and on every change of the
run's request (the job's code, its arguments) it cancels the running run of that name, waits until it has ended
and starts the new one, which resumes from the same checkpoint (the location is keyed by the query's shape, not by
the code: :func:`infra.aggregation.job_settings`); on delete it cancels its run. An ``AwsCustomResource`` cannot do
that: one SDK call per event, so an update started the new run before CloudFormation cancelled the old one in its
clean-up, and the two could not share a checkpoint.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra import assets
from infra.functions import LambdaKit

RESOURCE_TYPE = "Custom::EmrServerlessStreamingJobRun"
#: The replaced run's grace period to stop its query (EMR Serverless accepts 15-1800 s) and the wait for it to end;
#: both within the handler's 14 minutes and the provider framework's 15.
SHUTDOWN_GRACE_S = 120
STOP_TIMEOUT_S = 600


class EmrStreamingJobRun(Construct):
    """``function`` (the handler), ``provider`` and ``resource``; :attr:`job_run_id` is the running run's id."""

    def __init__(self, scope: Construct, construct_id: str, *, kit: LambdaKit, application_id: str,
                 job_role: iam.IRole, request: dict[str, Any], log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.function = kit.function(
            self, "Handler", entry=assets.JOB_RUN_HANDLER, environment={}, timeout=Duration.minutes(14),
            description="Streaming job run: cancel the running run, wait until it ended, start its successor "
                        "on the same checkpoint",
        )
        application_arn = stack.format_arn(service="emr-serverless", resource="/applications",
                                           resource_name=application_id)
        job_runs = stack.format_arn(service="emr-serverless", resource="/applications",
                                    resource_name=f"{application_id}/jobruns/*")
        for statement in (
            iam.PolicyStatement(actions=["emr-serverless:StartJobRun", "emr-serverless:ListJobRuns"],
                                resources=[application_arn]),
            iam.PolicyStatement(actions=["emr-serverless:CancelJobRun", "emr-serverless:GetJobRun"],
                                resources=[job_runs]),
            iam.PolicyStatement(actions=["iam:PassRole"], resources=[job_role.role_arn],
                                conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}}),
        ):
            self.function.add_to_role_policy(statement)
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.function, log_group=logs.LogGroup(
            self, "ProviderLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY))
        self.resource = CustomResource(
            self, "Resource", service_token=self.provider.service_token, resource_type=RESOURCE_TYPE,
            properties={"StartJobRun": stack.to_json_string(request), "ShutdownGracePeriodSeconds": str(SHUTDOWN_GRACE_S),
                        "StopTimeoutSeconds": str(STOP_TIMEOUT_S)},
        )
        self.job_run_id = self.resource.get_att_string("JobRunId")
