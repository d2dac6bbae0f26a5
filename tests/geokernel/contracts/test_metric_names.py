"""geokernel.contracts.metric_names: the namespace, the emitters' service names and every metric name, once."""

from __future__ import annotations

from geokernel.contracts.metric_names import (
    DEPLOYMENT_DIMENSION,
    METRICS,
    NAMESPACE,
    PARTITIONER_OUTCOME_METRICS,
    SERVICE_DIMENSION,
    Metric,
    MetricService,
    deploy_status_metric,
    fleet_reconciled_metric,
    hook_status_metric,
    metric_dimensions,
)


def test_the_stored_names_stay_the_same() -> None:
    # GIVEN the names CloudWatch already holds (alarms and dashboards read them)
    # THEN they are unchanged
    assert (NAMESPACE, SERVICE_DIMENSION, DEPLOYMENT_DIMENSION) == ("GeoRebalancer", "service", "deployment")
    assert (Metric.WORKER_UTILISATION, Metric.SPEC_AGE) == ("WorkerUtilisation", "SpecAgeSeconds")
    assert [s.value for s in MetricService] == ["partitioner", "router", "deployer", "deploy-hooks", "geo-worker"]
    assert dict(PARTITIONER_OUTCOME_METRICS) == {
        "published": "SpecPublished", "held": "SpecHeldByPolicy", "duplicate": "SnapshotDuplicate",
        "rejected": "SnapshotRejected", "superseded": "SpecSuperseded",
    }  # fmt: skip


def test_every_fixed_name_is_documented() -> None:
    # GIVEN the documentation table
    # THEN every metric has an emitter and a meaning
    assert set(METRICS) == set(Metric)
    assert all(use.meaning.strip() and isinstance(use.service, MetricService) for use in METRICS.values())


def test_names_built_from_a_state() -> None:
    # GIVEN a deploy status, a hook answer and a fleet reconciliation
    # THEN the names are spelled as the dashboards know them
    assert deploy_status_metric("waiting_green") == "DeployStatus_waiting_green"
    assert hook_status_metric("IN_PROGRESS") == "HookInProgress"
    assert hook_status_metric("SUCCEEDED") == "HookSucceeded"
    assert fleet_reconciled_metric("rolled_back") == "FleetRolledBack"


def test_one_dimension_set_per_emitter_and_deployment() -> None:
    # GIVEN the worker metrics of deployment "alpha" and "beta"
    alpha, beta = (metric_dimensions(MetricService.WORKER, d) for d in ("alpha", "beta"))
    # THEN each is the service and the deployment, nothing per worker or version, and the two differ
    assert alpha == {"service": "geo-worker", "deployment": "alpha"} and alpha != beta
