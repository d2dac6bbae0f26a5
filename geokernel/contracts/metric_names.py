"""CloudWatch metric names: the namespace, the dimensions of each emitter, and every metric name.

The Lambdas and the geo workers emit these as embedded-metric-format logs (Powertools ``Metrics(namespace=NAMESPACE,
service=...)`` with the default dimension ``deployment``; the workers through ``geo_service/adapters/metrics.py``);
``infra/monitoring.py`` builds the alarms and the dashboard on the same names. A metric the dashboard reads is named
here once, so the emitter and the alarm cannot drift apart.

Every custom metric carries exactly one dimension set, :func:`metric_dimensions`: the emitter's ``service`` and the
``deployment`` (the stack's name prefix, ``GEO_PREFIX``), so two deployments in one account and region never share a
metric, and an alarm names the whole set. No metric has a worker, slot or version dimension: at 1,000 workers and
~165 spec versions a day those would be thousands of metrics (docs/COST.md) that no alarm could name in advance;
the workers put that detail in the properties of their EMF lines instead (their logs).

Names that carry a state (a deploy status, a hook answer, a fleet reconciliation) are built by
:func:`deploy_status_metric`, :func:`hook_status_metric` and :func:`fleet_reconciled_metric`.

This module imports nothing of the project and no AWS library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from geokernel.contracts.outcome import OutcomeStatus

#: The CloudWatch namespace of every metric the system emits.
NAMESPACE = "GeoRebalancer"
#: The dimension Powertools adds to every metric: the emitting :class:`MetricService`.
SERVICE_DIMENSION = "service"
#: The default dimension every emitter adds beside ``service``: the deployment's name prefix (``GEO_PREFIX``).
DEPLOYMENT_DIMENSION = "deployment"


class MetricService(StrEnum):
    """The ``service`` dimension of each emitter."""

    PARTITIONER = "partitioner"
    ROUTER = "router"
    DEPLOYER = "deployer"
    DEPLOY_HOOKS = "deploy-hooks"
    WORKER = "geo-worker"  # the geo workers (ECS tasks); also the ``service`` of their log lines


class Metric(StrEnum):
    """Every metric name with a fixed spelling."""

    # partitioner: one per snapshot, by outcome (PARTITIONER_OUTCOME_METRICS), and the two the alarms read
    SPEC_PUBLISHED = "SpecPublished"
    SPEC_HELD_BY_POLICY = "SpecHeldByPolicy"
    SNAPSHOT_DUPLICATE = "SnapshotDuplicate"
    SNAPSHOT_REJECTED = "SnapshotRejected"
    SPEC_SUPERSEDED = "SpecSuperseded"
    WORKER_UTILISATION = "WorkerUtilisation"
    SPEC_AGE = "SpecAgeSeconds"
    SURGE_RELIEVED = "SurgeRelieved"
    # router: per batch
    ROUTED = "Routed"
    QUARANTINED = "Quarantined"
    ROUTE_FAILURES = "RouteFailures"
    GEO_WRITE_THROTTLED = "GeoWriteThrottled"
    SURGE_SIGNALS = "SurgeSignals"
    # deployer and hooks
    DEPLOY_REQUEST_IGNORED = "DeployRequestIgnored"
    HOOK_BAD_EVENT = "HookBadEvent"
    # geo workers: per EMF line (a process's metrics since its last line)
    EVENTS_PROCESSED = "EventsProcessed"
    EVENTS_QUARANTINED = "EventsQuarantined"
    TRANSFORM_ERRORS = "TransformErrors"
    TRANSFORM_TIME = "TransformTime"
    MILLIS_BEHIND_LATEST = "MillisBehindLatest"
    OUTPUT_FLUSH_AGE = "OutputFlushAge"
    GEO_READ_THROTTLED = "GeoReadThrottled"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricUse:
    """Who emits a metric and what one data point means."""

    service: MetricService
    meaning: str


#: The partitioner's metric for each outcome status of a snapshot (``lambdas/partitioner/logic.py`` ``Outcome``).
PARTITIONER_OUTCOME_METRICS: Mapping[OutcomeStatus, Metric] = MappingProxyType({
    OutcomeStatus.PUBLISHED: Metric.SPEC_PUBLISHED,
    OutcomeStatus.HELD: Metric.SPEC_HELD_BY_POLICY,
    OutcomeStatus.DUPLICATE: Metric.SNAPSHOT_DUPLICATE,
    OutcomeStatus.REJECTED: Metric.SNAPSHOT_REJECTED,
    OutcomeStatus.SUPERSEDED: Metric.SPEC_SUPERSEDED,
})  # fmt: skip

_P, _R = MetricService.PARTITIONER, MetricService.ROUTER
_D, _H, _W = MetricService.DEPLOYER, MetricService.DEPLOY_HOOKS, MetricService.WORKER

#: What each fixed-name metric means.
METRICS: Mapping[Metric, MetricUse] = MappingProxyType({
    Metric.SPEC_PUBLISHED: MetricUse(service=_P, meaning="A snapshot produced a new spec version (count)."),
    Metric.SPEC_HELD_BY_POLICY: MetricUse(service=_P, meaning="The policy kept the live spec for a snapshot (count)."),
    Metric.SNAPSHOT_DUPLICATE: MetricUse(service=_P, meaning="A snapshot was processed already (count)."),
    Metric.SNAPSHOT_REJECTED: MetricUse(service=_P, meaning="A snapshot was invalid; the live spec stays (count)."),
    Metric.SPEC_SUPERSEDED: MetricUse(service=_P, meaning="Another invocation published a spec version concurrently (count)."),
    Metric.WORKER_UTILISATION: MetricUse(
        service=_P, meaning="The live spec's busiest worker: measured load / max_load (alarm WorkerUtilisation)."),
    Metric.SPEC_AGE: MetricUse(
        service=_P, meaning="Seconds since the active spec was flipped, once per snapshot (alarm SpecAge)."),
    Metric.SURGE_RELIEVED: MetricUse(
        service=_P, meaning="A surge signal's relief was published as a new spec version (count)."),
    Metric.ROUTED: MetricUse(service=_R, meaning="Events written to a geo stream (count per batch)."),
    Metric.QUARANTINED: MetricUse(service=_R, meaning="Events sent to the quarantine bucket (count per batch)."),
    Metric.ROUTE_FAILURES: MetricUse(service=_R, meaning="Records reported as batch item failures (count per batch)."),
    Metric.GEO_WRITE_THROTTLED: MetricUse(
        service=_R, meaning="Records a geo stream throttled (PutRecords ProvisionedThroughputExceeded; count per "
                            "batch; alarm StreamThrottles)."),
    Metric.SURGE_SIGNALS: MetricUse(
        service=_R, meaning="A surge signal this environment put first (a worker heading past its cap; count)."),
    Metric.DEPLOY_REQUEST_IGNORED: MetricUse(
        service=_D, meaning="A spec object whose version the control item 'desired' never reached (count)."),
    Metric.HOOK_BAD_EVENT: MetricUse(service=_H, meaning="A lifecycle hook event that could not be parsed (count)."),
    Metric.EVENTS_PROCESSED: MetricUse(service=_W, meaning="Enriched events written to the output bucket (count)."),
    Metric.EVENTS_QUARANTINED: MetricUse(
        service=_W, meaning="Records written to the quarantine bucket: undecodable, or the transform failed (count)."),
    Metric.TRANSFORM_ERRORS: MetricUse(service=_W, meaning="Events the transform raised on, quarantined (count)."),
    Metric.TRANSFORM_TIME: MetricUse(
        service=_W, meaning="Milliseconds the transform took per event: up to 100 values per line, all of them or "
                            "evenly spaced quantiles of a sample (p99 on the dashboard)."),
    Metric.MILLIS_BEHIND_LATEST: MetricUse(
        service=_W, meaning="How far a worker's reads are behind the tip of its geo-stream shards: the largest "
                            "MillisBehindLatest GetRecords returned since its last line (alarm WorkerLag)."),
    Metric.OUTPUT_FLUSH_AGE: MetricUse(
        service=_W, meaning="Seconds the oldest row of an output flush waited in the buffer (one value per flush)."),
    Metric.GEO_READ_THROTTLED: MetricUse(
        service=_W, meaning="GetRecords calls a geo stream throttled (count; alarm StreamThrottles)."),
})  # fmt: skip


def metric_dimensions(service: MetricService, deployment: str) -> dict[str, str]:
    """The one dimension set of every custom metric of ``service`` in ``deployment`` (the alarms name all of it)."""
    return {SERVICE_DIMENSION: service.value, DEPLOYMENT_DIMENSION: deployment}


def deploy_status_metric(status: str) -> str:
    """The deployer's metric for the deployment status after a step: ``DeployStatus_<status>`` (e.g. ``idle``)."""
    return f"DeployStatus_{status}"


def hook_status_metric(hook_status: str) -> str:
    """The hooks' metric for their answer to ECS: ``Hook<Status>`` (``IN_PROGRESS`` -> ``HookInProgress``)."""
    return f"Hook{hook_status.title().replace('_', '')}"


def fleet_reconciled_metric(reconciled: str) -> str:
    """The deployer's metric for a fleet ECS rolled back: ``Fleet<What>`` (``rolled_back`` -> ``FleetRolledBack``)."""
    return f"Fleet{reconciled.title().replace('_', '')}"
