"""The Lambdas' CloudWatch metrics: Powertools ``Metrics`` with the deployment's dimension.

Every function emits its metrics as EMF log lines through one module-level Powertools ``Metrics(namespace=NAMESPACE,
service=...)`` flushed by ``@metrics.log_metrics``. :func:`function_metrics` adds the default dimension
``deployment=<GEO_PREFIX>`` (:data:`geokernel.contracts.metric_names.DEPLOYMENT_DIMENSION`), which Powertools keeps
across flushes, so every metric lands in the dimension set ``{service, deployment}`` the alarms read
(:func:`geokernel.contracts.metric_names.metric_dimensions`) and two deployments in one account and region never share
one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from aws_lambda_powertools import Metrics

from geokernel.contracts.env import EnvVar
from geokernel.contracts.metric_names import DEPLOYMENT_DIMENSION, NAMESPACE, MetricService
from lambdas.runtime.config import DEFAULT_PREFIX


def deployment_of(env: Mapping[str, str] | None = None) -> str:
    """The deployment a function belongs to: its ``GEO_PREFIX`` (the stack sets it on every function), else the
    default prefix."""
    e = os.environ if env is None else env
    return e.get(EnvVar.GEO_PREFIX, "").strip() or DEFAULT_PREFIX


def function_metrics(service: MetricService, env: Mapping[str, str] | None = None) -> Metrics:
    """The Powertools ``Metrics`` of one function: namespace, ``service`` and the default ``deployment`` dimension.

    Read at import, as the function's other module-level objects are: the environment of a Lambda does not change
    while its execution environment lives.
    """
    metrics = Metrics(namespace=NAMESPACE, service=service.value)
    metrics.set_default_dimensions(**{DEPLOYMENT_DIMENSION: deployment_of(env)})
    return metrics
