"""The metrics the alarms and the dashboard read: the project's own (``geokernel/contracts/metric_names.py``) in the
deployment's dimension set, and the AWS metrics of the watched resources.

Every custom metric is read in its one dimension set, :func:`~geokernel.contracts.metric_names.metric_dimensions`
(``service`` and ``deployment=<prefix>``): the Lambdas (``lambdas/runtime/metrics.py``) and the workers
(``geo_service/adapters/metrics.py``) write exactly that set, so the alarms of two deployments in one account and
region never read each other's metrics (``tests/infra/test_two_deployments.py``).

AWS metrics used, by alarm:

* worker lag: the workers' own ``MillisBehindLatest`` (a geo stream is created at run time, per version, so its
  ``AWS/Kinesis`` metrics cannot be named in a template, and an alarm cannot use a SEARCH expression:
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-search-expressions.html);
* table throttles: ``AWS/DynamoDB ReadThrottleEvents`` and ``WriteThrottleEvents`` (dimension ``TableName``) of both
  tables. Not ``ThrottledRequests``: it has an ``Operation`` dimension (one metric per API the tables see, more than an
  alarm's 10) and counts a batch request only when all of it was throttled, where the event metrics count each throttled
  item (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TroubleshootingThrottling-cloudwatch.html); the
  workers read leases with ``BatchGetItem``;
* stream throttles: ``AWS/Kinesis WriteProvisionedThroughputExceeded`` of the ingest stream, plus the router's
  ``GeoWriteThrottled`` and the workers' ``GeoReadThrottled`` for the geo streams (created at run time, as above);
* Lambda throttles: ``AWS/Lambda Throttles`` of the four functions;
* workers below desired: ``ECS/ContainerInsights DesiredTaskCount`` and ``RunningTaskCount`` of the worker service
  (Container Insights is on for the cluster, ``infra/workers.py``; ``AWS/ECS`` has only CPU and memory for a Fargate
  service: https://docs.aws.amazon.com/AmazonECS/latest/developerguide/available-metrics.html). ECS sends them only
  while the service has a running task, so a service at zero running tasks sends none (the alarm treats that as OK).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.metric_names import NAMESPACE, Metric, MetricService, deploy_status_metric, metric_dimensions
from infra.config import GeoConfig
from infra.storage import QUARANTINE_METRICS_FILTER

FIVE = Duration.minutes(5)
ONE = Duration.minutes(1)
CONTAINER_INSIGHTS = "ECS/ContainerInsights"


@dataclass(frozen=True, kw_only=True)
class Watched:
    """What the alarms and the dashboard watch."""

    router: lambda_.IFunction
    partitioner: lambda_.IFunction
    deployer: lambda_.IFunction
    hooks: lambda_.IFunction
    router_failures: sqs.IQueue
    # dead-letter queues of the S3-triggered functions, by name (infra/functions.py ObjectCreatedFunction)
    async_failures: Mapping[str, sqs.IQueue] = field(default_factory=dict)
    quarantine: s3.IBucket
    tables: Sequence[dynamodb.ITable] = ()
    ingest: kinesis.IStream
    worker_logs: logs.ILogGroup
    service_arn: str
    service_name: str
    cluster_name: str

    @property
    def functions(self) -> dict[str, lambda_.IFunction]:
        """The four functions of the system, by name."""
        return {"Router": self.router, "Partitioner": self.partitioner, "Deployer": self.deployer, "Hooks": self.hooks}


@dataclass(frozen=True, kw_only=True)
class Custom:
    """The project's metrics of one deployment: each in the dimension set its writer emits."""

    deployment: str

    def metric(self, name: str, service: MetricService, statistic: str = "Sum", period: Duration = FIVE,
               label: str | None = None) -> cw.Metric:
        """``GeoRebalancer/<name>`` of ``service`` in this deployment (``metric_dimensions``)."""
        return cw.Metric(namespace=NAMESPACE, metric_name=name, statistic=statistic, period=period, label=label,
                         dimensions_map=metric_dimensions(service, self.deployment))


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedMetrics:
    """The metrics the alarms and the dashboard share."""

    utilisation: cw.Metric
    spec_age: cw.Metric
    iterator_age: cw.Metric
    quarantined: cw.Metric
    failed_deploys: cw.Metric
    router_failures: cw.Metric
    worker_lag: cw.Metric
    table_throttles: cw.MathExpression
    stream_throttles: cw.MathExpression
    lambda_throttles: cw.MathExpression
    workers_missing: cw.MathExpression
    rolled_back: cw.Metric


