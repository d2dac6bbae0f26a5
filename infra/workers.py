"""Geo workers: ECS cluster, Fargate task definition from the worker image asset, and a headless Fargate service
with ECS-native blue/green deployments whose lifecycle hooks invoke the hooks Lambda.

The image is built from ``geo_service/Dockerfile`` with the repo root as context (a DockerImageAsset: synth stages
the context into ``cdk.out/asset.<hash>/``; ``cdk deploy`` builds that directory and pushes the image). The staged
context holds exactly what the Dockerfile copies (:func:`image_excludes`, parsed from its ``COPY`` lines), so a new
``COPY`` line needs no second list. A transform package (:class:`infra.worker_transform.WorkerTransform`) is the
image's build argument ``TRANSFORM_PACKAGE``; an image of your own replaces the asset (no Dockerfile is read).

A stack update never touches the running fleet: the service template has no ``DesiredCount`` (CloudFormation
omits an unspecified desired count from the update, so the deployer's count stays; on create ECS starts one
task, an idle generic worker until the first spec:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-ecs-service.html#cfn-ecs-service-desiredcount)
and names the task definition by family only, a string no code change alters, so CloudFormation never starts
an ECS deployment of its own revision (which in ``whole`` mode has no ``SPEC_VERSION``). New worker code reaches
the fleet through the deployer instead: it gets the template's revision ARN (``WORKER_TASK_DEFINITION``, see
:attr:`Workers.template_revision`), copies it for every revision it registers, and when the running code differs
from it, deploys the next spec (or, when idle, the live spec as a new version) as a whole-fleet swap.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from geokernel.contracts.env import EnvVar
from infra import assets
from infra.config import GeoConfig
from infra.dockerfile import context_excludes
from infra.functions import retention
from infra.worker_transform import WorkerTransform

# Lifecycle stages the hooks Lambda handles (docs/CONTRACTS.md "Worker lifecycle, readiness and drain").
HOOK_STAGES = (
    ecs.DeploymentLifecycleStage.POST_SCALE_UP,  # hold green until every slot is leased and warm, then flip
    ecs.DeploymentLifecycleStage.POST_PRODUCTION_TRAFFIC_SHIFT,  # hold until blue has drained; retire its stream
)
CONTAINER_NAME = "worker"


def image_excludes() -> list[str]:
    """The worker image asset's allowlist: what ``geo_service/Dockerfile`` copies, and the Dockerfile.

    An allowlist keeps the fingerprint and the staged context small (``.venv*``, ``node_modules``, ``cdk.out`` never
    enter it); CDK stages with these patterns only (it ignores ``geo_service/Dockerfile.dockerignore``, which BuildKit
    reads for a build from the repo root).
    """
    return context_excludes(assets.require(assets.WORKER_DOCKERFILE).file, assets.REPO_ROOT)


def cluster_name(config: GeoConfig) -> str:
    return f"{config.prefix}-workers"


def service_name(config: GeoConfig) -> str:
    return f"{config.prefix}-geo-workers"


class Workers(Construct):
    """``cluster``, ``task_definition`` (``task_role``, ``execution_role``), ``service``, ``hook_role``,
    ``template_revision`` (the ARN of the revision this template registers: the code the fleet should run)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GeoConfig,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        security_group: ec2.ISecurityGroup,
        hooks: lambda_.IFunction,
        environment: Mapping[str, str],
        worker: WorkerTransform | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name(config),
            vpc=vpc,
            container_insights_v2=ecs.ContainerInsights.ENHANCED,
        )
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            family=f"{config.prefix}-geo-worker",
            cpu=config.worker_cpu,
            memory_limit_mib=config.worker_memory_mib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        self.task_role: iam.IRole = self.task_definition.task_role
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config.log_retention_days), removal_policy=RemovalPolicy.DESTROY
        )
        worker = worker or WorkerTransform.bundled()
        # the bundled image's asset; None with an image of your own
        self.image: ecr_assets.DockerImageAsset | None = None
        image = worker.image
        if image is None:
            self.image = self._image(worker.build_args)
            image = ecs.ContainerImage.from_docker_image_asset(self.image)
        self.container = self._container(config, environment, image)
        self.execution_role: iam.IRole = self.task_definition.obtain_execution_role()
        self.hook_role = iam.Role(
            self,
            "HookRole",
            assumed_by=iam.ServicePrincipal("ecs.amazonaws.com"),
            description="ECS invokes the blue/green lifecycle hook Lambda with this role",
        )
        self.service = self._service(config, subnets, security_group)
        self.template_revision: str = self.task_definition.task_definition_arn
        self.service.add_lifecycle_hook(
            ecs.DeploymentLifecycleLambdaTarget(hooks, "Hooks", lifecycle_stages=list(HOOK_STAGES), role=self.hook_role)
        )

    def _image(self, build_args: Mapping[str, str]) -> ecr_assets.DockerImageAsset:
        """The worker image, built from ``geo_service/Dockerfile`` with the staged allowlist as its context (and a
        transform package's build argument: a change of it is a new asset hash, so a new image)."""
        dockerfile = assets.require(assets.WORKER_DOCKERFILE)
        assets.require(assets.WORKER_HEALTHCHECK)
        return ecr_assets.DockerImageAsset(
            self,
            "Image",
            directory=str(assets.REPO_ROOT),
            file=dockerfile.path,
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=image_excludes(),
            build_args=dict(build_args) or None,
        )

    def _container(
        self, config: GeoConfig, environment: Mapping[str, str], image: ecs.ContainerImage
    ) -> ecs.ContainerDefinition:
        return self.task_definition.add_container(
            CONTAINER_NAME,
            image=image,
            environment={**environment, EnvVar.LEASE_S: str(config.lease_s)},
            logging=ecs.LogDriver.aws_logs(stream_prefix="worker", log_group=self.log_group),
            # The worker writes no file (records, leases, costs and state go to AWS; the image sets
            # PYTHONDONTWRITEBYTECODE): nothing in the container may change its own code or libraries, and no volume
            # is needed (tests/geo_service/test_no_file_writes.py keeps it so)
            readonly_root_filesystem=True,
            essential=True,
            # ECS ignores the Dockerfile HEALTHCHECK; this is the image's own probe (docs/CONTRACTS.md).
            health_check=ecs.HealthCheck(
                command=["CMD", "python", "-m", "geo_service.healthcheck"],
                interval=Duration.seconds(15),
                timeout=Duration.seconds(5),
                start_period=Duration.seconds(60),
                retries=3,
            ),
        )

    def _service(
        self, config: GeoConfig, subnets: ec2.SubnetSelection, security_group: ec2.ISecurityGroup
    ) -> ecs.FargateService:
        """The headless service with ECS-native blue/green deployments (module docstring)."""
        return ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            service_name=service_name(config),
            task_definition=self.task_definition,
            # family only: a cdk deploy that changes the image or environment registers a revision but does not
            # start a deployment; the deployer rolls the new code out (module docstring)
            task_definition_revision=ecs.TaskDefinitionRevision.LATEST,
            # no desired_count: CloudFormation would write it back over the deployer's count on any update
            min_healthy_percent=100,
            max_healthy_percent=200,
            vpc_subnets=subnets,
            security_groups=[security_group],
            assign_public_ip=False,
            deployment_strategy=ecs.DeploymentStrategy.BLUE_GREEN,
            # No bake time: ECS can still roll back (circuit breaker) while it bakes, and by then the drain hook has
            # let blue drain and retired its stream and the router follows green; a rollback would bring back a fleet
            # reading a deleted stream. The hooks' two holds are the bake: green proven before the flip, blue drained
            # before ECS stops it (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/deployment-type-blue-green.html,
            # "bake time": both revisions run and a rollback is possible until it ends).
            bake_time=Duration.minutes(0),
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            enable_ecs_managed_tags=True,
        )
