"""CloudWatch alarms and dashboard, with an encrypted SNS topic for alarm notifications.

The metrics are in ``infra/metrics.py`` (the project's own in the deployment's dimension set ``service`` +
``deployment``, and the AWS metrics of the watched resources), the dashboard in ``infra/dashboard.py``. Each alarm has a
row in docs/DEPLOY.md, "When things go wrong". Alarms (name: what it reads):

* ``WorkerUtilisation``, ``SpecAge``: the partitioner's ``WorkerUtilisation`` and ``SpecAgeSeconds``;
* ``RouterIteratorAge``, ``QuarantineRate``, ``RouterFailures``: the router's ``IteratorAge``, the quarantine bucket's
  request metrics, the router's failure queue;
* ``FailedDeploys``: an EventBridge rule on ECS ``SERVICE_DEPLOYMENT_FAILED`` for the worker service;
* ``PartitionerDeadLetters``, ``DeployerDeadLetters``, ``PartitionerErrors``, ``DeployerErrors``, ``HooksErrors``;
* ``WorkerLag``: the workers' ``MillisBehindLatest``, max over the deployment;
* ``TableThrottles``, ``StreamThrottles``, ``LambdaThrottles``: throttling of the two tables, of the ingest and geo
  streams, of the four functions, sustained for 15 minutes;
* ``WorkersBelowDesired``: the worker service ran fewer tasks than desired for 15 minutes (Container Insights);
* ``DeployRolledBack``: the deployer's status is ``rolled_back`` (``DeployStatus_rolled_back``): a swap of either
  mode rolled back (a carry swap has no ECS deployment for ``FailedDeploys`` to see).

Per worker, the lag is in the workers' EMF lines (properties ``version``, ``worker_id``, ``behind_ms``), not in a
metric: the Contributor Insights rule ``<prefix>-worker-lag`` ranks the slots by it
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/ContributorInsights-RuleSyntax.html).

A deployment without ``alarm_email`` has no subscriber on its topic: synth says so with a warning on the stack, and the
``AlarmSubscribers`` output reads ``none (set alarm_email)`` (``infra/outputs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, Aws, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from infra.config import GeoConfig
from infra.dashboard import build_dashboard
from infra.metrics import FIVE, Watched, WatchedMetrics, watched_metrics

ROUTER_ITERATOR_AGE_MS = 60_000
WORKER_LAG_MS = 60_000  # a worker more than a minute behind its geo-stream shard, for 5 minutes
SPEC_AGE_PERIODS = 3  # windows without a snapshot before the SpecAge alarm fires on missing data
SUSTAINED_PERIODS = 3  # 5-minute periods a throttle or a missing task must last before its alarm fires
NO_SUBSCRIBER = "none (set alarm_email)"
NO_SUBSCRIBER_WARNING = "geo-rebalancer:no-alarm-subscriber"


def alarm_subscribers(config: GeoConfig) -> str:
    """Who the alarm topic notifies, as the ``AlarmSubscribers`` output says it."""
    return f"email {config.alarm_email}" if config.alarm_email else NO_SUBSCRIBER


@dataclass(frozen=True, slots=True)
class AlarmSpec:
    """One alarm: its metric, the threshold it must exceed for ``periods`` periods, what it means."""

    metric: cw.IMetric
    threshold: float
    periods: int
    description: str
    missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING


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
        else:
            Annotations.of(Stack.of(self)).add_warning_v2(
                NO_SUBSCRIBER_WARNING,
                "alarm_email is empty: the alarm topic has no subscriber and no alarm reaches anyone. Deploy with "
                "-c alarm_email=ops@example.com, or subscribe to the topic (output AlarmTopic) yourself.")
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
        for name, spec in self._specs(config, watched, metrics).items():
            self._alarm(name, spec)
        self.dashboard = build_dashboard(self, config, watched, metrics, self.alarms)
        self.lag_contributors = self._lag_contributors(config, watched)

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

    def _lag_contributors(self, config: GeoConfig, watched: Watched) -> cw.CfnInsightRule:
        """The slots that lag most: the sum of ``behind_ms`` of their EMF lines, by version and worker id."""
        body = {
            "Schema": {"Name": "CloudWatchLogRule", "Version": 1},
            "LogGroupNames": [watched.worker_logs.log_group_name],
            "LogFormat": "JSON",
            "Contribution": {"Keys": ["$.version", "$.worker_id"], "ValueOf": "$.behind_ms",
                             "Filters": [{"Match": "$.behind_ms", "IsPresent": True}]},
            "AggregateOn": "Sum",
        }
        return cw.CfnInsightRule(self, "WorkerLagContributors", rule_name=f"{config.prefix}-worker-lag",
                                 rule_state="ENABLED", rule_body=Stack.of(self).to_json_string(body))

    @staticmethod
    def _specs(config: GeoConfig, watched: Watched, m: WatchedMetrics) -> dict[str, AlarmSpec]:
        """Every alarm by name (the module docstring)."""
        specs = {
            "WorkerUtilisation": AlarmSpec(m.utilisation, config.utilisation_alarm, 3,
                                           "a worker's load exceeds its share"),
            # The partitioner emits SpecAge once per snapshot: no data means no snapshot (the Spark job or the
            # partitioner stopped), which is exactly what must not stay silent. CloudWatch evaluates missing data as
            # breaching when told to ("Configuring how CloudWatch alarms treat missing data",
            # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html).
            "SpecAge": AlarmSpec(m.spec_age, config.spec_age_alarm_s, SPEC_AGE_PERIODS,
                                 "the active spec is older than spec_age_alarm_s, or no snapshot reached the "
                                 f"partitioner for {SPEC_AGE_PERIODS} windows", cw.TreatMissingData.BREACHING),
            "RouterIteratorAge": AlarmSpec(m.iterator_age, ROUTER_ITERATOR_AGE_MS, 5,
                                           "the router falls behind the ingest stream"),
            "QuarantineRate": AlarmSpec(m.quarantined, config.quarantine_alarm_per_5min, 1,
                                        "many events are quarantined"),
            "FailedDeploys": AlarmSpec(m.failed_deploys, 0, 1, "an ECS blue/green deploy of the workers failed"),
            "RouterFailures": AlarmSpec(m.router_failures, 0, 1, "router batches ended in the failure queue"),
        }
        for name, queue in watched.async_failures.items():
            specs[f"{name}DeadLetters"] = AlarmSpec(
                queue.metric_approximate_number_of_messages_visible(period=FIVE), 0, 1,
                f"S3 events the {name.lower()} Lambda failed on after its retries (kept in its dead-letter queue)")
        for name in ("Partitioner", "Deployer", "Hooks"):
            errors = watched.functions[name].metric_errors(period=FIVE, statistic="Sum")
            specs[f"{name}Errors"] = AlarmSpec(errors, 0, 1, f"the {name.lower()} Lambda failed")
        specs |= {
            "WorkerLag": AlarmSpec(m.worker_lag, WORKER_LAG_MS, 5,
                                   "a worker is more than a minute behind its geo-stream shard (MillisBehindLatest)"),
            "TableThrottles": AlarmSpec(m.table_throttles, 0, SUSTAINED_PERIODS,
                                        "DynamoDB throttles reads or writes of the control or leases table"),
            "StreamThrottles": AlarmSpec(m.stream_throttles, 0, SUSTAINED_PERIODS,
                                         "Kinesis throttles the ingest stream's producers or the geo streams' router "
                                         "puts or worker reads"),
            "LambdaThrottles": AlarmSpec(m.lambda_throttles, 0, SUSTAINED_PERIODS,
                                         "Lambda throttles the router, partitioner, deployer or hooks"),
            "WorkersBelowDesired": AlarmSpec(m.workers_missing, 0, SUSTAINED_PERIODS,
                                             "the worker service runs fewer tasks than desired"),
            "DeployRolledBack": AlarmSpec(m.rolled_back, 0, 1,
                                          "a spec version was rolled back (DeployStatus_rolled_back)"),
        }
        return specs

    def _alarm(self, name: str, spec: AlarmSpec) -> None:
        alarm = cw.Alarm(
            self,
            f"{name}Alarm",
            metric=spec.metric,
            threshold=spec.threshold,
            evaluation_periods=spec.periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=spec.missing,
            alarm_description=f"Geo Rebalancer: {spec.description}",
        )
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self.alarms[name] = alarm

