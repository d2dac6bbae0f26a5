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

Nothing in :func:`handler` raises (:func:`answer`): ECS rolls the deployment back on an exception or a missing
``hookStatus``, so a malformed payload, a missing setting or an unreadable control table are answered by
:func:`fallback` (FAILED only provably before the flip and past ``GREEN_TIMEOUT_S``). The service has no bake
time (``infra/workers.py``): a circuit-breaker rollback during bake would come after the drain hold retired blue.

``hookDetails.hold`` (``"green"`` or ``"drain"``) set in the service's hook configuration overrides
the stage mapping. The hook returns its tracked version in ``hookDetails.version`` so later calls
know which deployment they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from geokernel.contracts.control import IN_FLIGHT, DeployState, DeployStatus
from geokernel.contracts.metric_names import Metric, MetricService, hook_status_metric
from lambdas.deploy.code import ReconcilableFleet
from lambdas.deploy.controller import DeployController
from lambdas.deploy.runtime import config, controller
from lambdas.runtime.errors import LambdaError
from lambdas.runtime.metrics import function_metrics

logger = Logger(service=MetricService.DEPLOY_HOOKS.value)
metrics = function_metrics(MetricService.DEPLOY_HOOKS)

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
    if st.status == DeployStatus.ROLLED_BACK:
        return FAILED if tracked == st.version else SUCCEEDED
    if hold == "green" and st.status in (DeployStatus.FLIPPED, DeployStatus.DRAINING, DeployStatus.DONE):
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
        logger.exception("deploy step failed inside the lifecycle hook", extra={"stage": event.stage, "error": str(exc)})
        return fallback(ctl, event.hold, event.hook_details, callback_delay_s)
    tracked = event.tracked_version
    if tracked is None and st.status == DeployStatus.ROLLED_BACK and isinstance(ctl.fleet, ReconcilableFleet):
        # the first call of a deployment after a version was rolled back: it is that version's deployment only if
        # the service is being set to it; the deployer's redeploy of the live version (reconcile_fleet) is not, and
        # failing it would make ECS roll the live version back again, in a loop
        tracked = ctl.fleet.target_version()
    if tracked is None and st.status in (*IN_FLIGHT, DeployStatus.ROLLED_BACK):
        tracked = st.version
    status = decide(event.hold, st, tracked)
    details = dict(event.hook_details)
    if tracked is not None:
        details["version"] = tracked
    out: dict[str, Any] = {"hookStatus": status, "hookDetails": details}
    if status == IN_PROGRESS:
        out["callBackDelay"] = callback_delay_s
    return out


def fallback(ctl: DeployController | None, hold: str | None, hook_details: dict[str, Any],
             callback_delay_s: int) -> dict[str, Any]:
    """The answer when the normal path raised: never an exception, never FAILED once the router may follow green.

    FAILED only while the deployment is provably before its flip (status ``deploying``/``waiting_green`` AND the
    active pointer below its version) and past ``GREEN_TIMEOUT_S`` (ECS rolls back; blue keeps serving).
    SUCCEEDED when nothing is in flight (a deployment the controller did not start, e.g. ECS reconciling).
    Otherwise (``hold`` None = unknown: a payload that did not parse) IN_PROGRESS: ECS calls again and the controller, the deployer's schedule or the
    next call settles it. If even the control table is unreachable, IN_PROGRESS.
    """
    in_progress = {"hookStatus": IN_PROGRESS, "callBackDelay": callback_delay_s, "hookDetails": hook_details}
    if ctl is None:
        return in_progress
    try:
        st = ctl.state()
        flipped = st.version is not None and ctl.flipped(st.version)
    except Exception:  # the control table itself is unreachable: ask ECS to call again
        logger.exception("deploy state unreadable inside the lifecycle hook")
        return in_progress
    details = {**hook_details, **({"version": st.version} if st.version is not None else {})}
    pre_flip = st.status in (DeployStatus.DEPLOYING, DeployStatus.WAITING_GREEN) and not flipped
    late = ctl.clock() - st.started_at > ctl.green_timeout_s
    if pre_flip and late and hold != "drain":
        return {"hookStatus": FAILED, "hookDetails": details}
    if not st.in_flight:
        return {"hookStatus": SUCCEEDED, "hookDetails": details}
    return {**in_progress, "hookDetails": details}


def _raw_details(event: Any) -> dict[str, Any]:
    details = event.get("hookDetails") if isinstance(event, dict) else None
    return dict(details) if isinstance(details, dict) else {}


def _raw_hold(event: Any) -> str | None:
    """The hold of a payload that did not parse, as far as it can be read (None: unknown)."""
    if not isinstance(event, dict):
        return None
    h = _raw_details(event).get("hold")
    stage = event.get("lifecycleStage")
    return h if h in ("green", "drain") else STAGE_HOLDS.get(stage) if isinstance(stage, str) else None


DEFAULT_CALLBACK_DELAY_S = 15  # when even the config cannot be read (lambdas/runtime/config.py's default)


def answer(event: Any) -> tuple[dict[str, Any], HookEvent | None]:
    """Parse, read the config and state and step, all inside the error handling: always a valid hookStatus.

    ECS rolls the deployment back if the function raises or returns no valid ``hookStatus``
    (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html), so nothing here
    may raise: a malformed payload or a missing setting is answered by :func:`fallback`.
    """
    ctl: DeployController | None = None
    delay = DEFAULT_CALLBACK_DELAY_S
    try:
        delay = config().hook_callback_delay_s
        ctl = controller()
        hook = HookEvent.parse(event)
    except Exception as exc:
        logger.exception("lifecycle hook could not start", extra={"error": str(exc)})
        return fallback(ctl, _raw_hold(event), _raw_details(event), delay), None
    return run_hook(ctl, hook, delay), hook


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """ECS lifecycle hook entry point: always returns a ``hookStatus`` (see :func:`answer`)."""
    out, hook = answer(event)
    try:
        metrics.add_metric(name=hook_status_metric(out['hookStatus']), unit=MetricUnit.Count, value=1)
        if hook is None:
            metrics.add_metric(name=Metric.HOOK_BAD_EVENT, unit=MetricUnit.Count, value=1)
        st = controller().state()
        logger.info("lifecycle hook", extra={"stage": hook.stage if hook else None, "hold": hook.hold if hook else None,
                                             "hook_status": out["hookStatus"], "deploy_status": st.status,
                                             "version": st.version, "reason": st.reason,
                                             "execution_id": hook.execution_id if hook else None})
    except Exception:  # logging is not worth a rollback
        logger.exception("lifecycle hook: could not log the outcome")
    return out
