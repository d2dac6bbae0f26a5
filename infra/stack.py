"""The app's stack: one :class:`~infra.rebalancer.GeoRebalancer`, configured from cdk.json context (``app.py``).

One stack on purpose: the bucket notifications, the hook target and the grants reference each other, and a single
stack keeps them free of cross-stack export cycles (``cdk deploy --all`` deploys it).

The construct's id is ``Default``: CDK leaves a ``Default`` path component out of logical ids, so every resource keeps
the logical id it had when the stack composed the parts itself (0.1.0), and an existing deployment updates in place
(docs/DEPLOY.md "Upgrading").
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from infra.config import GeoConfig
from infra.rebalancer import GeoRebalancer

#: The construct's id in the app's stack (see the module docstring).
CONSTRUCT_ID = "Default"


class GeoRebalancerStack(Stack):
    """Everything of one deployment (named by ``config.prefix``): ``rebalancer``, the construct holding it."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Geo Rebalancer: dynamically rebalanced geo stream processing", **kwargs)
        self.config = config
        self.rebalancer = GeoRebalancer(self, CONSTRUCT_ID, config=config)
