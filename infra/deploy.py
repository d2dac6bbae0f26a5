"""Deploy control plane Lambdas.

* ``DeployerFunction`` (``lambdas/deploy/deployer.py:handler``): on a new spec (S3 ObjectCreated ``specs/``) it
  creates the version's geo stream ``<prefix>-geo-v<version>``, registers a task-definition revision carrying
  ``SPEC_VERSION`` and updates the service (ECS native blue/green starts).
* ``HooksFunction`` (``lambdas/deploy/hooks.py:handler``): the ECS blue/green lifecycle hook; holds the shift
  until green is leased and warm, flips the active pointer, holds blue until drained, retires its stream.

The names of the cluster and service are fixed by config, so the hooks function can exist before the service
that invokes it without a dependency cycle.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import assets
from infra.functions import LambdaKit, ObjectCreatedFunction


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
            timeout=Duration.minutes(1),
        )


class DeployerFunction(ObjectCreatedFunction):
    """``function``, triggered by each new object under ``specs/`` in the specs bucket."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: LambdaKit,
        specs: s3.IBucket,
        environment: Mapping[str, str],
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
            timeout=Duration.minutes(3),  # waits up to STREAM_ACTIVE_WAIT_S (120) for the new geo stream
        )
