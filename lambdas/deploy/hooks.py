"""ECS native blue/green lifecycle hook Lambda for the headless geo-worker service.

Entry point ``lambdas/deploy/hooks.py:handler``. ECS invokes it with::

    {"executionId": "...", "lifecycleStage": "POST_SCALE_UP", "resourceArn": "<service deployment ARN>",
     "executionDetails": {"serviceArn": "...", "targetServiceRevisionArn": "...",
                          "testTrafficWeights": {...}, "productionTrafficWeights": {...}},
     "hookDetails": {...}}

and it answers ``{"hookStatus": "SUCCEEDED" | "FAILED" | "IN_PROGRESS", "callBackDelay": s, "hookDetails": {...}}``.
IN_PROGRESS makes ECS call again after ``callBackDelay`` seconds; FAILED rolls the deployment back.

A headless service (no load balancer, Service Connect or VPC Lattice) gets no managed traffic shift,
so the "traffic" here is the control ``pk="active"`` pointer the router follows. Two holds:

* ``green`` (default stage ``POST_SCALE_UP``: green tasks running, blue still active): step the
  :class:`~lambdas.deploy.controller.DeployController` without starting anything new; IN_PROGRESS
  until every partition of the new spec is leased and warm, then the controller flips the active
  pointer and the hook SUCCEEDS. If green is not ready within ``GREEN_TIMEOUT_S`` the controller
  rolls back (green stream deleted) and the hook returns FAILED: ECS rolls back, blue keeps serving.
* ``drain`` (default stage ``POST_PRODUCTION_TRAFFIC_SHIFT``, before bake time and blue's clean-up):
  IN_PROGRESS until blue has drained its stream and is retired (or ``DRAIN_TIMEOUT_S`` passed: the
  old stream is kept and the reason logged; never FAILED after the flip, because rolling back ECS
  would leave the router pointing at a stopped fleet).

``hookDetails.hold`` (``"green"`` or ``"drain"``) set in the service's hook configuration overrides
the stage mapping. The hook returns its tracked version in ``hookDetails.version`` so later calls
know which deployment they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from lambdas.common.errors import LambdaError
from lambdas.deploy.controller import (
    DEPLOYING,
    DONE,
    DRAINING,
    FLIPPED,
    IN_FLIGHT,
    ROLLED_BACK,
    WAITING_GREEN,
    DeployController,
    DeployState,
)
from lambdas.deploy.runtime import config, controller

logger = Logger(service="deploy-hooks")
metrics = Metrics(namespace="GeoRebalancer", service="deploy-hooks")

STAGE_HOLDS = {"POST_SCALE_UP": "green", "POST_PRODUCTION_TRAFFIC_SHIFT": "drain"}
SUCCEEDED, FAILED, IN_PROGRESS = "SUCCEEDED", "FAILED", "IN_PROGRESS"


class HookEventError(LambdaError, ValueError):
    """The hook payload is malformed; the message names the bad field."""


@dataclass(frozen=True)
class HookEvent:
    """The fields of an ECS lifecycle hook invocation this handler uses."""

    execution_id: str
    stage: str
    service_arn: str
    target_revision_arn: str
    hook_details: dict[str, Any]

    @classmethod
    def parse(cls, event: Any) -> HookEvent:
        if not isinstance(event, dict):
            raise HookEventError(f"lifecycle hook event must be an object, got {event!r}")
        stage = event.get("lifecycleStage")
        if not isinstance(stage, str) or not stage:
            raise HookEventError(f"lifecycle hook event 'lifecycleStage' must be a string, got {stage!r}")
        details = event.get("executionDetails") or {}
        hook_details = event.get("hookDetails") or {}
        if not isinstance(details, dict) or not isinstance(hook_details, dict):
            raise HookEventError(f"'executionDetails'/'hookDetails' must be objects, got {details!r}/{hook_details!r}")
        return cls(str(event.get("executionId", "")), stage, str(details.get("serviceArn", "")),
                   str(details.get("targetServiceRevisionArn", "")), dict(hook_details))

    @property
    def hold(self) -> str | None:
        h = self.hook_details.get("hold")
        return h if h in ("green", "drain") else STAGE_HOLDS.get(self.stage)

    @property
    def tracked_version(self) -> int | None:
        v = self.hook_details.get("version")
        return v if isinstance(v, int) and not isinstance(v, bool) else None


def decide(hold: str | None, st: DeployState, tracked: int | None) -> str:
    """Map the controller state to a hookStatus for one hold (``tracked`` = the version this hook holds)."""
    if hold is None:
        return SUCCEEDED
    if st.status == ROLLED_BACK:
        return FAILED if tracked == st.version else SUCCEEDED
    if hold == "green" and st.status in (FLIPPED, DRAINING, DONE):
        return SUCCEEDED
    return IN_PROGRESS if st.status in IN_FLIGHT else SUCCEEDED


def run_hook(ctl: DeployController, event: HookEvent, callback_delay_s: int) -> dict[str, Any]:
    """Step the controller (never starting a new deployment) and answer ECS.

    An error while stepping (an AWS call failing) must not fail the hook on its own: a failed hook
    makes ECS roll back, which after the flip would stop the fleet the router feeds. So the hook
    answers IN_PROGRESS and retries, except before the flip once ``GREEN_TIMEOUT_S`` has passed
    (FAILED: blue keeps serving).
    """
    try:
        st = ctl.step(allow_start=False) if event.hold else ctl.state()
    except Exception as exc:  # any step failure is retried by ECS or ends in a timeout
        return _on_error(ctl, event, callback_delay_s, exc)
    tracked = event.tracked_version
    if tracked is None and st.status in (*IN_FLIGHT, ROLLED_BACK):
        tracked = st.version
    status = decide(event.hold, st, tracked)
    details = dict(event.hook_details)
    if tracked is not None:
        details["version"] = tracked
    out: dict[str, Any] = {"hookStatus": status, "hookDetails": details}
    if status == IN_PROGRESS:
        out["callBackDelay"] = callback_delay_s
    return out


def _on_error(ctl: DeployController, event: HookEvent, callback_delay_s: int, exc: Exception) -> dict[str, Any]:
    logger.exception("deploy step failed inside the lifecycle hook", extra={"stage": event.stage, "error": str(exc)})
    try:
        st = ctl.state()
    except Exception:  # the control table itself is unreachable: ask ECS to call again
        return {"hookStatus": IN_PROGRESS, "callBackDelay": callback_delay_s, "hookDetails": event.hook_details}
    pre_flip = st.status in (DEPLOYING, WAITING_GREEN)
    late = ctl.clock() - st.started_at > ctl.green_timeout_s
    details = {**event.hook_details, **({"version": st.version} if st.version is not None else {})}
    if pre_flip and late and event.hold == "green":
        return {"hookStatus": FAILED, "hookDetails": details}
    return {"hookStatus": IN_PROGRESS, "callBackDelay": callback_delay_s, "hookDetails": details}


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """ECS lifecycle hook entry point."""
    hook = HookEvent.parse(event)
    out = run_hook(controller(), hook, config().hook_callback_delay_s)
    st = controller().state()
    metrics.add_metric(name=f"Hook{out['hookStatus'].title().replace('_', '')}", unit=MetricUnit.Count, value=1)
    logger.info("lifecycle hook", extra={"stage": hook.stage, "hold": hook.hold, "hook_status": out["hookStatus"],
                                         "deploy_status": st.status, "version": st.version, "reason": st.reason,
                                         "execution_id": hook.execution_id})
    return out
