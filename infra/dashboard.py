"""The deployment's CloudWatch dashboard: one row per concern, then every alarm's state.

* **Ingest**: the router's lag behind the ingest stream, what it routed, quarantined and failed, and the throttles
  on the streams (ingest writes, geo-stream writes and reads);
* **Control loop**: the busiest worker's utilisation and the active spec's age (the partitioner, per snapshot), the
  partitioner's outcomes, the Lambdas' errors and throttles, the tables' throttles;
* **Workers**: events written and quarantined, transform errors, the lag behind the geo streams, transform time
  (p50, p99), how long output waits in the buffer, and the service's running against desired tasks;
* **Swaps**: the deployer's status after each step (``DeployStatus_*``), the fleets ECS rolled back, the hooks'
  answers and the failed ECS deployments.

Every custom metric is read in the deployment's dimension set (:class:`infra.metrics.Custom`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aws_cdk import Aws
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from geokernel.contracts.control import DeployStatus
from geokernel.contracts.metric_names import (
    PARTITIONER_OUTCOME_METRICS,
    Metric,
    MetricService,
    deploy_status_metric,
    fleet_reconciled_metric,
    hook_status_metric,
)
from infra.config import GeoConfig
from infra.metrics import CONTAINER_INSIGHTS, FIVE, ONE, Custom, Watched, WatchedMetrics

HOOK_ANSWERS = ("IN_PROGRESS", "SUCCEEDED", "FAILED")  # lambdas/deploy/hooks.py
FLEET_RECONCILED = ("rolled_back", "redeployed")  # lambdas/deploy/code.py Reconciled


def _graph(title: str, metrics: Iterable[cw.IMetric], width: int = 6, right: Iterable[cw.IMetric] = (),
           stacked: bool = False) -> cw.GraphWidget:
    return cw.GraphWidget(title=title, left=list(metrics), right=list(right), width=width, height=6, stacked=stacked)


def _row(title: str) -> cw.TextWidget:
    return cw.TextWidget(markdown=f"## {title}", width=24, height=1)


def ingest_row(own: Custom, watched: Watched, metrics: WatchedMetrics) -> list[cw.IWidget]:
    counts = [own.metric(m, MetricService.ROUTER, label=m) for m in (Metric.ROUTED, Metric.QUARANTINED,
                                                                     Metric.ROUTE_FAILURES)]
    return [
        _row("Ingest: router"),
        _graph("Router iterator age (ms, max)", [metrics.iterator_age]),
        _graph("Routed, quarantined, failed / 5 min", counts),
        _graph("Quarantined writes / 5 min; router failure queue", [metrics.quarantined, metrics.router_failures]),
        _graph("Stream throttles / 5 min (ingest writes, geo writes, geo reads)", [metrics.stream_throttles]),
    ]


def control_row(own: Custom, watched: Watched, metrics: WatchedMetrics) -> list[cw.IWidget]:
    outcomes = [own.metric(m, MetricService.PARTITIONER, label=m) for m in PARTITIONER_OUTCOME_METRICS.values()]
    errors = [fn.metric_errors(period=FIVE, label=f"{name} errors") for name, fn in watched.functions.items()]
    return [
        _row("Control loop: snapshots, specs, Lambdas"),
        _graph("Worker utilisation (max, from cost reports)", [metrics.utilisation]),
        _graph("Active spec age (s)", [metrics.spec_age]),
        _graph("Partitioner outcomes / 5 min", outcomes),
        _graph("Lambda errors, Lambda and table throttles / 5 min",
               [*errors, metrics.lambda_throttles, metrics.table_throttles]),
    ]


def workers_row(own: Custom, watched: Watched, metrics: WatchedMetrics) -> list[cw.IWidget]:
    w = MetricService.WORKER
    service = {"ClusterName": watched.cluster_name, "ServiceName": watched.service_name}
    tasks = [cw.Metric(namespace=CONTAINER_INSIGHTS, metric_name=name, dimensions_map=service, statistic="Average",
                       period=ONE, label=name) for name in ("DesiredTaskCount", "RunningTaskCount")]
    return [
        _row("Workers"),
        _graph("Events written, quarantined, transform errors / 5 min",
               [own.metric(m, w, label=m) for m in (Metric.EVENTS_PROCESSED, Metric.EVENTS_QUARANTINED,
                                                    Metric.TRANSFORM_ERRORS)]),
        _graph("Lag behind the geo streams (ms, max)", [metrics.worker_lag]),
        _graph("Transform time per event (ms)", [own.metric(Metric.TRANSFORM_TIME, w, stat, ONE, f"{stat}")
                                                 for stat in ("p50", "p99")]),
        _graph("Output wait before a flush (s); tasks",
               [own.metric(Metric.OUTPUT_FLUSH_AGE, w, "Maximum", ONE, "flush age max")],
               right=tasks),
    ]


def swaps_row(own: Custom, metrics: WatchedMetrics) -> list[cw.IWidget]:
    d, h = MetricService.DEPLOYER, MetricService.DEPLOY_HOOKS
    statuses = [own.metric(deploy_status_metric(s), d, label=s.value) for s in DeployStatus]
    fleets = [own.metric(fleet_reconciled_metric(r), d, label=fleet_reconciled_metric(r)) for r in FLEET_RECONCILED]
    hooks = [own.metric(hook_status_metric(a), h, label=hook_status_metric(a)) for a in HOOK_ANSWERS]
    ignored = own.metric(Metric.DEPLOY_REQUEST_IGNORED, d, label="requests ignored")
    return [
        _row("Swaps: deploys, fleets, hooks"),
        _graph("Deploy status after each deployer step / 5 min", statuses, width=12, stacked=True),
        _graph("ECS rollbacks, failed deploys, requests ignored / 5 min", [*fleets, metrics.failed_deploys, ignored]),
        _graph("Hook answers / 5 min", [*hooks, own.metric(Metric.HOOK_BAD_EVENT, h, label="bad events")]),
    ]


def build_dashboard(scope: Construct, config: GeoConfig, watched: Watched, metrics: WatchedMetrics,
                    alarms: Mapping[str, cw.Alarm]) -> cw.Dashboard:
    """The dashboard ``<prefix>-geo-rebalancer-<region>``: the rows of the module docstring and the alarms."""
    own = Custom(deployment=config.prefix)
    dashboard = cw.Dashboard(scope, "Dashboard", dashboard_name=f"{config.prefix}-geo-rebalancer-{Aws.REGION}")
    for row in (ingest_row(own, watched, metrics), control_row(own, watched, metrics),
                workers_row(own, watched, metrics), swaps_row(own, metrics)):
        dashboard.add_widgets(row[0])
        dashboard.add_widgets(*row[1:])
    dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=list(alarms.values()), width=24))
    return dashboard
