"""Typed, validated deployment settings, parsed once from the CDK context (cdk.json, ``-c key=value``).

Every setting has a default here; ``cdk.json`` repeats the defaults so operators see them in one place. A bad
value fails synth with a :class:`ConfigError` that names the context key and shows the bad value with ``!r``.
Values given on the command line (``-c max_load=5000``) arrive as strings, so numbers and booleans are parsed
from strings too (:mod:`infra.context`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from geokernel.aws_budget.quotas import BY_KEY
from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_bus import BUS_NAME_RE
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.stream import ROUTER_BATCH_SIZE, ROUTER_BATCHING_WINDOW_S, geo_stream_prefix
from geokernel.errors import PartitionerError, PolicyError
from geokernel.surge.meter import SurgeSettings
from infra.context import as_bool, as_float, as_int, as_text
from infra.errors import ConfigError as ConfigError
from infra.fleet_size import (
    LEASE_READ_UNITS_PER_WORKER,
    LEASE_WRITE_UNITS_PER_WORKER,
    fleet_workers,
    shards_per_worker,
    warm_units,
)
from partitioner.control.controller import ControlSettings

ENGINES = ("emr", "glue")
# How a new spec reaches the workers (SWAP_MODE; the values of geokernel.contracts.SwapMode): "carry" keeps every
# slot both specs share in the process holding it and scales the service by desired count; "whole" deploys a new
# task-definition revision per spec (ECS blue/green: a whole new fleet per version).
SWAP_MODES = tuple(m.value for m in SwapMode)
EMR_RELEASE = "emr-spark-8.0.0"
# Fargate's valid (cpu, memory MiB) pairs for the sizes a geo worker uses.
FARGATE_MEMORY = {
    256: (512, 1024, 2048),
    512: tuple(range(1024, 4097, 1024)),
    1024: tuple(range(2048, 8193, 1024)),
    2048: tuple(range(4096, 16385, 1024)),
    4096: tuple(range(8192, 30721, 1024)),
}
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{1,18}[a-z0-9]$")
_VPC_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
TRANSFORM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
_JAR_RE = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]/\S+\.jar$")  # an S3 object (bucket naming rules)

# Context keys the CDK itself or its CLI put in the context (feature flags "@aws-cdk/...", "aws:cdk:..." settings,
# lookup results "<provider>:account=...:region=..." in cdk.context.json, and these plain ones).
CDK_CONTEXT_KEYS = frozenset({"acknowledged-issue-numbers", "cli-telemetry", "aws-cdk:enableDiffNoFail"})


def is_cdk_context_key(key: str) -> bool:
    return key.startswith("@") or ":" in key or key in CDK_CONTEXT_KEYS


@dataclass(frozen=True, kw_only=True)
class PolicyConfig:
    """The partitioner's control policy, passed as POLICY_JSON (``partitioner.control.controller.ControlSettings``).

    ``mode`` ``predictive`` (the default: forecast, measured headroom, hysteresis) or ``reactive`` (the
    watermark policy ``partitioner.control.policy.RebalancePolicy``, whose keys are the other fields: they act in
    ``reactive`` mode only). :func:`load_config` checks the whole object with the partitioner's own parser.
    """

    mode: str
    high_watermark: float
    low_watermark: float
    max_waste_ratio: float
    cooldown_s: int
    min_change: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True, kw_only=True)
class GeoConfig:
    """All deployment settings. Build it with :func:`load_config`; never mutate it."""

    prefix: str
    engine: str
    max_load: float
    grid_zoom: int
    zoom: int
    refine_events: int
    window_s: int
    watermark_s: int
    policy: PolicyConfig
    vpc_id: str | None
    nat_gateways: int
    lease_s: int
    worker_cpu: int
    worker_memory_mib: int
    router_batch_size: int
    router_batching_window_s: int
    router_parallelism: int
    log_retention_days: int
    alarm_email: str | None
    spec_age_alarm_s: int
    utilisation_alarm: float
    quarantine_alarm_per_5min: int
    emr_max_vcpu: int
    emr_max_memory_gb: int
    glue_workers: int
    retain_data: bool
    swap_mode: str
    ingest_shards: int = 0  # 0: on-demand ingest stream; N: provisioned with N shards
    shards_per_worker: int = 1  # SHARDS_PER_WORKER: geo-stream shards each worker owns (derived from the cap if 0)
    geo_transform: str | None = None  # GEO_TRANSFORM of the workers ("module:Class"); None = the default transform
    state_handoff: bool = False  # STATE_HANDOFF of the router: a stateful transform's state follows each entity
    #: GEOFENCE_EVENT_BUS of the workers: the EventBridge bus (of this account and region) they put the geofence
    #: transitions on, granted events:PutEvents on it alone; None: no bus, no grant
    geofence_event_bus: str | None = None
    event_fields: EventFields = DEFAULT_EVENT_FIELDS  # EVENT_FIELDS: which key of an event holds each field
    # warm throughput of the leases table, write / read units/s: the setting, or derived from fleet_workers
    # (infra.fleet_size); 0: a new table's 4,000 writes and 12,000 reads
    leases_warm_writes: int = 0
    leases_warm_reads: int = 0
    fleet_workers: int = 0  # the worker slots the deployment is sized for (0: not declared; infra.fleet_size)
    #: s3:// URI of the Kinesis connector jar the Glue job reads the ingest stream with (format ``aws-kinesis``, which
    #: de-aggregates KPL records); None: Glue's own Kinesis source (no KPL de-aggregation). engine=glue only.
    glue_kinesis_connector_jar: str | None = None
    surge: str = ""  # SURGE_JSON of the router: geokernel.surge.meter.SurgeSettings as JSON, or "off"

    @property
    def geo_stream_prefix(self) -> str:
        """Name prefix of the per-version geo streams (docs/CONTRACTS.md: ``<prefix>-geo-v<version>``)."""
        return geo_stream_prefix(self.prefix)


NEW_TABLE_WRITES = int(BY_KEY["dynamodb.write_units.table"].per_second or 0)  # a new on-demand table's, per second
NEW_TABLE_READS = int(BY_KEY["dynamodb.read_units.table"].per_second or 0)

DEFAULTS: dict[str, Any] = {
    "prefix": "georebal",
    "engine": "emr",
    "max_load": 10000,
    "grid_zoom": 12,
    "zoom": 18,
    "refine_events": 500,
    "window_s": 300,
    "watermark_s": 60,
    "policy_mode": "predictive",
    "high_watermark": 0.9,
    "low_watermark": 0.5,
    "max_waste_ratio": 1.25,
    "cooldown_s": 600,
    "min_change": 0.05,
    "vpc_id": "",
    "nat_gateways": 2,
    "lease_s": 30,
    "worker_cpu": 512,
    "worker_memory_mib": 1024,
    "router_batch_size": ROUTER_BATCH_SIZE,
    "router_batching_window_s": ROUTER_BATCHING_WINDOW_S,
    "router_parallelism": 1,
    "log_retention_days": 30,
    "alarm_email": "",
    "spec_age_alarm_s": 86400,
    "utilisation_alarm": 0.95,
    "quarantine_alarm_per_5min": 100,
    "emr_max_vcpu": 16,
    "emr_max_memory_gb": 64,
    "glue_workers": 2,
    "retain_data": True,
    "ingest_shards": 0,
    "swap_mode": "carry",
    "shards_per_worker": 0,
    "geo_transform": "",
    "state_handoff": False,
    "geofence_event_bus": "",
    "event_fields": {},
    "leases_warm_writes": 0,
    "glue_kinesis_connector_jar": "",
    "leases_warm_reads": 0,
    "fleet_workers": 0,
    "surge": {},
}


def _raw(ctx: Mapping[str, Any], key: str) -> Any:
    value = ctx.get(key)
    return DEFAULTS[key] if value is None else value


def _int(ctx: Mapping[str, Any], key: str, lo: int, hi: int) -> int:
    return as_int(_raw(ctx, key), key, lo, hi)


def _float(ctx: Mapping[str, Any], key: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    return as_float(_raw(ctx, key), key, lo, hi, lo_open=lo_open)


def _bool(ctx: Mapping[str, Any], key: str) -> bool:
    return as_bool(_raw(ctx, key), key)


def _text(ctx: Mapping[str, Any], key: str, check: Callable[[str], bool], what: str) -> str:
    return as_text(_raw(ctx, key), key, check, what)


def load_config(ctx: Mapping[str, Any]) -> GeoConfig:
    """Parse and validate the settings; raises :class:`ConfigError` naming the first bad key.

    The keys are checked in a fixed order (the order of the calls below), so the first bad one is reported.
    """
    prefix = _text(ctx, "prefix", lambda v: bool(_PREFIX_RE.match(v)), "3-20 chars of a-z, 0-9, '-' starting with a letter")
    engine = _text(ctx, "engine", lambda v: v in ENGINES, f"one of {ENGINES}")
    grid_zoom, zoom = _zooms(ctx)
    window_s, watermark_s = _window(ctx)
    policy = _policy(ctx)
    vpc_id = _text(ctx, "vpc_id", lambda v: v == "" or bool(_VPC_RE.match(v)), "'' (create a VPC) or a VPC id vpc-...")
    worker_cpu, worker_memory = _worker_size(ctx)
    max_load = _float(ctx, "max_load", 0.0, 1e12, lo_open=True)
    shards = shards_per_worker(_raw(ctx, "shards_per_worker"), max_load, _raw(ctx, "max_load"), window_s)
    email = _text(ctx, "alarm_email", lambda v: v == "" or bool(_EMAIL_RE.match(v)), "'' or an e-mail address")
    workers = fleet_workers(_raw(ctx, "fleet_workers"))
    return GeoConfig(
        prefix=prefix,
        engine=engine,
        max_load=max_load,
        grid_zoom=grid_zoom,
        zoom=zoom,
        refine_events=_int(ctx, "refine_events", 1, 10**9),
        window_s=window_s,
        watermark_s=watermark_s,
        policy=policy,
        vpc_id=vpc_id or None,
        nat_gateways=_int(ctx, "nat_gateways", 1, 3),
        lease_s=_int(ctx, "lease_s", 3, 3600),
        worker_cpu=worker_cpu,
        worker_memory_mib=worker_memory,
        router_batch_size=_int(ctx, "router_batch_size", 1, 10000),
        router_batching_window_s=_int(ctx, "router_batching_window_s", 0, 300),
        router_parallelism=_router_parallelism(ctx),
        log_retention_days=_int(ctx, "log_retention_days", 1, 3653),
        alarm_email=email or None,
        spec_age_alarm_s=_int(ctx, "spec_age_alarm_s", 60, 30 * 86400),
        utilisation_alarm=_float(ctx, "utilisation_alarm", 0.0, 10.0, lo_open=True),
        quarantine_alarm_per_5min=_int(ctx, "quarantine_alarm_per_5min", 1, 10**9),
        emr_max_vcpu=_int(ctx, "emr_max_vcpu", 1, 4000),
        emr_max_memory_gb=_int(ctx, "emr_max_memory_gb", 2, 24000),
        glue_workers=_int(ctx, "glue_workers", 2, 299),
        retain_data=_bool(ctx, "retain_data"),
        ingest_shards=_int(ctx, "ingest_shards", 0, 10000),
        shards_per_worker=shards,
        swap_mode=_text(ctx, "swap_mode", lambda v: v in SWAP_MODES, f"one of {SWAP_MODES}"),
        geo_transform=_text(ctx, "geo_transform", lambda v: v == "" or bool(TRANSFORM_RE.match(v)),
                            "'' (the default reverse geocoder) or 'module:Class'") or None,
        state_handoff=_bool(ctx, "state_handoff"),
        geofence_event_bus=_geofence_event_bus(ctx),
        event_fields=_event_fields(ctx),
        leases_warm_writes=warm_units(_raw(ctx, "leases_warm_writes"), "leases_warm_writes", new_table=NEW_TABLE_WRITES,
                                      per_worker=LEASE_WRITE_UNITS_PER_WORKER, workers=workers),
        leases_warm_reads=warm_units(_raw(ctx, "leases_warm_reads"), "leases_warm_reads", new_table=NEW_TABLE_READS,
                                     per_worker=LEASE_READ_UNITS_PER_WORKER, workers=workers),
        fleet_workers=workers,
        glue_kinesis_connector_jar=_connector_jar(ctx, engine),
        surge=_surge(ctx),
    )


def _geofence_event_bus(ctx: Mapping[str, Any]) -> str | None:
    """``geofence_event_bus``: '' (None: no geofence events) or a bus name of the stack's account and region."""
    return _text(ctx, "geofence_event_bus", lambda v: v == "" or bool(BUS_NAME_RE.match(v)),
                 "'' (no geofence events) or an EventBridge bus name of this account and region "
                 "(letters, digits, '._-/'; 'default' for the default bus; not 'aws.')") or None


