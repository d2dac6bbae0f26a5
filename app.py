#!/usr/bin/env python3
"""CDK app of Geo Rebalancer: ``cdk synth`` / ``cdk deploy --all`` (see docs/DEPLOY.md).

Settings come from cdk.json context (override with ``-c key=value``) and are validated once by
:func:`infra.config.config_from_node`; the stack (:class:`infra.stack.GeoRebalancerStack`) holds the
:class:`infra.rebalancer.GeoRebalancer` construct, which tags what it creates. cdk-nag's AwsSolutions checks run as a
CDK validation plugin. To put the construct in a stack of your own instead: docs/DEPLOY.md "Embedding the construct in
your own stack" (``examples/embed_app.py``).
"""

from __future__ import annotations

import os
import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import ConfigError, config_from_node
from infra.stack import GeoRebalancerStack
from infra.suppressions import write_acknowledgements


def build_app(app: cdk.App) -> GeoRebalancerStack:
    """Add the stack (and the cdk-nag plugin) to ``app``; returns the stack."""
    config = config_from_node(app.node)
    env = None
    if config.vpc_id:  # a VPC lookup needs a concrete account and region
        account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
        if not account or not region:
            raise SystemExit(f"context 'vpc_id' ({config.vpc_id!r}) needs AWS credentials and a region at synth (VPC lookup)")
        env = cdk.Environment(account=account, region=region)
    stack = GeoRebalancerStack(app, f"{config.prefix}-geo-rebalancer", config=config, env=env)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=False))
    return stack


if __name__ == "__main__":
    main_app = cdk.App()
    try:
        stack = build_app(main_app)
    except ConfigError as exc:  # a bad or unknown setting: one line naming it, exit 2, nothing synthesized
        print(f"geo-rebalancer: {exc}", file=sys.stderr)
        sys.exit(2)
    main_app.synth()
    write_acknowledgements(stack, main_app.outdir)
