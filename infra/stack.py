"""The Geo Rebalancer stack: composes one construct per concern, owns every grant, and exports what an operator
needs. One stack on purpose: the bucket notifications, the hook target and the grants reference each other,
and a single stack keeps them free of cross-stack export cycles (``cdk deploy --all`` deploys it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import ArnFormat, Aws, CfnOutput, RemovalPolicies, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from geokernel.contracts.crowds import CONTROL_STATE_KEY
from geokernel.contracts.env import EnvVar
from geokernel.contracts.handoff import router_ledger_key, state_key
from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.stream import stream_manifest_key
from geokernel.contracts.surge import SIGNAL_PREFIX, SURGES_KEY
from infra.aggregation import AggregationJob, EmrServerlessAggregation, GlueStreamingAggregation, JobInputs
from infra.config import GeoConfig
from infra.deploy import DeployerFunction, HooksFunction
from infra.functions import LambdaKit
from infra.geo_streams import GeoStreams
from infra.ingest import IngestStream
from infra.monitoring import Monitoring, Watched
from infra.network import Network
from infra.outputs import OperatorOutputs
from infra.partitioner_fn import PartitionerFunction
from infra.router import RouterFunction
from infra.storage import Storage
from infra.suppressions import FindingOwners, acknowledge_findings
from infra.tables import ControlTables
from infra.teardown import GeoStreamTeardown
from infra.workers import Workers, cluster_name, service_name


class GeoRebalancerStack(Stack):
    """Everything of one deployment (named by ``config.prefix``)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Geo Rebalancer: dynamically rebalanced geo stream processing", **kwargs)
        self.config = config
        self.network = Network(self, "Network", config=config)
        self.ingest = IngestStream(self, "Ingest", config=config)
        self.storage = Storage(self, "Storage", config=config)
        self.tables = ControlTables(self, "Tables", config=config)
        self.geo_streams = GeoStreams(self, "GeoStreams", config=config)
        kit = LambdaKit(self, "Lambda", config=config)
        self.aggregation: AggregationJob = self._aggregation(kit)
        env = self.shared_environment()
        self.partitioner = PartitionerFunction(self, "Partitioner", kit=kit, snapshots=self.storage.snapshots,
                                               signals=self.storage.specs, environment=env)
        self.router = RouterFunction(self, "Router", config=config, kit=kit, stream=self.ingest.stream,
                                     environment=env | self.event_environment() | self.router_environment())
        self.hooks = HooksFunction(self, "Hooks", kit=kit, environment=env)
        self.workers = self._workers(env)
        self.deployer = DeployerFunction(self, "Deployer", kit=kit, specs=self.storage.specs, environment=env,
                                         service_arn=self.service_arn)
        # the code the fleet should run (infra/workers.py): the deployer rolls it out when it differs from the fleet's
        self.deployer.function.add_environment(EnvVar.WORKER_TASK_DEFINITION, self.workers.template_revision)
        # the geo streams' deployment tag: a same-named stream an earlier stack with this prefix left is not reused
        for function in (self.deployer.function, self.hooks.function):
            function.add_environment(EnvVar.DEPLOYMENT_ID, Aws.STACK_ID)
        self.monitoring = Monitoring(self, "Monitoring", config=config, watched=self._watched())
        self.teardown = self._teardown(kit)
        self._grant()
        self._grant_state_handoff()
        self._outputs()
        OperatorOutputs(self, "OperatorOutputs", dashboard=self.monitoring.dashboard, alarms=self.monitoring.alarms,
                        functions=self._functions_by_name(), worker_logs=self.workers.log_group,
                        job_logs=getattr(self.aggregation, "log_group", None))
        acknowledge_findings(self, self._finding_owners())
        if not config.retain_data:
            # nothing outlives `cdk destroy`: the ingest stream, every KMS key (scheduled for deletion) and the log
            # group CDK adds for its custom resources' function would otherwise be retained (their CDK default)
            RemovalPolicies.of(self).destroy()

    def _aggregation(self, kit: LambdaKit) -> AggregationJob:
        """The Spark job of the configured engine (context ``engine``), reading the ingest stream."""
        inputs = JobInputs(
            stream=self.ingest.stream,
            snapshots=self.storage.snapshots,
            quarantine=self.storage.quarantine,
            checkpoints=self.storage.checkpoints,
            costs=self.storage.costs,
        )
        if self.config.engine != "emr":
            return GlueStreamingAggregation(self, "Aggregation", config=self.config, inputs=inputs)
        return EmrServerlessAggregation(
            self,
            "Aggregation",
            config=self.config,
            inputs=inputs,
            subnets=self.network.vpc.select_subnets(subnet_type=self.network.private_subnets.subnet_type).subnets,
            security_group=self.network.security_group,
            kit=kit,
        )

    def _teardown(self, kit: LambdaKit) -> GeoStreamTeardown:
        """The custom resource that deletes the geo streams with the stack (infra/teardown.py). Everything that creates,
        writes or reads a geo stream depends on it, so CloudFormation deletes those first and it last."""
        teardown = GeoStreamTeardown(self, "GeoStreamTeardown", config=self.config, kit=kit)
        for dependent in (self.deployer.function, self.deployer.schedule, self.deployer.deployment_events,
                          self.hooks.function, self.router.function, self.workers.service):
            dependent.node.add_dependency(teardown.resource)
        return teardown

    def _workers(self, env: Mapping[str, str]) -> Workers:
        """The worker fleet: the shared environment without what only the Lambdas read, plus the transform."""
        lambdas_only = (EnvVar.POLICY_JSON, EnvVar.SNAPSHOTS_BUCKET, EnvVar.STATE_HANDOFF)
        transform: dict[str, str] = {EnvVar.GEO_TRANSFORM: self.config.geo_transform} if self.config.geo_transform else {}
        return Workers(
            self,
            "Workers",
            config=self.config,
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            security_group=self.network.security_group,
            hooks=self.hooks.function,
            environment={k: v for k, v in env.items() if k not in lambdas_only} | transform | self.event_environment(),
        )

    def _functions_by_name(self) -> dict[str, lambda_.Function]:
        named = {"Router": self.router.function, "Partitioner": self.partitioner.function,
                 "Deployer": self.deployer.function, "Hooks": self.hooks.function,
                 "Teardown": self.teardown.function}
        if isinstance(self.aggregation, EmrServerlessAggregation):  # the streaming job run's replacements
            named["JobRun"] = self.aggregation.job_run.function
        return named

    def _watched(self) -> Watched:
        return Watched(
            router=self.router.function,
            partitioner=self.partitioner.function,
            deployer=self.deployer.function,
            hooks=self.hooks.function,
            router_failures=self.router.failures,
            async_failures={"Partitioner": self.partitioner.failures, "Deployer": self.deployer.failures},
            quarantine=self.storage.quarantine,
            service_arn=self.service_arn,
            service_name=service_name(self.config),
            cluster_name=cluster_name(self.config),
        )

    def _finding_owners(self) -> FindingOwners:
        return FindingOwners(
            config=self.config,
            storage=self.storage,
            s3_dead_letters=(self.partitioner.failures, self.deployer.failures),
            router_failures=self.router.failures,
            functions=(self.partitioner.function, self.router.function, self.deployer.function, self.hooks.function,
                       self.teardown.function),
            worker_task=self.workers.task_definition,
            aggregation=self.aggregation,
        )

    def event_environment(self) -> dict[str, str]:
        """``EVENT_FIELDS`` for the router and the workers (the parts reading live events); unset for the default."""
        fields = self.config.event_fields
        return {} if fields.is_default else {EnvVar.EVENT_FIELDS: fields.to_json()}

    def router_environment(self) -> dict[str, str]:
        """``SURGE_JSON`` (the fast path's meter, lambdas.router.surge) and ``ROUTER_PARALLELISM`` when the event source
        mapping runs more than one invocation per ingest shard (the router's share of a geo shard while catching up,
        lambdas.common.pacing); unset for the default 1."""
        n = self.config.router_parallelism
        return {EnvVar.SURGE_JSON: self.config.surge, **({EnvVar.ROUTER_PARALLELISM: str(n)} if n > 1 else {})}

    # -- names shared with the Lambdas and workers (geokernel/contracts/env.py) ----------------------------
    def shared_environment(self) -> dict[str, str]:
        config, storage = self.config, self.storage
        return {
            EnvVar.GEO_PREFIX: config.prefix,
            EnvVar.CONTROL_TABLE: self.tables.control.table_name,
            EnvVar.LEASES_TABLE: self.tables.leases.table_name,
            EnvVar.SNAPSHOTS_BUCKET: storage.snapshots.bucket_name,
            EnvVar.SPECS_BUCKET: storage.specs.bucket_name,
            EnvVar.COSTS_BUCKET: storage.costs.bucket_name,
            EnvVar.QUARANTINE_BUCKET: storage.quarantine.bucket_name,
            EnvVar.OUTPUT_BUCKET: storage.output.bucket_name,
            EnvVar.MAX_LOAD: repr(config.max_load),
            EnvVar.SHARDS_PER_WORKER: str(config.shards_per_worker),
            EnvVar.GRID_ZOOM: str(config.grid_zoom),
            EnvVar.POLICY_JSON: config.policy.to_json(),
            EnvVar.ECS_CLUSTER: cluster_name(config),
            EnvVar.ECS_SERVICE: service_name(config),
            EnvVar.GEO_STREAM_KMS_KEY: self.geo_streams.key.key_arn,
            EnvVar.SWAP_MODE: config.swap_mode,
            **({EnvVar.STATE_HANDOFF: "1"} if config.state_handoff else {}),
        }

    @property
    def service_arn(self) -> str:
        return self.format_arn(
            service="ecs",
            resource="service",
            resource_name=f"{cluster_name(self.config)}/{service_name(self.config)}",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    # -- least-privilege grants: every role gets exactly what its code path uses ----------------------------
    def _grant_state_handoff(self) -> None:
        """``state_handoff``: the router's ledgers (lambdas/router/stateful.py); the workers' handoff items and the
        slot state objects they read back (geo_service/entity/handoff.py)."""
        if not self.config.state_handoff:
            return
        self.storage.specs.grant_put(self.router.function, _objects_under(router_ledger_key("*", "*")))
        self.tables.control.grant_write_data(self.workers.task_role)
        self.storage.output.grant_read(self.workers.task_role, _objects_under(state_key(0, "*", final=True)))

    def _grant(self) -> None:
        """Each role's grants, one helper per role (or pair of roles stepping the same code)."""
        self._grant_job()
        self._grant_partitioner()
        self._grant_router()
        self._grant_deploy()
        self._grant_workers()
        # the teardown lists the account's streams and deletes this deployment's geo streams (infra/teardown.py)
        self.geo_streams.grant_teardown(self.teardown.function)

    def _grant_job(self) -> None:
        storage, job = self.storage, self.aggregation.job_role
        self.ingest.stream.grant_read(job)
        storage.snapshots.grant_read_write(job)
        storage.checkpoints.grant_read_write(job)
        storage.quarantine.grant_put(job)
        storage.costs.grant_read(job)

    def _grant_partitioner(self) -> None:
        storage, partitioner = self.storage, self.partitioner.function
        # Published specs are immutable (put once, If-None-Match: lambdas/common/s3.py SpecStore.put_new) and the
        # specs bucket is versioned: no role gets a delete (s3:DeleteObject* would erase versions too). The readers
        # get s3:List* with their reads: a missing object (no crowds declared, no controller state yet) is then a
        # 404 instead of a 403.
        storage.snapshots.grant_read(partitioner)
        storage.costs.grant_read(partitioner)
        storage.specs.grant_read(partitioner)  # specs, declared crowds, controller state (lambdas/partitioner/logic.py)
        storage.specs.grant_put(partitioner, _objects_under(spec_key(0)))  # new specs (logic.py publish)
        storage.specs.grant_put(partitioner, CONTROL_STATE_KEY)  # its controller state (lambdas/partitioner/state.py)
        storage.specs.grant_put(partitioner, SURGES_KEY)  # the surges its fast path relieved (lambdas/partitioner/surge.py)
        self.tables.control.grant_read_write_data(partitioner)

    def _grant_router(self) -> None:
        router = self.router.function
        self.tables.control.grant_read_data(router)
        self.storage.specs.grant_read(router)
        self.storage.specs.grant_put(router, SIGNAL_PREFIX + "*")  # surge signals (lambdas/router/surge.py)
        self.storage.quarantine.grant_put(router)
        self.geo_streams.grant_write(router)

    def _grant_deploy(self) -> None:
        """The deployer and the hooks: both step the deploy controller (lambdas/deploy/runtime.py)."""
        storage, tables, geo = self.storage, self.tables, self.geo_streams
        deployer = self.deployer.function
        storage.specs.grant_read(deployer)
        storage.specs.grant_put(deployer, _objects_under(spec_key(0)))  # lambdas/deploy/code.py republishes the live spec for new code
        # the stream manifest of each new geo stream (lambdas/deploy/steps.py publish_shards)
        storage.specs.grant_put(deployer, _objects_under(stream_manifest_key(0)))
        tables.control.grant_read_write_data(deployer)
        tables.leases.grant_read_data(deployer)
        geo.grant_manage(deployer)
        # a new version's stream must fit the account's shard quota (lambdas/deploy/steps.py shard_shortfall); only the
        # deployer starts versions: the hooks step with allow_start=False and never ask (lambdas/deploy/controller.py)
        geo.grant_shard_quota(deployer)
        self._grant_ecs_deploy(deployer)

        # The hooks step the deployer's controller with allow_start=False: they never start a fleet (no stream
        # manifest, no revision, no UpdateService: lambdas/deploy/controller.py _from_deploying), and the fleet
        # of a whole swap, the only kind an ECS deployment and so a hook belongs to, is stopped by ECS itself
        hooks = self.hooks.function
        storage.specs.grant_read(hooks)
        tables.control.grant_read_write_data(hooks)
        tables.leases.grant_read_write_data(hooks)
        geo.grant_manage(hooks)
        self._grant_ecs_read(hooks)
        # ECS assumes the hook role to invoke the hooks function (the unqualified function only).
        self.workers.hook_role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[hooks.function_arn])
        )

    def _grant_workers(self) -> None:
        storage, tables, task = self.storage, self.tables, self.workers.task_role
        tables.leases.grant_read_write_data(task)
        tables.control.grant_read_data(task)
        storage.specs.grant_read(task)
        storage.costs.grant_put(task)
        storage.output.grant_put(task)
        storage.quarantine.grant_put(task)
        self.geo_streams.grant_read(task)
        # A worker keeps its task's scale-in protection on while it holds a lease (geo_service/runtime/protection.py); the
        # agent endpoint acts with the task role.
        task.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:UpdateTaskProtection", "ecs:GetTaskProtection"],
                resources=[self._worker_tasks_arn()],
            )
        )

    def _worker_tasks_arn(self) -> str:
        return self.format_arn(
            service="ecs",
            resource="task",
            resource_name=f"{cluster_name(self.config)}/*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def _grant_ecs_read(self, grantee: iam.IGrantable) -> None:
        """What the hooks read of ECS: the revision the service is set to and its SPEC_VERSION (lambdas/deploy/hooks.py
        run_hook -> EcsFleet.target_version -> EcsService.running_spec_version: DescribeServices,
        DescribeTaskDefinition; the latter has no resource type: Resource "*", see :meth:`_grant_ecs_deploy`)."""
        principal = grantee.grant_principal
        principal.add_to_principal_policy(iam.PolicyStatement(actions=["ecs:DescribeTaskDefinition"], resources=["*"]))
        principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:DescribeServices"], resources=[self.service_arn])
        )

    def _grant_ecs_deploy(self, grantee: iam.IGrantable) -> None:
        """What the ECS adapter calls (lambdas/common/ecs.py: describe_services, describe_task_definition,
        register_task_definition, update_service; tests/infra/test_stack.py derives the set from its source), and
        passing the worker roles to the revisions it registers."""
        principal = grantee.grant_principal
        # RegisterTaskDefinition/DescribeTaskDefinition have no resource type in "Actions defined by Amazon Elastic
        # Container Service" (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticcontainerservice.html):
        # Resource "*"
        principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:RegisterTaskDefinition", "ecs:DescribeTaskDefinition"], resources=["*"])
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["ecs:UpdateService", "ecs:DescribeServices"], resources=[self.service_arn])
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.workers.task_role.role_arn, self.workers.execution_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )

    def _outputs(self) -> None:
        storage = self.storage
        values = {
            "IngestStreamName": self.ingest.stream.stream_name,
            "SnapshotsBucket": storage.snapshots.bucket_name,
            "SpecsBucket": storage.specs.bucket_name,
            "CheckpointsBucket": storage.checkpoints.bucket_name,
            "QuarantineBucket": storage.quarantine.bucket_name,
            "CostsBucket": storage.costs.bucket_name,
            "OutputBucket": storage.output.bucket_name,
            "ControlTable": self.tables.control.table_name,
            "LeasesTable": self.tables.leases.table_name,
            "ClusterName": self.workers.cluster.cluster_name,
            "ServiceName": self.workers.service.service_name,
            "RouterFailureQueue": self.router.failures.queue_url,
            "AlarmTopic": self.monitoring.topic.topic_arn,
            "DashboardUrl": (
                f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
                f"#dashboards:name={self.monitoring.dashboard.dashboard_name}"
            ),
            "Engine": self.config.engine,
        }
        if isinstance(self.aggregation, EmrServerlessAggregation):
            values["EmrApplicationId"] = self.aggregation.application.attr_application_id
            values["EmrJobRunId"] = self.aggregation.job_run.job_run_id
        else:
            values["GlueJobName"] = self.aggregation.job.job_name
        for name, value in values.items():
            CfnOutput(self, name, value=value)


def _objects_under(key: str) -> str:
    """The IAM object pattern of every key beside ``key`` under its first path segment (``specs/v00000001.json`` ->
    ``specs/*``): the keys a contract function names at run time."""
    return key.split("/")[0] + "/*"