def _connector_jar(ctx: Mapping[str, Any], engine: str) -> str | None:
    """``glue_kinesis_connector_jar``: '' or ``s3://bucket/key.jar``, and only with ``engine=glue`` (EMR's runtime
    bundles the connector)."""
    jar = _text(ctx, "glue_kinesis_connector_jar", lambda v: v == "" or bool(_JAR_RE.match(v)),
                "'' (Glue's own Kinesis source) or an s3://bucket/key.jar URI")
    if jar and engine != "glue":
        raise ConfigError(f"context 'glue_kinesis_connector_jar' is for engine=glue (EMR Serverless bundles the "
                          f"connector), got {jar!r} with engine={engine!r}")
    return jar or None


def _surge(ctx: Mapping[str, Any]) -> str:
    """``surge`` (the router's meter: an object or JSON, ``{}``: defaults, or ``"off"``) as ``SURGE_JSON``."""
    value = _raw(ctx, "surge")
    if isinstance(value, str) and value.strip().lower() == "off":
        return "off"
    try:
        return SurgeSettings.from_json(value if isinstance(value, str) else json.dumps(value), "context 'surge'").to_json()
    except PolicyError as exc:
        raise ConfigError(str(exc)) from None


def _router_parallelism(ctx: Mapping[str, Any]) -> int:
    """``router_parallelism``: 1 with ``state_handoff`` (one invocation per ingest shard at a time owns its ledger)."""
    parallelism = _int(ctx, "router_parallelism", 1, 10)
    if parallelism > 1 and _bool(ctx, "state_handoff"):
        raise ConfigError(f"context 'router_parallelism' must be 1 with state_handoff=true (each ingest shard's router "
                          f"ledger is kept by one invocation at a time), got {_raw(ctx, 'router_parallelism')!r}")
    return parallelism


