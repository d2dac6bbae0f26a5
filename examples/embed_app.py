#!/usr/bin/env python3
"""An app of your own that embeds Geo Rebalancer in its stack (docs/DEPLOY.md "Embedding the construct in your own
stack").

The stack already has a stream, ``clicks``, encrypted with a key of its own: the construct reads it (no ingest stream of
its own; the router and the Spark job get read and ``kms:Decrypt`` on that key) from its tip (LATEST, the default for a
stream of your own), and knows it keeps records 7 days. Everything else is the construct's defaults.

From a checkout, with the bundle installed (``pip install -e .``) and the repository's cdk.json (its feature flags)::

    cdk synth --app "python examples/embed_app.py"

``scripts/synth-check`` synthesizes it and runs cdk-nag, cfn-lint and checkov on it (variant ``embed``).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.config import load_config
from infra.rebalancer import GeoRebalancer
from infra.suppressions import write_acknowledgements

CLICKS_ARN = "arn:aws:kinesis:eu-west-1:111111111111:stream/clicks"
CLICKS_KEY_ARN = "arn:aws:kms:eu-west-1:111111111111:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


class ClickAnalyticsStack(cdk.Stack):
    """A stack of yours: the clicks stream (made elsewhere, imported here) and the geo rebalancer reading it."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        clicks = kinesis.Stream.from_stream_attributes(
            self, "Clicks", stream_arn=CLICKS_ARN, encryption_key=kms.Key.from_key_arn(self, "ClicksKey", CLICKS_KEY_ARN)
        )
        self.geo = GeoRebalancer(
            self,
            "GeoRebalancer",
            config=load_config({"prefix": "clicks-geo"}),
            ingest_stream=clicks,
            retention=cdk.Duration.days(7),
        )


if __name__ == "__main__":
    app = cdk.App()
    stack = ClickAnalyticsStack(app, "click-analytics")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=False))
    app.synth()
    write_acknowledgements(stack, app.outdir)  # the acknowledged cdk-nag findings, beside the template
