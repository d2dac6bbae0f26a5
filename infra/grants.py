"""Least-privilege grants: every role of the deployment gets exactly what its code path uses.

:class:`Grants` holds the parts of one :class:`~infra.rebalancer.GeoRebalancer` and gives each role its grants, one
helper per role (or pair of roles stepping the same code). The ingest stream is whichever the deployment reads (the
one it created or the one it was given): the Spark job's read grant follows it, with ``kms:Decrypt`` on its key when it
has one (``IStream.grant_read``); the router's comes with its event source (infra/router.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis

from geokernel.contracts.crowds import CONTROL_STATE_KEY
from geokernel.contracts.handoff import router_ledger_key, state_key
from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.stream import stream_manifest_key
from geokernel.contracts.surge import SIGNAL_PREFIX, SURGES_KEY
from infra.aggregation import AggregationJob
from infra.config import GeoConfig
from infra.deploy import DeployerFunction, HooksFunction
from infra.geo_streams import GeoStreams
from infra.partitioner_fn import PartitionerFunction
from infra.router import RouterFunction
from infra.storage import Storage
from infra.tables import ControlTables
from infra.teardown import GeoStreamTeardown
from infra.workers import Workers, cluster_name


@dataclass(frozen=True, kw_only=True)
class Grants:
    """The parts whose roles get grants, and the worker service's ARN (what the deploy roles may update)."""

    config: GeoConfig
    ingest_stream: kinesis.IStream
    storage: Storage
    tables: ControlTables
    geo_streams: GeoStreams
    aggregation: AggregationJob
    partitioner: PartitionerFunction
    router: RouterFunction
    hooks: HooksFunction
    deployer: DeployerFunction
    workers: Workers
    teardown: GeoStreamTeardown
    service_arn: str

    def grant_all(self) -> None:
        """Every role's grants (the order of the statements in the template)."""
        self._grant()
        self._grant_state_handoff()

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
        self.ingest_stream.grant_read(job)
        storage.snapshots.grant_read_write(job)
        storage.checkpoints.grant_read_write(job)
        storage.quarantine.grant_put(job)
        storage.costs.grant_read(job)

    def _grant_partitioner(self) -> None:
        storage, partitioner = self.storage, self.partitioner.function
        # Published specs are immutable (put once, If-None-Match: lambdas/runtime/s3.py SpecStore.put_new) and the
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
        if self.config.geofence_event_bus:  # the geofence sink (geo_service/pipeline/geofence_events.py): that bus only
            task.add_to_principal_policy(
                iam.PolicyStatement(actions=["events:PutEvents"], resources=[self._geofence_bus_arn()])
            )
        # A worker keeps its task's scale-in protection on while it holds a lease (geo_service/runtime/protection.py); the
        # agent endpoint acts with the task role.
        task.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ecs:UpdateTaskProtection", "ecs:GetTaskProtection"],
                resources=[self._worker_tasks_arn()],
            )
        )

    def _geofence_bus_arn(self) -> str:
        """The ARN of the ``geofence_event_bus`` bus in the stack's account and region (the setting must be set)."""
        return Stack.of(self.workers).format_arn(service="events", resource="event-bus",
                                                 resource_name=self.config.geofence_event_bus,
                                                 arn_format=ArnFormat.SLASH_RESOURCE_NAME)

    def _worker_tasks_arn(self) -> str:
        return Stack.of(self.workers).format_arn(
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
        """What the ECS adapter calls (lambdas/runtime/ecs.py: describe_services, describe_task_definition,
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


def _objects_under(key: str) -> str:
    """The IAM object pattern of every key beside ``key`` under its first path segment (``specs/v00000001.json`` ->
    ``specs/*``): the keys a contract function names at run time."""
    return key.split("/")[0] + "/*"