def total(label: str, ids: str, metrics: Mapping[str, cw.IMetric], period: Duration = FIVE) -> cw.MathExpression:
    """The sum of ``metrics`` (ids ``<ids>0``, ``<ids>1``...: unique in a graph that shows several sums): one time
    series an alarm can read (up to 10 metrics)."""
    named = {f"{ids}{i}": m for i, m in enumerate(metrics.values())}
    return cw.MathExpression(expression=" + ".join(named), using_metrics=named, label=label, period=period)


def watched_metrics(config: GeoConfig, watched: Watched, deploy_failed_rule: events.Rule) -> WatchedMetrics:
    """The metrics of the module docstring, for ``config.prefix``'s deployment."""
    own = Custom(deployment=config.prefix)
    # one data point per snapshot (every window_s): a period of at least one window, so only a missed snapshot
    # leaves a period empty
    snapshot_period = Duration.seconds(max(300, -(-config.window_s // 60) * 60))
    service = {"ClusterName": watched.cluster_name, "ServiceName": watched.service_name}
    return WatchedMetrics(
        utilisation=own.metric(Metric.WORKER_UTILISATION, MetricService.PARTITIONER, "Maximum"),
        spec_age=own.metric(Metric.SPEC_AGE, MetricService.PARTITIONER, "Maximum", snapshot_period),
        iterator_age=watched.router.metric("IteratorAge", statistic="Maximum", period=ONE),
        quarantined=cw.Metric(
            namespace="AWS/S3",
            metric_name="PutRequests",
            dimensions_map={"BucketName": watched.quarantine.bucket_name, "FilterId": QUARANTINE_METRICS_FILTER},
            statistic="Sum",
            period=FIVE,
        ),
        failed_deploys=cw.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": deploy_failed_rule.rule_name},
            statistic="Sum",
            period=FIVE,
        ),
        router_failures=watched.router_failures.metric_approximate_number_of_messages_visible(period=FIVE),
        worker_lag=own.metric(Metric.MILLIS_BEHIND_LATEST, MetricService.WORKER, "Maximum", ONE),
        table_throttles=total("table throttle events", "table", {
            f"{kind}{i}": cw.Metric(namespace="AWS/DynamoDB", metric_name=f"{kind}ThrottleEvents",
                                    dimensions_map={"TableName": t.table_name}, statistic="Sum", period=FIVE)
            for i, t in enumerate(watched.tables) for kind in ("Read", "Write")}),
        stream_throttles=total("stream throttles", "stream", {
            "ingest": watched.ingest.metric("WriteProvisionedThroughputExceeded", statistic="Sum", period=FIVE),
            "geo_writes": own.metric(Metric.GEO_WRITE_THROTTLED, MetricService.ROUTER),
            "geo_reads": own.metric(Metric.GEO_READ_THROTTLED, MetricService.WORKER)}),
        lambda_throttles=total("Lambda throttles", "lambda", {
            name: fn.metric_throttles(statistic="Sum", period=FIVE) for name, fn in watched.functions.items()}),
        workers_missing=cw.MathExpression(
            expression="desired - running", label="tasks below desired", period=FIVE, using_metrics={
                "desired": cw.Metric(namespace=CONTAINER_INSIGHTS, metric_name="DesiredTaskCount",
                                     dimensions_map=service, statistic="Minimum", period=FIVE),
                "running": cw.Metric(namespace=CONTAINER_INSIGHTS, metric_name="RunningTaskCount",
                                     dimensions_map=service, statistic="Maximum", period=FIVE)}),
        rolled_back=own.metric(deploy_status_metric(DeployStatus.ROLLED_BACK), MetricService.DEPLOYER),
    )
