"""Partitioner Lambda: S3 ObjectCreated on ``snapshots/**/_manifest.json`` (the window path) and on the routers'
surge signals ``control/surge/**.json`` in the specs bucket (the fast path).

Entry point ``lambdas/partitioner/handler.py:handler``. Env: ``CONTROL_TABLE``, ``SNAPSHOTS_BUCKET``,
``SPECS_BUCKET``, ``MAX_LOAD``, optional ``COSTS_BUCKET``, ``POLICY_JSON``, ``GEO_PREFIX``,
``AWS_ENDPOINT_URL``. Each manifest goes through :func:`lambdas.partitioner.logic.process_snapshot`;
bad snapshots are rejected with a ``SnapshotRejected`` metric and a logged reason (the live spec
stays); each surge signal through :func:`lambdas.partitioner.surge.process_surge` (a relief published counts
``SurgeRelieved``). Both publish by compare and swap on ``desired`` (:mod:`lambdas.partitioner.publish`), so the
two paths never overwrite each other's version. AWS failures raise so the invocation is retried.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from geokernel.contracts.metric_names import PARTITIONER_OUTCOME_METRICS, Metric, MetricService
from geokernel.contracts.outcome import OutcomeStatus
from geokernel.contracts.snapshot import is_manifest_key
from geokernel.contracts.surge import parse_signal_key
from lambdas.partitioner.logic import Outcome, PartitionerDeps, process_snapshot
from lambdas.partitioner.surge import SurgeOutcome, process_surge
from lambdas.runtime.clients import make_clients
from lambdas.runtime.config import LambdaConfig
from lambdas.runtime.metrics import function_metrics
from lambdas.runtime.records import read_active

logger = Logger(service=MetricService.PARTITIONER.value)
metrics = function_metrics(MetricService.PARTITIONER)



@functools.cache
def deps() -> PartitionerDeps:
    """Build adapters once per container (``deps.cache_clear()`` rebuilds, e.g. in tests)."""
    cfg = LambdaConfig.from_env()
    return PartitionerDeps.from_config(cfg, make_clients(cfg))


def manifest_keys(event: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (bucket, key) of every snapshot manifest in an S3 event (other keys are ignored)."""
    out: list[tuple[str, str]] = []
    for r in event.get("Records", []):
        s3 = r.get("s3", {})
        key = unquote_plus(str(s3.get("object", {}).get("key", "")))
        bucket = str(s3.get("bucket", {}).get("name", ""))
        if is_manifest_key(key):
            out.append((bucket, key))
    return out


def signal_keys(event: dict[str, Any]) -> list[tuple[str, str]]:
    """Return (bucket, key) of every surge signal in an S3 event (other keys are ignored)."""
    out: list[tuple[str, str]] = []
    for r in event.get("Records", []):
        s3 = r.get("s3", {})
        key = unquote_plus(str(s3.get("object", {}).get("key", "")))
        if parse_signal_key(key) is not None:
            out.append((str(s3.get("bucket", {}).get("name", "")), key))
    return out


def record_surge(outcome: SurgeOutcome) -> None:
    """Emit the relief's metric (when one was published) and log line."""
    if outcome.status == OutcomeStatus.PUBLISHED:
        metrics.add_metric(name=Metric.SURGE_RELIEVED, unit=MetricUnit.Count, value=1)
    extra = {"signal": outcome.signal_key, "status": outcome.status, "reason": outcome.reason, "code": outcome.code,
             "version": outcome.version, "moved": list(outcome.moved)}
    if outcome.status == OutcomeStatus.REJECTED:
        logger.error("surge signal rejected", extra=extra)
    else:
        logger.info("surge signal processed", extra=extra)


def record_outcome(outcome: Outcome) -> None:
    """Emit the outcome's metric and log line."""
    metrics.add_metric(name=PARTITIONER_OUTCOME_METRICS[outcome.status], unit=MetricUnit.Count, value=1)
    if outcome.max_utilisation is not None:
        metrics.add_metric(name=Metric.WORKER_UTILISATION, unit=MetricUnit.NoUnit, value=outcome.max_utilisation)
    extra = {"manifest": outcome.manifest_key, "status": outcome.status, "reason": outcome.reason,
             "code": outcome.code, "version": outcome.version, "workers": outcome.workers}
    if outcome.status == OutcomeStatus.REJECTED:
        logger.error("snapshot rejected; the live spec stays", extra=extra)
    else:
        logger.info("snapshot processed", extra=extra)


def record_spec_age(control: Any, now: datetime) -> float | None:
    """Emit the age of the active spec (now - flipped_at) in seconds; None while nothing is active."""
    active = read_active(control)
    if active is None or not active.flipped_at:
        return None
    try:
        flipped = datetime.fromisoformat(active.flipped_at.replace("Z", "+00:00"))
    except ValueError:
        logger.warning("active pointer has an unreadable flipped_at", extra={"flipped_at": active.flipped_at})
        return None
    age = max(0.0, (now - flipped).total_seconds())
    metrics.add_metric(name=Metric.SPEC_AGE, unit=MetricUnit.Seconds, value=age)
    return age


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Process every snapshot manifest named in the S3 event."""
    d = deps()
    results = []
    for bucket, key in manifest_keys(event):
        if bucket and bucket != d.snapshots.bucket:
            logger.warning("manifest from an unexpected bucket ignored", extra={"bucket": bucket, "key": key})
            continue
        outcome = process_snapshot(d, key)
        record_outcome(outcome)
        record_spec_age(d.control, datetime.now(UTC))
        results.append({"manifest": key, "status": outcome.status, "reason": outcome.reason, "code": outcome.code,
                        "version": outcome.version})
    for bucket, key in signal_keys(event):
        if bucket and d.surges is not None and bucket != d.surges.bucket:
            logger.warning("surge signal from an unexpected bucket ignored", extra={"bucket": bucket, "key": key})
            continue
        relief = process_surge(d, key)
        record_surge(relief)
        results.append({"signal": key, "status": relief.status, "reason": relief.reason, "code": relief.code,
                        "version": relief.version})
    return {"results": results}
