"""The aggregation engine (context ``engine``): a Spark Structured Streaming job that reads the ingest stream and
writes windowed load snapshots (docs/CONTRACTS.md "Load snapshot").

* ``emr`` (default): an EMR Serverless application (release ``emr-spark-8.0.0``, Spark 4.0) in the private
  subnets, a job role, and a custom resource (:class:`infra.job_run.EmrStreamingJobRun`) that starts the streaming
  job run (``mode=STREAMING``, entry point ``glue_jobs/emr_entry.py``) on create; when the job's code or arguments
  change it cancels the running run, waits until it has ended and starts the new one, which **resumes from the same
  checkpoint**; it cancels the run on delete.
* ``glue``: a Glue 5.1 streaming job (``glue_jobs/glue_entry.py``) with a security configuration (KMS for S3,
  CloudWatch Logs and bookmarks) and a custom resource that starts and stops its run (an AwsCustomResource).

Both engines get the same settings (:func:`job_settings`), spelled as each entry point parses them.

**Checkpoint location.** EMR: ``<checkpoints>/emr/<shape>/<stream name>/``, where ``<shape>`` hashes only what the
checkpoint's contents depend on (:func:`checkpoint_shape`): the fine zoom and the window length of the open windows
kept under it (``glue_jobs.window_state``), and the reader. A code change or another setting (grid zoom, refine
threshold, watermark, event field mapping, trigger) keeps the location, so the replacement run resumes from the
committed offsets and open windows; Spark allows such changes between restarts from one checkpoint (a
``foreachBatch`` body and trigger may change; a changed source or stateful operation may not: "Recovery Semantics
after Changes in a Streaming Query",
https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html#recovery-semantics-after-changes-in-a-streaming-query).
A change of the shape (or another stream) gets a location of its own instead of a checkpoint Spark, the connector or
the window state would refuse or misread; that run starts fresh from the stream's tip and its first windows are
written partial (CONTRACTS.md "Load snapshot"). Glue: ``<checkpoints>/glue/<run key>/``, the run key hashing the
code and every setting as before: Glue reads a run's arguments when it starts, its custom resource starts a new run
only when ``--checkpoint`` changes, and it starts it before CloudFormation stops the old one, so two runs must not
share a checkpoint there. Glue's readers start at the stream's oldest record, so a fresh run replays what the
stream retains (complete windows, stale to the partitioner).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra import assets
from infra.config import EMR_RELEASE, GeoConfig
from infra.functions import LambdaKit, retention
from infra.job_run import EmrStreamingJobRun

# The Kinesis connector bundled with EMR Serverless releases (Structured Streaming source "aws-kinesis").
EMR_KINESIS_CONNECTOR = "/usr/share/aws/kinesis/spark-sql-kinesis/lib/spark-streaming-sql-kinesis-connector.jar"


@dataclass(frozen=True, kw_only=True)
class JobInputs:
    """What the Spark job reads and writes."""

    stream: kinesis.IStream
    snapshots: s3.IBucket
    quarantine: s3.IBucket
    checkpoints: s3.IBucket
    costs: s3.IBucket


def checkpoint_shape(config: GeoConfig, *, engine: str) -> list[object]:
    """What a checkpoint's contents depend on (the EMR location's key, see the module docstring): the engine, the
    zoom of the fine cells and the window length of the open windows (``glue_jobs.window_state``), and the reader
    (``glue_kinesis_connector_jar``: another source's offsets)."""
    return [engine, config.zoom, config.window_s, config.glue_kinesis_connector_jar]


def job_settings(config: GeoConfig, inputs: JobInputs, *, engine: str, code_hash: str) -> dict[str, str]:
    """What both entry points are told (names as in ``glue_jobs/emr_entry.py``, ``-`` for ``_``).

    ``event-fields`` (the event field mapping's JSON) only when it is not the default, and ``kinesis-connector-jar``
    only when set (engine=glue). ``checkpoint``: see the module docstring (EMR keyed by :func:`checkpoint_shape` and
    the stream, Glue by the code and every setting).
    """
    keyed: list[object] = [engine, code_hash, config.grid_zoom, config.zoom, config.refine_events, config.window_s,
                           config.watermark_s]  # fmt: skip
    mapped = {} if config.event_fields.is_default else {"event-fields": config.event_fields.to_json()}
    if config.glue_kinesis_connector_jar:  # another reader of the stream: its offsets need a checkpoint of their own
        mapped["kinesis-connector-jar"] = config.glue_kinesis_connector_jar
    if engine == "emr":
        shape = hashlib.sha256(json.dumps(checkpoint_shape(config, engine=engine)).encode()).hexdigest()[:12]
        checkpoint = f"s3://{inputs.checkpoints.bucket_name}/emr/{shape}/{inputs.stream.stream_name}/"
    else:
        run_key = hashlib.sha256(json.dumps(keyed + list(mapped.values())).encode()).hexdigest()[:12]
        checkpoint = f"s3://{inputs.checkpoints.bucket_name}/{engine}/{run_key}/"
    return {
        "stream-name": inputs.stream.stream_name,
        "stream-arn": inputs.stream.stream_arn,
        "region": Aws.REGION,
        "snapshots": f"s3://{inputs.snapshots.bucket_name}",
        "checkpoint": checkpoint,
        "quarantine": f"s3://{inputs.quarantine.bucket_name}",
        "costs": f"s3://{inputs.costs.bucket_name}/costs/",
        "zoom": str(config.zoom),
        "grid-zoom": str(config.grid_zoom),
        "refine-events": str(config.refine_events),
        "window": f"{config.window_s}s",
        "watermark": f"{config.watermark_s}s",
    } | mapped


def emr_arguments(settings: dict[str, str]) -> list[str]:
    """``entryPointArguments`` of ``glue_jobs/emr_entry.py`` (argparse flags). ``--starting-position LATEST`` applies
    to a fresh checkpoint only (a first deploy, a new shape): a replacement run resumes from its checkpoint."""
    names = ("stream-name", "region", "snapshots", "checkpoint", "quarantine", "costs", "zoom", "grid-zoom",
             "refine-events", "window", "watermark", "event-fields")  # fmt: skip
    return [*(v for name in names if name in settings for v in (f"--{name}", settings[name])),
            "--starting-position", "LATEST"]


def glue_arguments(settings: dict[str, str]) -> dict[str, str]:
    """Job arguments of ``glue_jobs/glue_entry.py`` (``--key value`` with underscores)."""
    names = ("stream-arn", "snapshots", "checkpoint", "quarantine", "costs", "zoom", "grid-zoom", "refine-events",
             "window", "watermark", "event-fields", "kinesis-connector-jar")  # fmt: skip
    return {f"--{name.replace('-', '_')}": settings[name] for name in names if name in settings}


def _job_role(scope: Construct, principal: str, description: str) -> iam.Role:
    return iam.Role(scope, "JobRole", assumed_by=iam.ServicePrincipal(principal), description=description)


class EmrServerlessAggregation(Construct):
    """``application``, ``job_role``, ``log_group``, ``job_run`` (:class:`~infra.job_run.EmrStreamingJobRun`),
    ``settings``, ``arguments``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GeoConfig,
        inputs: JobInputs,
        subnets: list[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        kit: LambdaKit,
    ) -> None:
        super().__init__(scope, construct_id)
        self.engine = "emr"
        self.job_role = _job_role(self, "emr-serverless.amazonaws.com", "EMR Serverless aggregation job")
        self.entry = assets.script_asset(self, "Entry", assets.EMR_ENTRY)
        self.code = assets.spark_code_asset(self, "Code")
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config.log_retention_days), removal_policy=RemovalPolicy.DESTROY
        )
        self.application = self._application(config, subnets, security_group)
        self.settings = job_settings(config, inputs, engine="emr", code_hash=self.code.asset_hash + self.entry.asset_hash)
        self.arguments = emr_arguments(self.settings)
        # a construct id of its own: the job-run resource of an AwsCustomResource (id "JobRun") had another service
        # token, which CloudFormation does not let an update change; the first deploy of this one cancels that run
        self.job_run = EmrStreamingJobRun(self, "StreamingRun", kit=kit, application_id=self.application.attr_application_id,
                                          job_role=self.job_role, request=self._start_request(config),
                                          log_retention=retention(config.log_retention_days))
        self.job_run.node.add_dependency(self.job_role)
        self._grant_job_role()

    def _application(
        self, config: GeoConfig, subnets: list[ec2.ISubnet], security_group: ec2.ISecurityGroup
    ) -> emrs.CfnApplication:
        """The Spark application in the private subnets: starts on a job run, stops after 15 idle minutes.

        EMR Serverless runs only in some AZ IDs of each region
        (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/endpoints-quotas.html). Synth cannot check
        the subnets: a new VPC's zones are tokens and a looked-up VPC's carry zone names, whose IDs differ per
        account; docs/DEPLOY.md "Before the first deploy" says how to check them first."""
        return emrs.CfnApplication(
            self,
            "Application",
            name=f"{config.prefix}-aggregation",
            release_label=EMR_RELEASE,
            type="SPARK",
            architecture="ARM64",
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=15
            ),
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=f"{config.emr_max_vcpu} vCPU", memory=f"{config.emr_max_memory_gb} GB"
            ),
            network_configuration=emrs.CfnApplication.NetworkConfigurationProperty(
                subnet_ids=[subnet.subnet_id for subnet in subnets],
                security_group_ids=[security_group.security_group_id],
            ),
        )

    def _start_request(self, config: GeoConfig) -> dict[str, object]:
        """The ``StartJobRun`` request of the streaming job (``mode=STREAMING``), logging to :attr:`log_group`."""
        submit = (
            f"--jars {EMR_KINESIS_CONNECTOR} --conf spark.submit.pyFiles={self.code.s3_object_url} "
            "--conf spark.executor.cores=2 --conf spark.executor.memory=4g --conf spark.driver.cores=1 "
            "--conf spark.driver.memory=2g --conf spark.sql.shuffle.partitions=8"
        )
        return {
            "applicationId": self.application.attr_application_id,
            "executionRoleArn": self.job_role.role_arn,
            "name": f"{config.prefix}-aggregation",
            "mode": "STREAMING",
            "retryPolicy": {"maxFailedAttemptsPerHour": 5},
            "jobDriver": {
                "sparkSubmit": {
                    "entryPoint": self.entry.s3_object_url,
                    "entryPointArguments": self.arguments,
                    "sparkSubmitParameters": submit,
                }
            },
            "configurationOverrides": {
                "monitoringConfiguration": {
                    "cloudWatchLoggingConfiguration": {"enabled": True, "logGroupName": self.log_group.log_group_name}
                }
            },
        }

    def _grant_job_role(self) -> None:
        """The job writes its log group and reads its entry script and code zip (those two objects only)."""
        self.log_group.grant_write(self.job_role)
        # EMR Serverless's CloudWatch logging also describes the group and its streams before writing.
        self.job_role.add_to_policy(
            iam.PolicyStatement(actions=["logs:DescribeLogStreams"], resources=[self.log_group.log_group_arn])
        )
        self.job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:DescribeLogGroups"],
                resources=[
                    Stack.of(self).format_arn(
                        service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                    )
                ],
            )
        )
        # Its own two asset objects only: Asset.grant_read would allow every object of the account's CDK assets
        # bucket (other stacks' code and templates). The bucket-level List*/GetBucket* of the per-key grant lists
        # keys (content hashes) and reads none; S3 answers a missing key with 404 instead of 403 with it.
        for asset in (self.entry, self.code):
            asset.bucket.grant_read(self.job_role, asset.s3_object_key)


class GlueStreamingAggregation(Construct):
    """``job`` (Glue 5.1 streaming), ``job_role``, ``security_configuration``, ``job_run``, ``arguments``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, inputs: JobInputs) -> None:
        super().__init__(scope, construct_id)
        self.engine = "glue"
        self.job_role = _job_role(self, "glue.amazonaws.com", "Glue streaming aggregation job")
        self.key = self._key(config)
        self.security_configuration = glue.SecurityConfiguration(
            self,
            "Security",
            security_configuration_name=f"{config.prefix}-aggregation",
            cloud_watch_encryption=glue.CloudWatchEncryption.kms(self.key),
            job_bookmarks_encryption=glue.JobBookmarksEncryption.client_side_kms(self.key),
            s3_encryption=glue.S3Encryption.kms(self.key),
        )
        self.entry = assets.script_asset(self, "Entry", assets.GLUE_ENTRY)
        self.code = assets.spark_code_asset(self, "Code")
        self.settings = job_settings(
            config, inputs, engine="glue", code_hash=self.code.asset_hash + self.entry.asset_hash
        )
        self.arguments = glue_arguments(self.settings)
        job_name = f"{config.prefix}-aggregation"
        self.job = self._job(config, job_name)
        self.job_run = self._job_run(job_name)
        self.job_run.node.add_dependency(self.job)
        self._grant_job_role()

    def _key(self, config: GeoConfig) -> kms.Key:
        """The KMS key of the job's logs, bookmarks and S3 writes; CloudWatch Logs may use it for this account."""
        key = kms.Key(self, "Key", description=f"{config.prefix}: Glue job logs and bookmarks", enable_key_rotation=True)
        key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                resources=["*"],
                conditions={
                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"}
                },
            )
        )
        return key

    def _job(self, config: GeoConfig, job_name: str) -> glue.PySparkStreamingJob:
        return glue.PySparkStreamingJob(
            self,
            "Job",
            job_name=job_name,
            description="Geo Rebalancer aggregation: ingest stream -> windowed load snapshots",
            role=self.job_role,
            script=glue.Code.from_bucket(self.entry.bucket, self.entry.s3_object_key),
            extra_python_files=[glue.Code.from_bucket(self.code.bucket, self.code.s3_object_key)],
            extra_jars=self._connector_jar(config),
            glue_version=glue.GlueVersion.V5_1,
            worker_configuration=glue.WorkerConfiguration(
                worker_type=glue.WorkerType.G_1X, number_of_workers=config.glue_workers
            ),
            security_configuration=self.security_configuration,
            continuous_logging=glue.ContinuousLoggingProps(enabled=True),
            default_arguments=self.arguments,
        )

    def _connector_jar(self, config: GeoConfig) -> list[glue.Code] | None:
        """``glue_kinesis_connector_jar`` as the job's ``--extra-jars`` (CDK grants the job role read on that key)."""
        if not config.glue_kinesis_connector_jar:
            return None
        bucket, key = config.glue_kinesis_connector_jar.removeprefix("s3://").split("/", 1)
        return [glue.Code.from_bucket(s3.Bucket.from_bucket_name(self, "ConnectorJarBucket", bucket), key)]

    def _job_run(self, job_name: str) -> cr.AwsCustomResource:
        """Starts a run on create and on update; stops it on delete."""
        job_arn = Stack.of(self).format_arn(service="glue", resource="job", resource_name=job_name)
        # The checkpoint argument changes with the job's code and settings, so a change starts a new run (and the
        # old run is stopped when CloudFormation deletes the replaced physical resource).
        start = cr.AwsSdkCall(
            service="Glue",
            action="startJobRun",
            parameters={"JobName": job_name, "Arguments": {"--checkpoint": self.arguments["--checkpoint"]}},
            physical_resource_id=cr.PhysicalResourceId.from_response("JobRunId"),
        )
        return cr.AwsCustomResource(
            self,
            "JobRun",
            resource_type="Custom::GlueStreamingJobRun",
            on_create=start,
            on_update=start,
            on_delete=cr.AwsSdkCall(
                service="Glue",
                action="batchStopJobRun",
                parameters={"JobName": job_name, "JobRunIds": [cr.PhysicalResourceIdReference()]},
            ),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["glue:StartJobRun", "glue:BatchStopJobRun", "glue:GetJobRun"], resources=[job_arn])]
            ),
            install_latest_aws_sdk=False,
            timeout=Duration.minutes(5),
        )

    def _grant_job_role(self) -> None:
        """The job uses its key, writes Glue's own log groups, and puts metrics in the ``Glue`` namespace only."""
        self.key.grant_encrypt_decrypt(self.job_role)
        glue_logs = Stack.of(self).format_arn(
            service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        self.job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"],
                resources=[glue_logs],
            )
        )
        self.job_role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": "Glue"}},
            )
        )


#: The aggregation construct of either engine (context ``engine``).
AggregationJob = EmrServerlessAggregation | GlueStreamingAggregation
