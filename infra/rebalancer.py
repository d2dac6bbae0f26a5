"""``GeoRebalancer``: the whole of one Geo Rebalancer deployment as one construct, to put in a stack of your own.

It composes one construct per concern (network, ingest stream, storage, control tables, geo streams, the Spark job,
the Lambdas, the worker fleet, monitoring, outputs), owns every grant (:mod:`infra.grants`) and exports what an
operator needs. :class:`~infra.stack.GeoRebalancerStack`, the app's stack, is this construct under the id
``Default`` (CDK leaves a ``Default`` out of the logical ids, so the app's resources keep theirs).

In a stack of your own (docs/DEPLOY.md "Embedding the construct in your own stack"):

* ``ingest_stream``: the stream the deployment reads; none: it creates one (``<prefix>-ingest``, KMS-encrypted) kept
  ``retention`` long. The router's event source, the Spark job's read and, for a stream encrypted with a key of its
  own, ``kms:Decrypt`` on that key follow it;
* ``starting_position`` (``starting_timestamp`` for AT_TIMESTAMP), ``router_fan_out``: how the router reads it
  (:class:`~infra.ingest.IngestReading`: TRIM_HORIZON for a created stream, LATEST for yours unless told);
* ``output_bucket``: where the workers write the enriched records; none: it creates one;
* ``transform``: the worker image and transform (:class:`~infra.worker_transform.WorkerTransform`); none: the bundled
  image with ``config.geo_transform``.

One GeoRebalancer per stack: its outputs have fixed keys (``georebal --stack`` and the local loop read them) and its
resources are named by ``config.prefix``. Your app must set the CDK feature flags the construct is checked with
(:data:`infra.flags.FEATURE_FLAGS`, the app's cdk.json ones), and synthesize from a checkout of the repository (the
code assets read it: :func:`infra.assets.require_sources`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, RemovalPolicies, Stack, Tags
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from geokernel.contracts.env import EnvVar
from infra import assets
from infra.aggregation import AggregationJob, EmrServerlessAggregation, GlueStreamingAggregation, JobInputs
from infra.catalog import OutputCatalog
from infra.config import GeoConfig
from infra.deploy import DeployerFunction, HooksFunction
from infra.errors import ConfigError
from infra.flags import check_feature_flags
from infra.functions import LambdaKit
from infra.geo_streams import GeoStreams
from infra.grants import Grants
from infra.ingest import IngestReading, IngestStream
from infra.metrics import Watched
from infra.monitoring import Monitoring, alarm_subscribers
from infra.network import Network
from infra.outputs import OperatorOutputs
from infra.partitioner_fn import PartitionerFunction
from infra.router import RouterFunction
from infra.storage import Storage
from infra.suppressions import FindingOwners, acknowledge_findings
from infra.tables import ControlTables
from infra.teardown import GeoStreamTeardown
from infra.worker_transform import WorkerTransform
from infra.workers import Workers, cluster_name, service_name


class GeoRebalancer(Construct):
    """Everything of one deployment (named by ``config.prefix``); see the module docstring for the arguments.

    Attributes: ``config``, ``ingest_stream`` (the stream read), ``ingest`` (the created one, None when given),
    ``reading``, ``transform``, ``network``, ``storage``, ``tables``, ``geo_streams``, ``aggregation``,
    ``partitioner``, ``router``, ``hooks``, ``workers``, ``deployer``, ``monitoring``, ``teardown``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GeoConfig,
        ingest_stream: kinesis.IStream | None = None,
        retention: Duration | None = None,
        starting_position: lambda_.StartingPosition | None = None,
        starting_timestamp: datetime | None = None,
        router_fan_out: bool = False,
        output_bucket: s3.IBucket | None = None,
        transform: WorkerTransform | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        assets.require_sources()
        check_feature_flags(self)
        stack = Stack.of(self)
        before = {c.node.id for c in stack.node.children}
        self.config = config
        self.reading = IngestReading.of(own_stream=ingest_stream is not None, retention=retention,
                                        starting_position=starting_position, starting_timestamp=starting_timestamp,
                                        fan_out=router_fan_out)
        self.transform = _transform(config, transform)
        if ingest_stream is not None and config.ingest_shards:
            raise ConfigError(f"ingest_shards ({config.ingest_shards}) sizes the ingest stream the construct creates; "
                              "with a stream of your own (ingest_stream) leave it 0")
        self._build(ingest_stream, output_bucket)
        # the stack-level constructs CDK added for this one (singleton handlers: bucket notifications, custom
        # resources): its acknowledgements, checkov skips and removal policy cover them too, and nothing else of the stack
        added = [c for c in stack.node.children if c.node.id not in before and c is not self]
        acknowledge_findings(self, self._finding_owners(), stack_level=added)
        for scope_ in (self, *added):
            Tags.of(scope_).add("project", "geo-rebalancer")
            Tags.of(scope_).add("geo-rebalancer:prefix", config.prefix)
            if not config.retain_data:
                # nothing outlives `cdk destroy`: the ingest stream, every KMS key (scheduled for deletion) and the
                # log group CDK adds for its custom resources' function would otherwise be retained (their CDK default)
                RemovalPolicies.of(scope_).destroy()

    def _build(self, ingest_stream: kinesis.IStream | None, output_bucket: s3.IBucket | None) -> None:
        config = self.config
        self.network = Network(self, "Network", config=config)
        self.ingest: IngestStream | None = None
        if ingest_stream is None:
            self.ingest = IngestStream(self, "Ingest", config=config, retention_h=self.reading.retention_h)
            ingest_stream = self.ingest.stream
        self.ingest_stream: kinesis.IStream = ingest_stream
        self.storage = Storage(self, "Storage", config=config, output=output_bucket)
        self.catalog = OutputCatalog(self, "Catalog", config=config, output=self.storage.output)
        self.tables = ControlTables(self, "Tables", config=config)
        self.geo_streams = GeoStreams(self, "GeoStreams", config=config)
        kit = LambdaKit(self, "Lambda", config=config)
        self.aggregation: AggregationJob = self._aggregation(kit)
        env = self.shared_environment()
        self.partitioner = PartitionerFunction(self, "Partitioner", kit=kit, snapshots=self.storage.snapshots,
                                               signals=self.storage.specs, environment=env)
        self.router = RouterFunction(self, "Router", config=config, kit=kit, stream=self.ingest_stream,
                                     reading=self.reading,
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
        self._grants().grant_all()
        self._outputs()
        OperatorOutputs(self, "OperatorOutputs", dashboard=self.monitoring.dashboard, alarms=self.monitoring.alarms,
                        functions=self._functions_by_name(), worker_logs=self.workers.log_group,
                        job_logs=getattr(self.aggregation, "log_group", None), subscribers=alarm_subscribers(self.config))

    def _grants(self) -> Grants:
        return Grants(config=self.config, ingest_stream=self.ingest_stream, storage=self.storage, tables=self.tables,
                      geo_streams=self.geo_streams, aggregation=self.aggregation, partitioner=self.partitioner,
                      router=self.router, hooks=self.hooks, deployer=self.deployer, workers=self.workers,
                      teardown=self.teardown, service_arn=self.service_arn)

    def _aggregation(self, kit: LambdaKit) -> AggregationJob:
        """The Spark job of the configured engine (context ``engine``), reading the ingest stream."""
        inputs = JobInputs(
            stream=self.ingest_stream,
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
        name = self.transform.transform
        transform: dict[str, str] = {EnvVar.GEO_TRANSFORM: name} if name else {}
        if self.config.geofence_event_bus:  # the workers put the geofence transitions there (infra/grants.py)
            transform[EnvVar.GEOFENCE_EVENT_BUS] = self.config.geofence_event_bus
        return Workers(
            self,
            "Workers",
            config=self.config,
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            security_group=self.network.security_group,
            hooks=self.hooks.function,
            environment={k: v for k, v in env.items() if k not in lambdas_only} | transform | self.event_environment(),
            worker=self.transform,
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
            tables=(self.tables.control, self.tables.leases),
            ingest=self.ingest_stream,
            worker_logs=self.workers.log_group,
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
        lambdas.runtime.pacing); unset for the default 1."""
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
        return Stack.of(self).format_arn(
            service="ecs",
            resource="service",
            resource_name=f"{cluster_name(self.config)}/{service_name(self.config)}",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )


    def _outputs(self) -> None:
        storage = self.storage
        values = {
            "IngestStreamName": self.ingest_stream.stream_name,
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
        for name, value in values.items():  # fixed keys (georebal and local/wiring read them): one deployment a stack
            CfnOutput(self, name, value=value).override_logical_id(name)



def _transform(config: GeoConfig, transform: WorkerTransform | None) -> WorkerTransform:
    """``transform``, naming ``config.geo_transform`` when it names none itself (the bundled image's when None); a
    transform named in both places must be the same."""
    if transform is None:
        return WorkerTransform.bundled(config.geo_transform)
    if transform.transform and config.geo_transform and transform.transform != config.geo_transform:
        raise ConfigError(f"the transform is named twice: {transform.transform!r} (transform) and "
                          f"{config.geo_transform!r} (config.geo_transform); name it in one place")
    if transform.transform or not config.geo_transform:
        return transform
    return WorkerTransform(transform=config.geo_transform, package=transform.package, image=transform.image)
