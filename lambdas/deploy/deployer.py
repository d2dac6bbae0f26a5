"""Deployer Lambda: start the deployment of a newly published spec.

Entry point ``lambdas/deploy/deployer.py:handler``. Triggers (any of):

* S3 ObjectCreated on ``specs/v<version:08d>.json`` in the specs bucket;
* a direct (async) invoke ``{"version": <int>}``;
* ``{"action": "step"}`` or any EventBridge event (``"source"`` present), e.g. a 1-minute schedule or
  the ECS deployment state-change event: advances the state machine (starts a queued version once
  the previous deployment finished, times out a stuck one).

A version is only requested once control ``pk="desired"`` has reached it (the partitioner writes the
spec object before moving the pointer; the deployer waits up to ``DESIRED_WAIT_S`` for it). Then
:meth:`DeployController.step` creates the geo stream (provisioned, ``spec.shard_count`` shards: each worker's ``k``), waits for it
to be ACTIVE (``STREAM_ACTIVE_WAIT_S``), stores the deploy plan and starts the fleet's part of it: in
``whole`` mode a task-definition revision carrying ``SPEC_VERSION`` (ECS's blue/green deployment, whose
lifecycle hooks then hold green and drain blue); in ``carry`` mode (``SWAP_MODE``, the default) only the
service's desired count. No ECS deployment and so no hook is involved in a carry swap, so the deployer itself
keeps stepping (every ``HOOK_CALLBACK_DELAY_S``) while the deployment is in flight and the invocation has time
left (:func:`settle`): green ready -> flip -> blue drained -> desired count lowered. A swap that outlasts one
invocation is resumed by the next event (the schedule's ``{"action": "step"}``). Env: ``CONTROL_TABLE``,
``LEASES_TABLE``, ``SPECS_BUCKET``, ``ECS_CLUSTER``, ``ECS_SERVICE``, optional ``GEO_PREFIX``,
``GREEN_TIMEOUT_S``, ``DRAIN_TIMEOUT_S``, ``STREAM_ACTIVE_WAIT_S``, ``HOOK_CALLBACK_DELAY_S``, ``SWAP_MODE``,
``WORKER_TASK_DEFINITION``.

Every wait is bounded by the invocation's remaining time (:func:`stream_wait_budget`, ``SETTLE_MARGIN_S``), so
no wait outlives the Lambda timeout; the one-minute schedule (``infra/deploy.py``) resumes what is left. When the
deployment is finished and the fleet runs other code than the stack's template revision, the live spec is
redeployed as a new version (:mod:`lambdas.deploy.code`). In ``whole`` mode every invocation also reconciles the
controller with what ECS did (:func:`lambdas.deploy.code.reconcile_fleet`): a deployment ECS rolled back before its
flip (a hook invocation failed or timed out) is marked rolled back at once, and after the flip the live version is
deployed again; the ECS deployment events of the service invoke it (``infra/deploy.py``, ``DeploymentEvents``).
It reconciles before it steps, and a new swap starts only while the service runs the live version
(:func:`lambdas.deploy.code.may_start`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from geokernel.contracts.control import DeployState
from geokernel.contracts.metric_names import (
    Metric,
    MetricService,
    deploy_status_metric,
    fleet_reconciled_metric,
)
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.spec_pointer import parse_spec_key
from lambdas.deploy.code import Reconciled, may_start, reconcile_fleet, redeploy_live_spec
from lambdas.deploy.controller import DeployController
from lambdas.deploy.runtime import config, controller
from lambdas.runtime.errors import LambdaError
from lambdas.runtime.metrics import function_metrics
from lambdas.runtime.records import read_desired

logger = Logger(service=MetricService.DEPLOYER.value)
metrics = function_metrics(MetricService.DEPLOYER)

DESIRED_WAIT_S = 10.0


class DeployEventError(LambdaError, ValueError):
    """The event names no usable version; the message shows the bad value."""


def requested_versions(event: dict[str, Any]) -> list[int]:
    """Return the spec versions an event asks to deploy (empty for a plain ``step``)."""
    if "Records" in event:
        out = []
        for r in event["Records"]:
            key = unquote_plus(str(r.get("s3", {}).get("object", {}).get("key", "")))
            version = parse_spec_key(key)
            if version is not None:
                out.append(version)
            else:
                logger.warning("ignored S3 object that is not a spec", extra={"key": key})
        return out
    if "source" in event and "detail-type" in event:
        return []  # an EventBridge event: its envelope has "version": "0", which is not a spec version
    if "version" in event:
        v = event["version"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise DeployEventError(f"deployer event 'version' must be a positive integer, got {v!r}")
        return [v]
    if event.get("action") == "step" or "source" in event:
        return []
    raise DeployEventError(f"deployer event not understood (expected S3 records, 'version' or 'action'): "
                           f"keys {sorted(event)!r}")


def await_desired(ctl: DeployController, version: int, wait_s: float,
                  sleep: Callable[[float], None] = time.sleep) -> bool:
    """True once control ``pk="desired"`` is at ``version`` or later (polls up to ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        desired = read_desired(ctl.control)
        if desired is not None and desired.version >= version:
            return True
        if time.monotonic() >= deadline:
            return False
        sleep(min(0.5, max(0.01, deadline - time.monotonic())))


SETTLE_MARGIN_S = 20.0  # stop stepping this long before the invocation's timeout


def stream_wait_budget(remaining_s: float, configured_s: float) -> float:
    """How long one stream wait may block: a step in ``deploying`` waits up to twice (ACTIVE after create, ACTIVE
    after encryption), so each gets half of what the invocation has left after the margin, at most
    ``STREAM_ACTIVE_WAIT_S``. A stream not ACTIVE in time is picked up by the next event (the schedule)."""
    return max(0.0, min(configured_s, (remaining_s - SETTLE_MARGIN_S) / 2.0))


def settle(ctl: DeployController, remaining_s: float, every_s: float,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> DeployState:
    """Step a carry-mode deployment every ``every_s`` while it is in flight and ``remaining_s`` (the invocation's
    time left when called) leaves room; return the last state."""
    deadline = clock() + remaining_s - SETTLE_MARGIN_S
    st = ctl.state()
    while st.in_flight and clock() + every_s < deadline:
        sleep(every_s)
        st = ctl.step(allow_start=True)
    return st


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Request the event's versions (if published), advance the deployment, roll out new worker code when idle."""
    ctl = controller()
    cfg = config()

    def remaining_s() -> float:
        return float(context.get_remaining_time_in_millis()) / 1000.0

    for version in sorted(requested_versions(event)):
        if await_desired(ctl, version, min(DESIRED_WAIT_S, max(0.0, remaining_s() - SETTLE_MARGIN_S))):
            st = ctl.request(version)
            logger.info("spec version requested", extra={"version": version, "queued": st.queued_version})
        else:
            metrics.add_metric(name=Metric.DEPLOY_REQUEST_IGNORED, unit=MetricUnit.Count, value=1)
            logger.warning("spec object exists but control 'desired' never reached it: not deployed",
                           extra={"version": version})
    ctl.stream_wait_s = stream_wait_budget(remaining_s(), cfg.stream_active_wait_s)  # per invocation
    # first match the controller to what ECS did (a hook failed or timed out and ECS rolled a deployment back), then
    # step: a new swap starts only while the service runs the live version (may_start)
    reconciled = reconcile_fleet(ctl)
    if reconciled is not None:
        metrics.add_metric(name=fleet_reconciled_metric(reconciled), unit=MetricUnit.Count, value=1)
        logger.warning("ECS rolled a deployment back: " + ("the version in flight is marked rolled back" if
                       reconciled is Reconciled.ROLLED_BACK else "the live version was deployed again"),
                       extra={"version": ctl.state().version, "reconciled": reconciled.value})
    startable = reconciled is not Reconciled.REDEPLOYED and may_start(ctl)  # asked once: ECS reads behind it
    st = ctl.step(allow_start=startable)
    if not st.in_flight and startable:
        rolled = redeploy_live_spec(ctl, cfg.worker_task_definition, ctl.clock)
        if rolled is not None:
            logger.info("worker code changed: live spec redeployed as a new version", extra={"version": rolled})
            ctl.stream_wait_s = stream_wait_budget(remaining_s(), cfg.stream_active_wait_s)
            st = ctl.step(allow_start=True)
    if ctl.swap_mode is SwapMode.CARRY:
        st = settle(ctl, remaining_s(), cfg.hook_callback_delay_s)
    metrics.add_metric(name=deploy_status_metric(st.status), unit=MetricUnit.Count, value=1)
    logger.info("deploy state", extra=asdict(st))
    return asdict(st)
