"""CloudWatch dashboard and alarms, with an encrypted SNS topic for alarm notifications.

Metrics (docs/CONTRACTS.md "Metrics"; the project's own names are in ``geokernel/contracts/metric_names.py``,
which the Lambdas emit with):

* worker utilisation: ``GeoRebalancer/WorkerUtilisation`` (dimension ``service=partitioner``), the max over
  workers of measured load / max_load, from the cost reports (an EMF metric of the partitioner);
* spec age: ``GeoRebalancer/SpecAgeSeconds`` (dimension ``service=partitioner``), age of the active spec;
* router iterator age: ``AWS/Lambda IteratorAge`` of the router;
* quarantine rate: ``AWS/S3 PutRequests`` on the quarantine bucket, request-metrics filter ``QuarantineWrites``;
* failed deploys: an EventBridge rule on ECS ``SERVICE_DEPLOYMENT_FAILED`` for the worker service
  (``AWS/Events TriggeredRules``), plus the hooks and deployer Lambda errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from geokernel.contracts.metric_names import NAMESPACE, SERVICE_DIMENSION, Metric, MetricService
from infra.config import GeoConfig
from infra.storage import QUARANTINE_METRICS_FILTER

ROUTER_ITERATOR_AGE_MS = 60_000
SPEC_AGE_PERIODS = 3  # windows without a snapshot before the SpecAge alarm fires on missing data


@dataclass(frozen=True, kw_only=True)
class Watched:
    """What the dashboard watches."""

    router: lambda_.IFunction
    partitioner: lambda_.IFunction
    deployer: lambda_.IFunction
    hooks: lambda_.IFunction
    router_failures: sqs.IQueue
    # dead-letter queues of the S3-triggered functions, by name (infra/functions.py ObjectCreatedFunction)
    async_failures: Mapping[str, sqs.IQueue] = field(default_factory=dict)
    quarantine: s3.IBucket
    service_arn: str
    service_name: str
    cluster_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedMetrics:
    """The metrics the alarms and the dashboard share."""

    utilisation: cw.Metric
    spec_age: cw.Metric
    iterator_age: cw.Metric
    quarantined: cw.Metric
    failed_deploys: cw.Metric
    router_failures: cw.Metric


def watched_metrics(config: GeoConfig, watched: Watched, deploy_failed_rule: events.Rule) -> WatchedMetrics:
    """The project's metrics (``geokernel/contracts/metric_names.py``) and the AWS ones of the watched resources."""
    dims = {SERVICE_DIMENSION: MetricService.PARTITIONER}  # powertools Metrics(namespace=NAMESPACE, service=...)
    five = Duration.minutes(5)
    # one data point per snapshot (every window_s): a period of at least one window, so only a missed snapshot
    # leaves a period empty
    snapshot_period = Duration.seconds(max(300, -(-config.window_s // 60) * 60))
    return WatchedMetrics(
        utilisation=cw.Metric(namespace=NAMESPACE, metric_name=Metric.WORKER_UTILISATION, dimensions_map=dims,
                              statistic="Maximum", period=five),
        spec_age=cw.Metric(namespace=NAMESPACE, metric_name=Metric.SPEC_AGE, dimensions_map=dims, statistic="Maximum",
                           period=snapshot_period),
        iterator_age=watched.router.metric("IteratorAge", statistic="Maximum", period=Duration.minutes(1)),
        quarantined=cw.Metric(
            namespace="AWS/S3",
            metric_name="PutRequests",
            dimensions_map={"BucketName": watched.quarantine.bucket_name, "FilterId": QUARANTINE_METRICS_FILTER},
            statistic="Sum",
            period=five,
        ),
        failed_deploys=cw.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": deploy_failed_rule.rule_name},
            statistic="Sum",
            period=five,
        ),
        router_failures=watched.router_failures.metric_approximate_number_of_messages_visible(period=five),
    )


class Monitoring(Construct):
    """``topic`` (alarm notifications), ``alarms`` (by name), ``dashboard``, ``deploy_failed_rule``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, watched: Watched) -> None:
        super().__init__(scope, construct_id)
        self.key = self._topic_key(config)
        self.topic = sns.Topic(
            self, "Alarms", topic_name=f"{config.prefix}-alarms", master_key=self.key, enforce_ssl=True
        )
        if config.alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(config.alarm_email))
        self.deploy_failed_rule = events.Rule(
            self,
            "DeployFailed",
            description="ECS blue/green deployment of the geo workers failed or rolled back",
            event_pattern=events.EventPattern(
                source=["aws.ecs"],
                detail_type=["ECS Deployment State Change"],
                resources=[watched.service_arn],
                detail={"eventName": ["SERVICE_DEPLOYMENT_FAILED"]},
            ),
            targets=[targets.SnsTopic(self.topic)],
        )
        metrics = watched_metrics(config, watched, self.deploy_failed_rule)
        self.alarms: dict[str, cw.Alarm] = {}
        self._alarms(config, watched, metrics)
        self.dashboard = self._dashboard(config, watched, metrics)

    def _topic_key(self, config: GeoConfig) -> kms.Key:
        """The alarm topic's key: CloudWatch alarms and EventBridge rules of this account may publish with it."""
        key = kms.Key(self, "TopicKey", description=f"{config.prefix}: alarm topic", enable_key_rotation=True)
        for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    principals=[iam.ServicePrincipal(service)],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
                )
            )
        return key

    def _alarms(self, config: GeoConfig, watched: Watched, metrics: WatchedMetrics) -> None:
        five = Duration.minutes(5)
        self._alarm("WorkerUtilisation", metrics.utilisation, config.utilisation_alarm, 3, "a worker's load exceeds its share")
        # The partitioner emits SpecAge once per snapshot: no data means no snapshot (the Spark job or the
        # partitioner stopped), which is exactly what must not stay silent. CloudWatch evaluates missing data as
        # breaching when told to (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html
        # "Configuring how CloudWatch alarms treat missing data").
        self._alarm("SpecAge", metrics.spec_age, config.spec_age_alarm_s, SPEC_AGE_PERIODS,
                    "the active spec is older than spec_age_alarm_s, or no snapshot reached the partitioner for "
                    f"{SPEC_AGE_PERIODS} windows",
                    missing=cw.TreatMissingData.BREACHING)
        self._alarm("RouterIteratorAge", metrics.iterator_age, ROUTER_ITERATOR_AGE_MS, 5,
                    "the router falls behind the ingest stream")
        self._alarm("QuarantineRate", metrics.quarantined, config.quarantine_alarm_per_5min, 1, "many events are quarantined")
        self._alarm("FailedDeploys", metrics.failed_deploys, 0, 1, "an ECS blue/green deploy of the workers failed")
        self._alarm("RouterFailures", metrics.router_failures, 0, 1, "router batches ended in the failure queue")
        for name, queue in watched.async_failures.items():
            self._alarm(f"{name}DeadLetters", queue.metric_approximate_number_of_messages_visible(period=five), 0, 1,
                        f"S3 events the {name.lower()} Lambda failed on after its retries (kept in its dead-letter queue)")
        for name, fn in (("Partitioner", watched.partitioner), ("Deployer", watched.deployer), ("Hooks", watched.hooks)):
            self._alarm(f"{name}Errors", fn.metric_errors(period=five, statistic="Sum"), 0, 1, f"the {name.lower()} Lambda failed")

    def _dashboard(self, config: GeoConfig, watched: Watched, metrics: WatchedMetrics) -> cw.Dashboard:
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{config.prefix}-geo-rebalancer-{Aws.REGION}")
        dashboard.add_widgets(
            cw.GraphWidget(title="Worker utilisation (max, from cost reports)", left=[metrics.utilisation], width=12),
            cw.GraphWidget(title="Active spec age (s)", left=[metrics.spec_age], width=12),
        )
        dashboard.add_widgets(
            cw.GraphWidget(title="Router iterator age (ms)", left=[metrics.iterator_age], width=8),
            cw.GraphWidget(title="Quarantined writes / 5 min", left=[metrics.quarantined], width=8),
            cw.GraphWidget(title="Failed deploys", left=[metrics.failed_deploys], width=8),
        )
        five = Duration.minutes(5)
        functions = (watched.router, watched.partitioner, watched.deployer, watched.hooks)
        dashboard.add_widgets(
            cw.GraphWidget(title="Lambda errors", left=[fn.metric_errors(period=five) for fn in functions], width=12),
            cw.GraphWidget(title="Router failure queue", left=[metrics.router_failures], width=12),
        )
        dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24))
        return dashboard

    def _alarm(self, name: str, metric: cw.IMetric, threshold: float, periods: int, description: str, *,
               missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING) -> None:
        alarm = cw.Alarm(
            self,
            f"{name}Alarm",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=missing,
            alarm_description=f"Geo Rebalancer: {description}",
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self.alarms[name] = alarm