def _event_fields(ctx: Mapping[str, Any]) -> EventFields:
    """``event_fields``: ``{canonical: name}`` as an object (cdk.json) or its JSON text (``-c``); ``{}``: canonical."""
    value = _raw(ctx, "event_fields")
    try:
        if isinstance(value, str):
            return EventFields.from_json(value, "context 'event_fields'")
        return EventFields.from_mapping(value, "context 'event_fields'")
    except ContractError as exc:
        raise ConfigError(str(exc)) from None


def _zooms(ctx: Mapping[str, Any]) -> tuple[int, int]:
    """``grid_zoom`` and ``zoom`` (the events' zoom, at least the grid's)."""
    grid_zoom = _int(ctx, "grid_zoom", 1, 20)
    zoom = _int(ctx, "zoom", 1, 23)
    if zoom < grid_zoom:
        raise ConfigError(f"context 'zoom' must be >= grid_zoom ({grid_zoom}), got {_raw(ctx, 'zoom')!r}")
    return grid_zoom, zoom


def _window(ctx: Mapping[str, Any]) -> tuple[int, int]:
    """``window_s`` and ``watermark_s`` (at most one window)."""
    window_s = _int(ctx, "window_s", 10, 86400)
    watermark_s = _int(ctx, "watermark_s", 1, 86400)
    if watermark_s > window_s:
        raise ConfigError(f"context 'watermark_s' must be <= window_s ({window_s}), got {_raw(ctx, 'watermark_s')!r}")
    return window_s, watermark_s


