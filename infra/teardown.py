"""Geo-stream teardown: a Lambda-backed custom resource whose ``Delete`` deletes every geo stream of the deployment.

The per-version geo streams ``<prefix>-geo-v<version>`` are created and deleted by the deployer at run time
(``lambdas/deploy/``), not by CloudFormation: without this, ``cdk destroy`` would leave the live version's streams
running (a thousand-shard stream costs about 360 USD a day at 0.015 USD per shard-hour, docs/COST.md). The stack
makes the deployer, the hooks, the router and the worker service depend on the resource, so CloudFormation deletes
it after them (nothing creates a stream behind it) and its handler (``lambdas/teardown/handler.py``) deletes every
``<prefix>-geo-v*`` stream. ``Create`` and ``Update`` do nothing.

The construct id (``GeoStreamTeardown``) must stay as it is: a new logical id would make CloudFormation create a new
resource and delete the old one, and that ``Delete`` would delete the live streams (tests/infra/test_teardown.py).
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import assets
from infra.config import GeoConfig
from infra.functions import LambdaKit

TEARDOWN_TIMEOUT = Duration.minutes(5)  # a stream still CREATING is waited for (lambdas/teardown/handler.py)
RESOURCE_TYPE = "Custom::GeoStreamTeardown"


class GeoStreamTeardown(Construct):
    """``function`` (the handler) and ``resource`` (the custom resource; dependents are deleted before it)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, kit: LambdaKit) -> None:
        super().__init__(scope, construct_id)
        self.function: lambda_.Function = kit.function(
            self,
            "Function",
            entry=assets.TEARDOWN_HANDLER,
            description="Deletes every geo stream of the deployment when the stack is deleted",
            environment={},
            timeout=TEARDOWN_TIMEOUT,
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type=RESOURCE_TYPE,
            properties={"StreamPrefix": config.geo_stream_prefix},
        )
