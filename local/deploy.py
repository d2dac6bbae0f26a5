"""DeployDriver: runs the real deploy control plane locally with a :class:`LocalFleet`.

In AWS these move a deployment (``lambdas/deploy/``): the **deployer** Lambda (S3 ``ObjectCreated`` on
``specs/v<n>.json`` and a schedule: ``request`` + ``step(allow_start=True)``; in ``carry`` mode it keeps
stepping while the swap is in flight, :func:`lambdas.deploy.deployer.settle`), and, in ``whole`` mode,
ECS's **lifecycle hooks** of the blue/green service deployment (``POST_SCALE_UP`` holds the traffic shift
until green is leased and warm, ``POST_PRODUCTION_TRAFFIC_SHIFT`` holds blue until it drained), answered by
:func:`lambdas.deploy.hooks.run_hook`. :class:`DeployDriver` does the same, every ``interval_s``:

1. *deployer*: for each new spec object it builds the S3 event and reads its versions with
   :func:`lambdas.deploy.deployer.requested_versions`, waits for ``desired`` with
   :func:`~lambdas.deploy.deployer.await_desired`, calls ``request``, then ``step(allow_start=True)``
   (every tick while no ECS deployment is in flight: a desired-count change starts none, so no hook is called),
   and in ``whole`` mode :func:`lambdas.deploy.code.reconcile_fleet` (the deployer's answer to ECS's deployment
   events);
2. *ECS* (``whole`` mode): when the fleet started an ECS deployment (:attr:`LocalFleet.ecs_deployments`: a
   whole plan's start, or a reconcile) it plays the service deployment's lifecycle: it calls
   :func:`~lambdas.deploy.hooks.run_hook` with an ECS-shaped hook event for the current stage, again after
   ``callBackDelay`` while the answer is ``IN_PROGRESS``, and moves to the next stage on ``SUCCEEDED``. On
   ``FAILED``, or an invocation that failed (``hook_fault``: the ``hook-fail`` / ``hook-timeout`` faults), it
   rolls the deployment back as ECS does (:meth:`LocalFleet.ecs_rollback`: the new tasks stop, the service runs
   the previous revision again);
3. *the ECS service scheduler*: :meth:`LocalFleet.poll` records worker exits and replaces a worker that died.

The controller is :class:`lambdas.deploy.controller.DeployController` over the real adapters
(the adapters in ``lambdas.runtime``: dynamodb, s3, kinesis) against moto, with :class:`local.fleet.LocalFleet` as its fleet; the swap mode is
``SWAP_MODE`` of the environment (``carry`` by default). The deployer's steps sign as the deployer's role and each hook
call as the hooks' role (:func:`local.iam.principals.acting_as`); the specs it reacts to are the keys the stack's
notification on the specs bucket names (``specs``, from the synthesized template). What the harness asks of the
deployment (:meth:`DeployDriver.state`, :meth:`DeployDriver.idle`) it reads with its own keys.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.control import ControlKey, DeployState
from geokernel.contracts.plan import SwapMode
from lambdas.runtime.dynamodb import ControlTable
from local.aws import EmbeddedAws
from local.events import s3_object_created
from local.faults.deployer_crash import InjectedCrash
from local.faults.hooks import Reconcile
from local.iam.principals import acting_as
from local.loops import LoopThread
from local.wiring.stack_wiring import Component, Notification

HOOK_STAGES = ("POST_SCALE_UP", "POST_PRODUCTION_TRAFFIC_SHIFT")


@dataclass
class EcsDeployment:
    """The ECS service deployment the driver plays for one spec version."""

    version: int
    execution_id: str
    stage_index: int = 0
    next_call_at: float = 0.0
    hook_details: dict[str, Any] | None = None
    outcome: str | None = None  # "SUCCEEDED" (all stages) or "ROLLED_BACK" (a hook failed: ECS rolled it back)

    def event(self) -> dict[str, Any]:
        """The lifecycle hook payload ECS sends for the current stage."""
        arn = "arn:aws:ecs:us-east-1:000000000000:service/georebal-local/geo-workers"
        return {"executionId": self.execution_id, "lifecycleStage": HOOK_STAGES[self.stage_index],
                "resourceArn": f"{arn}/deployment/{self.execution_id}",
                "executionDetails": {"serviceArn": arn, "targetServiceRevisionArn": f"{arn}/revision/v{self.version}"},
                "hookDetails": dict(self.hook_details or {})}


class DeployDriver(LoopThread):
    """Deployer + ECS lifecycle hooks over the real controller; see the module docstring."""

    def __init__(self, aws: EmbeddedAws, fleet: Any, say: Callable[[str], None], *, specs: Notification,
                 green_timeout_s: float, drain_timeout_s: float, callback_delay_s: int = 1,
                 interval_s: float = 0.5, fleet_start_grace_s: float = 5.0) -> None:
        super().__init__("deployer", interval_s)
        from lambdas.deploy.controller import DeployController
        from lambdas.runtime.clients import make_clients
        from lambdas.runtime.config import LambdaConfig
        from lambdas.runtime.dynamodb import LeaseTable
        from lambdas.runtime.kinesis import GeoStreams
        from lambdas.runtime.s3 import SpecStore

        cfg = LambdaConfig.from_env()
        clients = make_clients(cfg)
        self.swap_mode = cfg.swap_mode
        self.aws = aws
        self.say = say
        self.fleet = fleet
        self.callback_delay_s = callback_delay_s
        self.ctl = DeployController(ControlTable(clients.dynamodb, aws.names.control_table),
                                    LeaseTable(clients.dynamodb, aws.names.leases_table),
                                    SpecStore(clients.s3, aws.names.specs_bucket), GeoStreams(clients.kinesis, cfg.geo_stream_kms_key),
                                    fleet, prefix=aws.names.prefix, green_timeout_s=green_timeout_s,
                                    drain_timeout_s=drain_timeout_s, stream_wait_s=0.0, swap_mode=cfg.swap_mode,
                                    fleet_start_grace_s=fleet_start_grace_s)
        self.crashes = 0  # injected deployer deaths (local/faults/deployer_crash.py), not loop errors
        self.specs = specs
        self._s3 = aws.client("s3")  # S3's notifications: the harness lists the bucket (not a call of the deployer)
        #: the control table as the harness reads it (the report, the faults, the progress line)
        self.view = ControlTable(aws.client("dynamodb"), aws.names.control_table)
        self.seen_specs: set[str] = set()
        self.deployment: EcsDeployment | None = None
        self.deployments: list[EcsDeployment] = []
        self._ecs_seen = 0  # how many of the fleet's ECS deployments (LocalFleet.ecs_deployments) were picked up
        self.hook_calls = 0
        #: ``hook-fail`` / ``hook-timeout`` (local/faults/hooks.py HookFault): asked before each hook call with the
        #: version and stage; a non-None answer says how this invocation failed, and ECS rolls the deployment back.
        self.hook_fault: Callable[[int, str], str | None] | None = None
        self.reconciled: list[Reconcile] = []  # what reconcile_fleet did, in order
        self.last_status: tuple[int | None, str] = (None, "idle")

    def step(self) -> None:
        self.fleet.poll()
        try:
            with acting_as(Component.DEPLOYER):
                self._deployer()
        except InjectedCrash as exc:  # this "invocation" died; the next tick is the next one (the schedule in AWS)
            self.crashes += 1
            self.say(f"deployer crashed (injected): {exc}")
        if self.swap_mode is SwapMode.WHOLE:
            self._ecs()
        st = self.state()
        if (st.version, st.status) != self.last_status:
            self.last_status = (st.version, st.status)
            self.say(f"deploy v{st.version}: {st.status} ({st.reason})")

    def _deployer(self) -> None:
        from lambdas.deploy.deployer import await_desired, requested_versions

        resp = self._s3.list_objects_v2(Bucket=self.specs.bucket, Prefix=self.specs.prefix)
        for obj in sorted(resp.get("Contents", []), key=lambda o: o["Key"]):
            if obj["Key"] in self.seen_specs or not self.specs.matches(obj["Key"]):
                continue
            self.seen_specs.add(obj["Key"])
            event = s3_object_created(self.specs.bucket, obj["Key"], int(obj["Size"]), str(obj["ETag"]))
            for version in sorted(requested_versions(event)):
                if await_desired(self.ctl, version, wait_s=2.0):
                    self.ctl.request(version)
        from lambdas.deploy.code import Reconciled, may_start, reconcile_fleet

        done = None
        if self.swap_mode is SwapMode.WHOLE:  # the deployer Lambda's reconcile first (lambdas/deploy/deployer.py)
            done = reconcile_fleet(self.ctl)
            if done is not None:
                st = self.ctl.state()  # (acting as the deployer)
                self.reconciled.append(Reconcile(time.time(), done.value, st.version))
                self.say(f"deployer: ECS rolled a deployment back; reconciled: {done.value} (deploy v{st.version} "
                         f"{st.status})")
        if self.deployment is None:  # a carry swap has no ECS deployment: the deployer steps it all the way
            self.ctl.step(allow_start=done is not Reconciled.REDEPLOYED and may_start(self.ctl))

    def _ecs(self) -> None:
        from lambdas.deploy.hooks import HookEvent, run_hook

        started: list[int] = getattr(self.fleet, "ecs_deployments", [])
        if self.deployment is None:
            if self._ecs_seen >= len(started):
                return  # ECS deploys only when the fleet started one (LocalFleet.start / reconcile)
            self._ecs_seen = len(started)
            self.deployment = EcsDeployment(started[-1], str(uuid.uuid4()))
            self.deployments.append(self.deployment)
        dep = self.deployment
        if time.time() < dep.next_call_at:
            return
        stage = HOOK_STAGES[dep.stage_index]
        failure = self.hook_fault(dep.version, stage) if self.hook_fault is not None else None
        if failure is not None:  # the invocation failed: no hookStatus, and ECS rolls back whatever the hook says
            self.hook_calls += 1
            self._rolled_back(dep, f"hook {stage} {failure}")
            return
        with acting_as(Component.HOOKS):  # the hooks function's own role (ECS invokes it)
            answer = run_hook(self.ctl, HookEvent.parse(dep.event()), self.callback_delay_s)
        self.hook_calls += 1
        dep.hook_details = answer.get("hookDetails") or {}
        status = answer["hookStatus"]
        if status == "IN_PROGRESS":
            dep.next_call_at = time.time() + float(answer.get("callBackDelay", self.callback_delay_s))
        elif status == "FAILED":
            self._rolled_back(dep, f"hook {stage} FAILED")
        elif dep.stage_index + 1 < len(HOOK_STAGES):
            dep.stage_index += 1
        else:
            dep.outcome = "SUCCEEDED"
            self.deployment = None

    def _rolled_back(self, dep: EcsDeployment, why: str) -> None:
        """ECS rolls the deployment back: the service returns to its previous revision, the new tasks stop."""
        dep.outcome = "ROLLED_BACK"
        stopped = self.fleet.ecs_rollback(dep.version)
        self.say(f"ECS deployment of v{dep.version}: {why} -> rolled back by ECS ({len(stopped)} task(s) of "
                 f"v{dep.version} stopped; the service runs v{self.fleet.service_version}'s revision again)")
        self.deployment = None

    def state(self) -> DeployState:
        """The deployment's state, read with the harness's keys."""
        item = self.view.get(ControlKey.DEPLOY)
        return DeployState() if item is None else DeployState.from_item(item)

    def describe(self) -> str:
        """The controller's state in one line (for the report)."""
        st = self.state()
        return f"v{st.version} {st.status} ({st.reason})"

    def idle(self) -> bool:
        """True when no deployment is in flight and nothing newer than the deployed version is queued."""
        from geokernel.contracts.control import IN_FLIGHT
        from lambdas.runtime.records import read_desired

        st = self.state()
        desired = read_desired(self.view)
        caught_up = desired is None or (st.version is not None and st.version >= desired.version)
        return self.deployment is None and st.status not in IN_FLIGHT and st.queued_version is None and caught_up