def _policy(ctx: Mapping[str, Any]) -> PolicyConfig:
    """The policy keys, checked by the parser of POLICY_JSON the partitioner Lambda runs."""
    high = _float(ctx, "high_watermark", 0.0, 1.0, lo_open=True)
    low = _float(ctx, "low_watermark", 0.0, 1.0)
    if low >= high:
        raise ConfigError(f"context 'low_watermark' must be < high_watermark ({high}), got {_raw(ctx, 'low_watermark')!r}")
    mode = _text(ctx, "policy_mode", lambda v: v in ("predictive", "reactive"), "'predictive' or 'reactive'")
    policy = PolicyConfig(mode=mode, high_watermark=high, low_watermark=low,
                          max_waste_ratio=_float(ctx, "max_waste_ratio", 1.0, 100.0),
                          cooldown_s=_int(ctx, "cooldown_s", 0, 7 * 86400), min_change=_float(ctx, "min_change", 0.0, 1.0))
    try:  # the one parser of POLICY_JSON, the one the partitioner Lambda runs
        ControlSettings.from_json(policy.to_json(), where="cdk.json context (policy_mode and the policy keys)")
    except PartitionerError as exc:
        raise ConfigError(str(exc)) from None
    return policy


def _worker_size(ctx: Mapping[str, Any]) -> tuple[int, int]:
    """``worker_cpu`` and ``worker_memory_mib``: a pair Fargate offers."""
    worker_cpu = _int(ctx, "worker_cpu", 256, 4096)
    if worker_cpu not in FARGATE_MEMORY:
        raise ConfigError(f"context 'worker_cpu' must be one of {sorted(FARGATE_MEMORY)}, got {_raw(ctx, 'worker_cpu')!r}")
    worker_memory = _int(ctx, "worker_memory_mib", 512, 30720)
    if worker_memory not in FARGATE_MEMORY[worker_cpu]:
        raise ConfigError(
            f"context 'worker_memory_mib' must be a Fargate memory size for worker_cpu={worker_cpu} "
            f"{FARGATE_MEMORY[worker_cpu]}, got {_raw(ctx, 'worker_memory_mib')!r}"
        )
    return worker_cpu, worker_memory


def reject_unknown(keys: Iterable[str]) -> None:
    """Raise :class:`ConfigError` naming every context key that is neither a setting nor the CDK's own.

    ``cdk synth -c max-load=5`` would otherwise synthesize with the default ``max_load``."""
    unknown = sorted(k for k in keys if k not in DEFAULTS and not is_cdk_context_key(k))
    if unknown:
        raise ConfigError(f"unknown context key(s) {unknown!r} (cdk.json or -c); known keys: {sorted(DEFAULTS)!r}")


def config_from_node(node: Any) -> GeoConfig:
    """Read every known key from a construct node's context (cdk.json + ``-c``) and validate; unknown keys fail."""
    reject_unknown(node.get_all_context())
    return load_config({key: node.try_get_context(key) for key in DEFAULTS})
