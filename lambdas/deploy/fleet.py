"""Where the deploy controller's workers run: the :class:`Fleet` protocol and its ECS implementation.

:class:`EcsFleet` is the fleet in AWS (over :class:`lambdas.runtime.ecs.EcsService`); the local loop's worker
processes (``local/fleet.py``'s ``LocalFleet``) implement the same methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from geokernel.contracts.plan import SwapMode
from lambdas.deploy.plan import DeployPlan
from lambdas.runtime.ecs import EcsService


class Fleet(Protocol):
    """Where workers run: ECS (AWS) or local processes. Each call gets the swap's :class:`DeployPlan`."""

    def start(self, plan: DeployPlan) -> Any:
        """Before the flip: fresh workers for ``plan.started`` (kept slots are claimed by their own workers)."""

    def stop(self, plan: DeployPlan) -> Any:
        """After the old version drained: stop the workers of ``plan.stopped`` (they drained and exit)."""

    def abort(self, plan: DeployPlan) -> Any:
        """Rollback before the flip: stop what :meth:`start` started (kept slots drop their claims themselves)."""

    def advance(self, plan: DeployPlan) -> bool:
        """While green warms up: start the next part of what :meth:`start` began (a fleet that paces its launches);
        True once everything the plan starts was launched."""


LAUNCH_STEP = 40  # tasks the deployer adds to the worker service per step (EcsFleet.advance)


class EcsFleet:
    """The deploy controller's fleet adapter on ECS (see :class:`Fleet`).

    ``carry`` plans (the default) run on one service of generic worker tasks: ``start`` raises the desired
    count to every old slot plus the started ones, ``stop`` lowers it to the new slot count once the old
    version drained, ``abort`` lowers it back to the old slot count. Carried slots need no task: the process
    holding ``v<n>#w`` claims ``v<n+1>#w`` itself. ECS replaces a task that stops while the desired count still
    counts it (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_services.html: "If a task in a
    service stops, the scheduler launches a new task to replace it"), so a drained worker does not exit: it drops
    its scale-in protection and waits, and the lowered desired count stops exactly the unprotected tasks.

    ``whole`` plans use ECS's own blue/green deployment: ``start`` registers a copy of ``template`` (the stack's
    revision, ``WORKER_TASK_DEFINITION``; the service's current one when unset) carrying ``SPEC_VERSION`` with the
    new slot count; ECS stops blue itself in its CLEAN_UP stage and green when a hook returns FAILED, so ``stop``
    and ``abort`` do nothing. :meth:`code_stale` tells the controller the fleet runs other code than ``template``:
    it then plans the swap ``whole`` whatever the mode, which is how new worker code reaches a carry fleet.
    """

    def __init__(self, service: EcsService, template: str = "") -> None:
        self.service = service
        self.template = template

    def code_stale(self) -> bool:
        """True when the stack's template revision is known and the service runs code copied from another one."""
        return bool(self.template) and self.service.running_code() != self.template

    def reconcile(self, version: int, worker_ids: Sequence[str]) -> bool:
        """``whole`` mode: if the service runs another ``SPEC_VERSION`` than the live ``version`` (ECS rolled a
        deployment back after the flip), deploy ``version`` again, a task per slot of ``worker_ids``; True if it did.

        The router follows control ``pk="active"``; a rollback after the flip (circuit breaker, a hook that timed
        out) brings back the previous revision, whose stream the drain step may have deleted. Waits while ECS
        still lists more than one deployment."""
        if self.service.deploying() or self.service.running_spec_version() == version:
            return False
        self.service.deploy(self.service.register_revision(version, self.template), len(worker_ids))
        return True

    def rolled_back(self, version: int) -> bool:
        """``whole`` mode: True when ECS ended the deployment of ``version`` on another revision (a lifecycle hook
        failed or timed out, or the circuit breaker tripped: "If your function doesn't return a valid hookStatus, or
        if it fails, Amazon ECS rolls back the deployment",
        https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html): the service is
        steady and runs another ``SPEC_VERSION``."""
        return not self.service.deploying() and self.service.running_spec_version() != version

    def serves(self, version: int) -> bool:
        """``whole`` mode: the service runs ``version``'s revision and no deployment is rolling out or back."""
        return not self.service.deploying() and self.service.running_spec_version() == version

    def target_version(self) -> int | None:
        """``SPEC_VERSION`` of the revision the service is set to: the last ``UpdateService``'s, so during a
        deployment the one being deployed."""
        return self.service.running_spec_version()

    def start(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.WHOLE:
            self.service.deploy(self.service.register_revision(plan.to_version, self.template), plan.new_slots)
        else:
            self.advance(plan)

    def advance(self, plan: DeployPlan) -> bool:
        """``carry``: raise the desired count one step (at most :data:`LAUNCH_STEP` tasks) toward
        ``plan.peak_workers``; True once it is there. ``whole``: ECS launches the green fleet itself (True).

        Fargate launches tasks from a token bucket of 100 per account and region refilled at 20 per second
        (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html); the deployer steps every
        ``HOOK_CALLBACK_DELAY_S`` (15 s), so a step of 40 keeps any second at 40 % of the bucket and the sustained
        rate near 3 per second, and leaves the rest of the account's launches to other services. A
        thousand-slot fleet then starts in about 6 minutes, within the 15-minute green timeout."""
        if plan.mode is SwapMode.WHOLE:
            return True
        target = plan.peak_workers
        current = self.service.desired_count()
        if current == target:
            return True
        self.service.scale(target if current > target else min(target, current + LAUNCH_STEP))
        return current > target or current + LAUNCH_STEP >= target

    def stop(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.CARRY:
            self.service.scale(plan.new_slots)

    def abort(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.CARRY:
            self.service.scale(plan.old_slots)
