"""Deploy control plane Lambdas.

* ``DeployerFunction`` (``lambdas/deploy/deployer.py:handler``): on a new spec (S3 ObjectCreated ``specs/``) it
  creates the version's geo stream ``<prefix>-geo-v<version>``, registers a task-definition revision carrying
  ``SPEC_VERSION`` and updates the service (ECS native blue/green starts).
  A one-minute EventBridge schedule (``Schedule``, input ``{"action": "step"}``) advances a deployment that no
  event would otherwise move on (a stream still CREATING when the invocation ended, a deployer that crashed
  mid-deploy, a carry swap that outlasts one invocation, a green timeout to roll back, new worker code to roll
  out). An EventBridge rule on the service's ``ECS Deployment State Change`` events (``DeploymentEvents``) steps it
  as soon as ECS starts or ends a deployment or a rollback. Each invocation bounds its own waits by its remaining time (``lambdas/deploy/deployer.py``), so a wait
  never outlives ``DEPLOYER_TIMEOUT`` and the next tick resumes it; overlapping invocations are safe (the deploy
  item is updated under an optimistic lock).
* ``HooksFunction`` (``lambdas/deploy/hooks.py:handler``): the ECS blue/green lifecycle hook; holds the shift
  until green is leased and warm, flips the active pointer, holds blue until drained, retires its stream.

The names of the cluster and service are fixed by config, so the hooks function can exist before the service
that invokes it without a dependency cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import assets
from infra.functions import LambdaKit, ObjectCreatedFunction

DEPLOYER_TIMEOUT = Duration.minutes(3)
STEP_EVERY = Duration.minutes(1)
# The deployer and the hooks parse the live spec and the next one (a swap plans from both): ~84 MB each parsed
# for a 1M-quadkey spec of ~1,100 workers, on ~150 MB of runtime; 512 MB left one spec of headroom, and a hooks
# function out of memory makes ECS roll the deployment back. They run for seconds a minute, so 1 GB costs little.
CONTROL_MEMORY_MB = 1024
HOOKS_TIMEOUT = Duration.minutes(1)  # ECS waits for the hook's answer; a plan at 4M quadkeys takes ~10 s of CPU
STEP_EVENT = {"action": "step"}  # lambdas/deploy/deployer.py requested_versions(): a plain step


class HooksFunction(Construct):
    """``function``: the lifecycle hook target of the worker service."""

    def __init__(self, scope: Construct, construct_id: str, *, kit: LambdaKit, environment: Mapping[str, str]) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = kit.function(
            self,
            "Function",
            entry=assets.HOOKS_HANDLER,
            description="ECS blue/green lifecycle hook: green ready, flip, blue drained",
            environment=environment,
            timeout=HOOKS_TIMEOUT,
            memory_mb=CONTROL_MEMORY_MB,
        )


class DeployerFunction(ObjectCreatedFunction):
    """``function``, triggered by each new object under ``specs/`` in the specs bucket, by ``schedule`` every minute
    and by ``deployment_events`` (the ECS deployment state changes of the service ``service_arn``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: LambdaKit,
        specs: s3.IBucket,
        environment: Mapping[str, str],
        service_arn: str,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            kit=kit,
            bucket=specs,
            prefix="specs/",
            entry=assets.DEPLOYER_HANDLER,
            description="Starts a blue/green deploy of the geo workers for each new spec",
            environment=environment,
            timeout=DEPLOYER_TIMEOUT,  # every wait inside is bounded by the invocation's remaining time
            memory_mb=CONTROL_MEMORY_MB,
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Advance a stalled geo-worker deployment (deploying, waiting_green, draining)",
            schedule=events.Schedule.rate(STEP_EVERY),
            targets=[targets.LambdaFunction(self.function, event=events.RuleTargetInput.from_object(STEP_EVENT),
                                            retry_attempts=0)],
        )
        # ECS rolls a blue/green deployment back when a lifecycle hook fails or times out, whatever the hook would
        # have answered (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html), and
        # sends "ECS Deployment State Change" events when a deployment or a rollback starts and ends
        # (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_service_deployment_events.html): each one
        # steps the deployer at once, which reconciles (lambdas/deploy/code.py reconcile_fleet) instead of waiting for
        # the schedule while the router may follow a version whose tasks ECS stopped
        self.deployment_events = events.Rule(
            self,
            "DeploymentEvents",
            description="Step the deployer on every ECS deployment state change of the geo-worker service",
            event_pattern=events.EventPattern(source=["aws.ecs"], detail_type=["ECS Deployment State Change"],
                                              resources=[service_arn]),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2)],
        )
