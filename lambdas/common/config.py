"""Environment variable names (the one place they live) and the typed Lambda config read from them.

Every Lambda reads its settings once, at import time, with :meth:`LambdaConfig.from_env`, then asks
for the ones it needs with :meth:`LambdaConfig.require`. A missing or malformed value raises
:class:`ConfigError` naming the variable and the bad value.

Names (``docs/CONTRACTS.md``, "Environment variables"):

``GEO_PREFIX``, ``CONTROL_TABLE``, ``LEASES_TABLE``, ``SNAPSHOTS_BUCKET``, ``SPECS_BUCKET``,
``COSTS_BUCKET``, ``QUARANTINE_BUCKET``, ``OUTPUT_BUCKET``, ``MAX_LOAD``, ``GRID_ZOOM``,
``POLICY_JSON``, ``ECS_CLUSTER``, ``ECS_SERVICE``, ``GEO_STREAM_KMS_KEY`` (the geo streams' key;
unset = unencrypted), ``AWS_ENDPOINT_URL`` (local only), plus the
control-plane timings ``ROUTER_SPEC_TTL_S`` (5), ``GREEN_TIMEOUT_S`` (900), ``DRAIN_TIMEOUT_S`` (900),
``HOOK_CALLBACK_DELAY_S`` (15) and ``STREAM_ACTIVE_WAIT_S`` (120), and ``SWAP_MODE`` (``carry``, the default:
a new spec moves only the slots that change; ``whole``: every spec version starts a whole new fleet), and
``WORKER_TASK_DEFINITION`` (deployer: the ARN of the worker revision the stack registered, i.e. the code the
fleet should run; unset = whatever the service runs).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from lambdas.common.errors import LambdaError
from partitioner.contracts import SwapMode, geo_stream_name

GEO_PREFIX = "GEO_PREFIX"
CONTROL_TABLE = "CONTROL_TABLE"
LEASES_TABLE = "LEASES_TABLE"
SNAPSHOTS_BUCKET = "SNAPSHOTS_BUCKET"
SPECS_BUCKET = "SPECS_BUCKET"
COSTS_BUCKET = "COSTS_BUCKET"
QUARANTINE_BUCKET = "QUARANTINE_BUCKET"
OUTPUT_BUCKET = "OUTPUT_BUCKET"
MAX_LOAD = "MAX_LOAD"
SHARDS_PER_WORKER = "SHARDS_PER_WORKER"  # geo-stream shards each worker owns (infra.config.shards_per_worker)
GRID_ZOOM = "GRID_ZOOM"
POLICY_JSON = "POLICY_JSON"
ECS_CLUSTER = "ECS_CLUSTER"
ECS_SERVICE = "ECS_SERVICE"
GEO_STREAM_KMS_KEY = "GEO_STREAM_KMS_KEY"
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
AWS_REGION = "AWS_REGION"
ROUTER_SPEC_TTL_S = "ROUTER_SPEC_TTL_S"
GREEN_TIMEOUT_S = "GREEN_TIMEOUT_S"
DRAIN_TIMEOUT_S = "DRAIN_TIMEOUT_S"
HOOK_CALLBACK_DELAY_S = "HOOK_CALLBACK_DELAY_S"
STREAM_ACTIVE_WAIT_S = "STREAM_ACTIVE_WAIT_S"
SWAP_MODE = "SWAP_MODE"
WORKER_TASK_DEFINITION = "WORKER_TASK_DEFINITION"

DEFAULT_PREFIX = "georebal"
DEFAULT_REGION = "us-east-1"


class ConfigError(LambdaError, ValueError):
    """A required environment variable is missing or malformed; the message names it and its value."""


@dataclass(frozen=True)
class LambdaConfig:
    """All settings any handler reads; empty strings / ``None`` where unset."""

    prefix: str = DEFAULT_PREFIX
    control_table: str = ""
    leases_table: str = ""
    snapshots_bucket: str = ""
    specs_bucket: str = ""
    costs_bucket: str = ""
    quarantine_bucket: str = ""
    output_bucket: str = ""
    max_load: float | None = None
    shards_per_worker: int = 1
    grid_zoom: int = 12
    policy_json: str = ""
    ecs_cluster: str = ""
    ecs_service: str = ""
    geo_stream_kms_key: str | None = None
    endpoint_url: str | None = None
    region: str = DEFAULT_REGION
    router_spec_ttl_s: float = 5.0
    green_timeout_s: float = 900.0
    drain_timeout_s: float = 900.0
    hook_callback_delay_s: int = 15
    stream_active_wait_s: float = 120.0
    swap_mode: SwapMode = SwapMode.CARRY
    worker_task_definition: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LambdaConfig:
        """Read every setting from ``env`` (default ``os.environ``); raise ConfigError on a bad value."""
        e = os.environ if env is None else env
        max_load_text = e.get(MAX_LOAD, "").strip()
        return cls(
            prefix=e.get(GEO_PREFIX, "").strip() or DEFAULT_PREFIX,
            control_table=e.get(CONTROL_TABLE, "").strip(),
            leases_table=e.get(LEASES_TABLE, "").strip(),
            snapshots_bucket=e.get(SNAPSHOTS_BUCKET, "").strip(),
            specs_bucket=e.get(SPECS_BUCKET, "").strip(),
            costs_bucket=e.get(COSTS_BUCKET, "").strip(),
            quarantine_bucket=e.get(QUARANTINE_BUCKET, "").strip(),
            output_bucket=e.get(OUTPUT_BUCKET, "").strip(),
            max_load=_positive(MAX_LOAD, max_load_text) if max_load_text else None,
            shards_per_worker=int(_positive(SHARDS_PER_WORKER, e.get(SHARDS_PER_WORKER, "1"), integer=True)),
            grid_zoom=int(_positive(GRID_ZOOM, e.get(GRID_ZOOM, "12"), integer=True)),
            policy_json=e.get(POLICY_JSON, "").strip(),
            ecs_cluster=e.get(ECS_CLUSTER, "").strip(),
            ecs_service=e.get(ECS_SERVICE, "").strip(),
            geo_stream_kms_key=e.get(GEO_STREAM_KMS_KEY, "").strip() or None,
            endpoint_url=e.get(AWS_ENDPOINT_URL, "").strip() or None,
            region=e.get(AWS_REGION, "").strip() or e.get("AWS_DEFAULT_REGION", "").strip() or DEFAULT_REGION,
            router_spec_ttl_s=_positive(ROUTER_SPEC_TTL_S, e.get(ROUTER_SPEC_TTL_S, "5")),
            green_timeout_s=_positive(GREEN_TIMEOUT_S, e.get(GREEN_TIMEOUT_S, "900")),
            drain_timeout_s=_positive(DRAIN_TIMEOUT_S, e.get(DRAIN_TIMEOUT_S, "900")),
            hook_callback_delay_s=int(_positive(HOOK_CALLBACK_DELAY_S, e.get(HOOK_CALLBACK_DELAY_S, "15"), integer=True)),
            stream_active_wait_s=_positive(STREAM_ACTIVE_WAIT_S, e.get(STREAM_ACTIVE_WAIT_S, "120")),
            swap_mode=parse_swap_mode(e.get(SWAP_MODE, "")),
            worker_task_definition=e.get(WORKER_TASK_DEFINITION, "").strip(),
        )

    def require(self, *names: str) -> LambdaConfig:
        """Return self if every named env var (e.g. ``CONTROL_TABLE``) was set, else raise ConfigError."""
        fields = {
            CONTROL_TABLE: self.control_table, LEASES_TABLE: self.leases_table,
            SNAPSHOTS_BUCKET: self.snapshots_bucket, SPECS_BUCKET: self.specs_bucket,
            COSTS_BUCKET: self.costs_bucket, QUARANTINE_BUCKET: self.quarantine_bucket,
            OUTPUT_BUCKET: self.output_bucket, MAX_LOAD: self.max_load, ECS_CLUSTER: self.ecs_cluster,
            ECS_SERVICE: self.ecs_service,
        }
        missing = [n for n in names if not fields.get(n)]
        if missing:
            raise ConfigError(f"required environment variable(s) not set: {', '.join(missing)}")
        return self

    def stream_name(self, version: int) -> str:
        """Return the geo stream name of a spec version: ``<prefix>-geo-v<version>``."""
        return geo_stream_name(self.prefix, version)


def parse_swap_mode(text: str, where: str = f"environment variable {SWAP_MODE}") -> SwapMode:
    """``carry`` (also when empty) or ``whole``; anything else raises ConfigError naming ``where`` and the value."""
    value = text.strip().lower() or SwapMode.CARRY.value
    try:
        return SwapMode(value)
    except ValueError:
        raise ConfigError(f"{where} must be one of {[m.value for m in SwapMode]}, got {text!r}") from None


def _positive(name: str, text: str, *, integer: bool = False) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0) or (integer and v != int(v)):
        kind = "a positive integer" if integer else "a positive number"
        raise ConfigError(f"environment variable {name} must be {kind}, got {text!r}")
    return v
