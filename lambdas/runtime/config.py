"""The typed Lambda config, read from the environment variables of :class:`geokernel.contracts.env.EnvVar`.

Every Lambda reads its settings once, at import time, with :meth:`LambdaConfig.from_env`, then asks
for the ones it needs with :meth:`LambdaConfig.require`. A missing or malformed value raises
:class:`ConfigError` naming the variable and the bad value. The names, who sets them and what they mean are in
``geokernel/contracts/env.py`` (``ENV_VARS``); the defaults are the fields' defaults below.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from geokernel.contracts.env import EnvVar
from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.stream import geo_stream_name
from geokernel.errors import PolicyError
from geokernel.surge.meter import SurgeSettings
from lambdas.runtime.errors import LambdaError

DEFAULT_PREFIX = "georebal"
DEFAULT_REGION = "us-east-1"
SURGE_OFF = "off"  # SURGE_JSON that turns the router's surge meter off


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
    router_spec_ttl_s: float = 0.0  # 0: the router reads `active` on every invocation (lambdas.router.routing)
    green_timeout_s: float = 900.0
    drain_timeout_s: float = 900.0
    hook_callback_delay_s: int = 15
    stream_active_wait_s: float = 120.0
    swap_mode: SwapMode = SwapMode.CARRY
    worker_task_definition: str = ""
    event_fields: EventFields = DEFAULT_EVENT_FIELDS
    state_handoff: bool = False
    router_parallelism: int = 1  # the event source mapping's parallelization factor (lambdas.runtime.pacing)
    function_timeout_s: float = 60.0  # the function's own timeout: what its clients' limits fit in (clients.py)
    deployment_id: str | None = None  # the stack's id: the tag of the geo streams this deployment creates
    surge_json: str = ""  # SURGE_JSON: the router's surge meter (geokernel.surge.meter.SurgeSettings), "off": none

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LambdaConfig:
        """Read every setting from ``env`` (default ``os.environ``); raise ConfigError on a bad value."""
        e = os.environ if env is None else env
        max_load_text = e.get(EnvVar.MAX_LOAD, "").strip()
        return cls(
            prefix=e.get(EnvVar.GEO_PREFIX, "").strip() or DEFAULT_PREFIX,
            control_table=e.get(EnvVar.CONTROL_TABLE, "").strip(),
            leases_table=e.get(EnvVar.LEASES_TABLE, "").strip(),
            snapshots_bucket=e.get(EnvVar.SNAPSHOTS_BUCKET, "").strip(),
            specs_bucket=e.get(EnvVar.SPECS_BUCKET, "").strip(),
            costs_bucket=e.get(EnvVar.COSTS_BUCKET, "").strip(),
            quarantine_bucket=e.get(EnvVar.QUARANTINE_BUCKET, "").strip(),
            output_bucket=e.get(EnvVar.OUTPUT_BUCKET, "").strip(),
            max_load=_positive(EnvVar.MAX_LOAD, max_load_text) if max_load_text else None,
            shards_per_worker=int(_positive(EnvVar.SHARDS_PER_WORKER, e.get(EnvVar.SHARDS_PER_WORKER, "1"),
                                            integer=True)),
            grid_zoom=int(_positive(EnvVar.GRID_ZOOM, e.get(EnvVar.GRID_ZOOM, "12"), integer=True)),
            policy_json=e.get(EnvVar.POLICY_JSON, "").strip(),
            ecs_cluster=e.get(EnvVar.ECS_CLUSTER, "").strip(),
            ecs_service=e.get(EnvVar.ECS_SERVICE, "").strip(),
            geo_stream_kms_key=e.get(EnvVar.GEO_STREAM_KMS_KEY, "").strip() or None,
            endpoint_url=e.get(EnvVar.AWS_ENDPOINT_URL, "").strip() or None,
            region=(e.get(EnvVar.AWS_REGION, "").strip() or e.get(EnvVar.AWS_DEFAULT_REGION, "").strip()
                    or DEFAULT_REGION),
            router_spec_ttl_s=_positive(EnvVar.ROUTER_SPEC_TTL_S, e.get(EnvVar.ROUTER_SPEC_TTL_S, "0"), zero=True),
            green_timeout_s=_positive(EnvVar.GREEN_TIMEOUT_S, e.get(EnvVar.GREEN_TIMEOUT_S, "900")),
            drain_timeout_s=_positive(EnvVar.DRAIN_TIMEOUT_S, e.get(EnvVar.DRAIN_TIMEOUT_S, "900")),
            hook_callback_delay_s=int(_positive(EnvVar.HOOK_CALLBACK_DELAY_S, e.get(EnvVar.HOOK_CALLBACK_DELAY_S, "15"),
                                                integer=True)),
            stream_active_wait_s=_positive(EnvVar.STREAM_ACTIVE_WAIT_S, e.get(EnvVar.STREAM_ACTIVE_WAIT_S, "120")),
            swap_mode=parse_swap_mode(e.get(EnvVar.SWAP_MODE, "")),
            worker_task_definition=e.get(EnvVar.WORKER_TASK_DEFINITION, "").strip(),
            event_fields=parse_event_fields(e.get(EnvVar.EVENT_FIELDS, "")),
            state_handoff=parse_flag(EnvVar.STATE_HANDOFF, e.get(EnvVar.STATE_HANDOFF, "")),
            router_parallelism=int(_positive(EnvVar.ROUTER_PARALLELISM, e.get(EnvVar.ROUTER_PARALLELISM, "1"),
                                             integer=True)),
            function_timeout_s=_positive(EnvVar.FUNCTION_TIMEOUT_S, e.get(EnvVar.FUNCTION_TIMEOUT_S, "60")),
            deployment_id=e.get(EnvVar.DEPLOYMENT_ID, "").strip() or None,
            surge_json=_surge_json(e.get(EnvVar.SURGE_JSON, "")),
        )

    def require(self, *names: str) -> LambdaConfig:
        """Return self if every named env var (e.g. ``EnvVar.CONTROL_TABLE``) was set, else raise ConfigError."""
        fields: dict[str, str | float | None] = {
            EnvVar.CONTROL_TABLE: self.control_table, EnvVar.LEASES_TABLE: self.leases_table,
            EnvVar.SNAPSHOTS_BUCKET: self.snapshots_bucket, EnvVar.SPECS_BUCKET: self.specs_bucket,
            EnvVar.COSTS_BUCKET: self.costs_bucket, EnvVar.QUARANTINE_BUCKET: self.quarantine_bucket,
            EnvVar.OUTPUT_BUCKET: self.output_bucket, EnvVar.MAX_LOAD: self.max_load,
            EnvVar.ECS_CLUSTER: self.ecs_cluster, EnvVar.ECS_SERVICE: self.ecs_service,
        }
        missing = [n for n in names if not fields.get(n)]
        if missing:
            raise ConfigError(f"required environment variable(s) not set: {', '.join(missing)}")
        return self

    def stream_name(self, version: int) -> str:
        """Return the geo stream name of a spec version: ``<prefix>-geo-v<version>``."""
        return geo_stream_name(self.prefix, version)


def _surge_json(text: str) -> str:
    """``SURGE_JSON`` checked: empty (the meter's defaults), ``off`` (no meter) or settings the meter accepts."""
    t = text.strip()
    if t.lower() == SURGE_OFF:
        return SURGE_OFF
    try:
        SurgeSettings.from_json(t, where=f"environment variable {EnvVar.SURGE_JSON}")
    except PolicyError as exc:
        raise ConfigError(str(exc)) from None
    return t


def parse_flag(name: str, text: str) -> bool:
    """``1``/``true`` or ``0``/``false``/empty (off); anything else raises ConfigError naming the variable."""
    t = text.strip().lower()
    if t in ("", "0", "false"):
        return False
    if t in ("1", "true"):
        return True
    raise ConfigError(f"environment variable {name} must be 1/true or 0/false, got {text!r}")


def parse_swap_mode(text: str, where: str = f"environment variable {EnvVar.SWAP_MODE}") -> SwapMode:
    """``carry`` (also when empty) or ``whole``; anything else raises ConfigError naming ``where`` and the value."""
    try:
        return SwapMode.parse(text, where)
    except ContractError as exc:
        raise ConfigError(str(exc)) from None


def parse_event_fields(text: str) -> EventFields:
    """The event field mapping of ``EVENT_FIELDS`` (empty: the canonical names); ConfigError names the value."""
    try:
        return EventFields.from_json(text, f"environment variable {EnvVar.EVENT_FIELDS}")
    except ContractError as exc:
        raise ConfigError(str(exc)) from None


def _positive(name: str, text: str, *, integer: bool = False, zero: bool = False) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be a number, got {text!r}") from None
    if not (math.isfinite(v) and (v > 0 or (zero and v == 0))) or (integer and v != int(v)):
        kind = ("a positive integer" if integer else "a positive number") + (" or 0" if zero else "")
        raise ConfigError(f"environment variable {name} must be {kind}, got {text!r}")
    return v
