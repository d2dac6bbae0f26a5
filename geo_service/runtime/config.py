"""Worker configuration: a typed, validated config read from the environment variables of
:class:`geokernel.contracts.env.EnvVar` (the one place the names are spelled, with who sets each one).

:func:`WorkerConfig.from_env` reads them once at start-up; a bad value raises :class:`ConfigError` naming the
variable and the value.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from geo_service.adapters.metrics import INTERVAL_S as METRICS_INTERVAL_S
from geo_service.errors import GeoServiceError
from geo_service.pipeline.buffer import FLUSH_BYTES, FLUSH_S
from geo_service.pipeline.consumer import MIN_INTERVAL_S
from geokernel.contracts.env import EnvVar
from geokernel.contracts.errors import ContractError
from geokernel.contracts.event_bus import BUS_RE
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.plan import SwapMode

DEFAULT_TRANSFORM = "geo_service.pipeline.transform:ReverseGeocoder"
_WORKER_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")  # a spec worker id; "#" would break the lease key

T = TypeVar("T")


class ConfigError(GeoServiceError, ValueError):
    """A configuration value is missing or invalid; the message names the variable and value."""


@dataclass(frozen=True)
class WorkerConfig:
    """Everything one geo worker needs, read once at start-up.

    Attributes
    ----------
    spec_version : int or None
        ``whole`` mode: the spec version this worker serves (``SPEC_VERSION``, required, >= 1). ``carry``
        mode: optional, the version it was started for (it also claims that version's slots while the plan
        does not say the version was rolled back or superseded).
    control_table, leases_table, specs_bucket, costs_bucket, output_bucket : str
        AWS resource names (required).
    quarantine_bucket : str
        Where undecodable records go (``QUARANTINE_BUCKET``; defaults to ``output_bucket``).
    worker_id : str or None
        Pin the worker slot (``WORKER_ID``, e.g. ``w0001``); None claims any free slot.
    prefix : str
        Resource name prefix (``GEO_PREFIX``, default ``georebal``).
    endpoint_url : str or None
        ``AWS_ENDPOINT_URL`` (moto locally; unset in AWS).
    lease_s : float
        Lease duration (``LEASE_S``, default 30); heartbeats every ``lease_s / 3``.
    drain_quiet_s : float
        Quiet period before a retired version's worker counts as drained (``DRAIN_QUIET_S``, default 10).
    cost_report_interval_s : float
        Cost report period (``COST_REPORT_INTERVAL_S``, default 300).
    health_port : int
        ``HEALTH_PORT``; 0 disables the health endpoint (default 0).
    transform : str
        ``GEO_TRANSFORM`` as ``module:Class`` (default the offline reverse geocoder).
    grid_zoom : int
        Zoom of the quadkeys costs are reported at (``GRID_ZOOM``, default 12).
    poll_interval_s : float
        Pause after an empty GetRecords (``POLL_INTERVAL_S``, default 1.0; Kinesis allows 5 reads/s per shard).
    active_poll_s : float
        How often the active-spec pointer is read (``ACTIVE_POLL_S``, default 2).
    buffer_ring : int
        Tiles of buffer loaded around the region (``BUFFER_RING``, default 1).
    swap_mode : SwapMode
        ``SWAP_MODE``: ``carry`` (default) or ``whole``.
    barrier_timeout_s : float
        How long the handover gate of a new version's slot holds records for the previous version before it
        lets them through anyway (``DRAIN_TIMEOUT_S``, default 900, the controller's drain timeout).
    handover_margin_s : float
        A new version's record is processed once every slot of the old version processed what arrived in
        its shard up to this long before it (``HANDOVER_MARGIN_S``, default 1.0: the time a put record takes to
        become readable plus the clock difference between the worker and Kinesis; :mod:`geo_service.swap.handover`).
    agent_uri : str or None
        ``ECS_AGENT_URI`` (set by the ECS agent in a task): the worker keeps its task's scale-in protection on
        while it holds a lease. Unset outside ECS.
    output_flush_s : float
        A slot's output buffer is written once its oldest row is this old (``OUTPUT_FLUSH_S``, default 10: one
        S3 object per 10 s per slot; :mod:`geo_service.serving.batches`). During a swap's handover an old slot flushes
        every ``poll_interval_s`` (its caught-up time moves with a flush).
    output_flush_bytes : int
        ... or once it holds this many bytes (``OUTPUT_FLUSH_BYTES``, default 8 MiB).
    get_records_interval_s : float
        Least time between two GetRecords calls on one shard (``GET_RECORDS_INTERVAL_S``, default 0.5: 2 of the
        5 calls/s a shard allows; :mod:`geo_service.pipeline.consumer`).
    event_fields : EventFields
        Which JSON key of an event holds each field (``EVENT_FIELDS``, JSON ``{canonical: name}``; default the
        canonical names). The enriched output uses the canonical names.
    metrics_interval_s : float
        Seconds between two CloudWatch EMF lines on stdout (``METRICS_INTERVAL_S``, default 60; 0 writes none:
        :mod:`geo_service.adapters.metrics`).
    geofence_event_bus : str or None
        ``GEOFENCE_EVENT_BUS``: the EventBridge bus (name or ARN) the worker puts the records' geofence transitions on
        (:mod:`geo_service.pipeline.geofence_events`); None (unset or empty): none are put.
    """

    spec_version: int | None
    control_table: str
    leases_table: str
    specs_bucket: str
    costs_bucket: str
    output_bucket: str
    quarantine_bucket: str = ""
    worker_id: str | None = None
    prefix: str = "georebal"
    endpoint_url: str | None = None
    region: str | None = None
    lease_s: float = 30.0
    drain_quiet_s: float = 10.0
    cost_report_interval_s: float = 300.0
    health_port: int = 0
    transform: str = DEFAULT_TRANSFORM
    grid_zoom: int = 12
    poll_interval_s: float = 1.0
    active_poll_s: float = 2.0
    buffer_ring: int = 1
    swap_mode: SwapMode = SwapMode.CARRY
    barrier_timeout_s: float = 900.0
    agent_uri: str | None = None
    handover_margin_s: float = 1.0
    output_flush_s: float = FLUSH_S
    output_flush_bytes: int = FLUSH_BYTES
    get_records_interval_s: float = MIN_INTERVAL_S
    event_fields: EventFields = DEFAULT_EVENT_FIELDS
    metrics_interval_s: float = METRICS_INTERVAL_S
    geofence_event_bus: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "swap_mode", parse_swap_mode(str(self.swap_mode)))
        if self.spec_version is None and self.swap_mode is SwapMode.WHOLE:
            raise ConfigError(f"{EnvVar.SPEC_VERSION} is required when {EnvVar.SWAP_MODE}={SwapMode.WHOLE.value!r}")
        if self.spec_version is not None and (isinstance(self.spec_version, bool)
                                              or not isinstance(self.spec_version, int) or self.spec_version < 1):
            raise ConfigError(f"{EnvVar.SPEC_VERSION} must be an integer >= 1, got {self.spec_version!r}")
        for name, value in (("control_table", self.control_table), ("leases_table", self.leases_table),
                            ("specs_bucket", self.specs_bucket), ("costs_bucket", self.costs_bucket),
                            ("output_bucket", self.output_bucket)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"WorkerConfig.{name} must be a non-empty string, got {value!r}")
        if self.worker_id is not None and not _WORKER_ID_RE.match(self.worker_id):
            raise ConfigError(f"{EnvVar.WORKER_ID} must be a spec worker id like 'w0001' (letters, digits, '_.-'), "
                              f"got {self.worker_id!r}")
        for name, seconds in (("lease_s", self.lease_s), ("drain_quiet_s", self.drain_quiet_s),
                              ("cost_report_interval_s", self.cost_report_interval_s),
                              ("poll_interval_s", self.poll_interval_s), ("active_poll_s", self.active_poll_s),
                              ("barrier_timeout_s", self.barrier_timeout_s),
                              ("handover_margin_s", self.handover_margin_s), ("output_flush_s", self.output_flush_s)):
            if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
                raise ConfigError(f"WorkerConfig.{name} must be a positive number of seconds, got {seconds!r}")
        if not (isinstance(self.get_records_interval_s, (int, float)) and 0 <= self.get_records_interval_s <= 60):
            raise ConfigError(f"{EnvVar.GET_RECORDS_INTERVAL_S} must be in [0, 60] seconds, "
                              f"got {self.get_records_interval_s!r}")
        if not (isinstance(self.metrics_interval_s, (int, float)) and 0 <= self.metrics_interval_s <= 3600):
            raise ConfigError(f"{EnvVar.METRICS_INTERVAL_S} must be in [0, 3600] seconds, "
                              f"got {self.metrics_interval_s!r}")
        if isinstance(self.output_flush_bytes, bool) or not 1 <= self.output_flush_bytes <= 1 << 30:
            raise ConfigError(f"{EnvVar.OUTPUT_FLUSH_BYTES} must be in [1, 2**30], got {self.output_flush_bytes!r}")
        if not 0 <= self.health_port <= 65535:
            raise ConfigError(f"{EnvVar.HEALTH_PORT} must be in [0, 65535], got {self.health_port!r}")
        if not 0 <= self.grid_zoom <= 24:
            raise ConfigError(f"{EnvVar.GRID_ZOOM} must be in [0, 24], got {self.grid_zoom!r}")
        if not 0 <= self.buffer_ring <= 8:
            raise ConfigError(f"{EnvVar.BUFFER_RING} must be in [0, 8], got {self.buffer_ring!r}")
        if ":" not in self.transform:
            raise ConfigError(f"{EnvVar.GEO_TRANSFORM} must be 'module:Class', got {self.transform!r}")
        if self.geofence_event_bus is not None and not BUS_RE.match(self.geofence_event_bus):
            raise ConfigError(f"{EnvVar.GEOFENCE_EVENT_BUS} must be an event bus name (letters, digits, '._-/') or "
                              f"an event bus ARN, got {self.geofence_event_bus!r}")
        if not self.quarantine_bucket:
            object.__setattr__(self, "quarantine_bucket", self.output_bucket)

    @property
    def heartbeat_s(self) -> float:
        """Heartbeat period: a third of the lease."""
        return self.lease_s / 3.0

    def replace(self, **changes: object) -> WorkerConfig:
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerConfig:
        """Read the configuration from environment variables (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        mode = parse_swap_mode(env.get(EnvVar.SWAP_MODE, ""))
        pinned = mode is SwapMode.WHOLE or bool((env.get(EnvVar.SPEC_VERSION) or "").strip())
        version = _get(env, EnvVar.SPEC_VERSION, int) if pinned else None
        return cls(
            spec_version=version,
            control_table=_get(env, EnvVar.CONTROL_TABLE, str),
            leases_table=_get(env, EnvVar.LEASES_TABLE, str),
            specs_bucket=_get(env, EnvVar.SPECS_BUCKET, str),
            costs_bucket=_get(env, EnvVar.COSTS_BUCKET, str),
            output_bucket=_get(env, EnvVar.OUTPUT_BUCKET, str),
            quarantine_bucket=env.get(EnvVar.QUARANTINE_BUCKET, ""),
            worker_id=env.get(EnvVar.WORKER_ID) or None,
            prefix=env.get(EnvVar.GEO_PREFIX) or "georebal",
            endpoint_url=env.get(EnvVar.AWS_ENDPOINT_URL) or None,
            region=env.get(EnvVar.AWS_REGION) or env.get(EnvVar.AWS_DEFAULT_REGION) or None,
            lease_s=_get(env, EnvVar.LEASE_S, float, 30.0),
            drain_quiet_s=_get(env, EnvVar.DRAIN_QUIET_S, float, 10.0),
            cost_report_interval_s=_get(env, EnvVar.COST_REPORT_INTERVAL_S, float, 300.0),
            health_port=_get(env, EnvVar.HEALTH_PORT, int, 0),
            transform=env.get(EnvVar.GEO_TRANSFORM) or DEFAULT_TRANSFORM,
            grid_zoom=_get(env, EnvVar.GRID_ZOOM, int, 12),
            poll_interval_s=_get(env, EnvVar.POLL_INTERVAL_S, float, 1.0),
            active_poll_s=_get(env, EnvVar.ACTIVE_POLL_S, float, 2.0),
            buffer_ring=_get(env, EnvVar.BUFFER_RING, int, 1),
            swap_mode=mode,
            barrier_timeout_s=_get(env, EnvVar.DRAIN_TIMEOUT_S, float, 900.0),
            agent_uri=env.get(EnvVar.ECS_AGENT_URI) or None,
            handover_margin_s=_get(env, EnvVar.HANDOVER_MARGIN_S, float, 1.0),
            output_flush_s=_get(env, EnvVar.OUTPUT_FLUSH_S, float, FLUSH_S),
            output_flush_bytes=_get(env, EnvVar.OUTPUT_FLUSH_BYTES, int, FLUSH_BYTES),
            get_records_interval_s=_get(env, EnvVar.GET_RECORDS_INTERVAL_S, float, MIN_INTERVAL_S),
            event_fields=parse_event_fields(env.get(EnvVar.EVENT_FIELDS, "")),
            metrics_interval_s=_get(env, EnvVar.METRICS_INTERVAL_S, float, METRICS_INTERVAL_S),
            geofence_event_bus=(env.get(EnvVar.GEOFENCE_EVENT_BUS) or "").strip() or None,
        )


def parse_swap_mode(text: str) -> SwapMode:
    """``carry`` (also when empty) or ``whole``; anything else raises ConfigError naming ``SWAP_MODE``."""
    value = text.strip().lower() or SwapMode.CARRY.value
    try:
        return SwapMode(value)
    except ValueError:
        raise ConfigError(f"{EnvVar.SWAP_MODE} must be one of {[m.value for m in SwapMode]}, got {text!r}") from None


def parse_event_fields(text: str) -> EventFields:
    """The mapping of ``EVENT_FIELDS`` (empty: the canonical names); ConfigError naming the variable and value."""
    try:
        return EventFields.from_json(text, f"environment variable {EnvVar.EVENT_FIELDS}")
    except ContractError as exc:
        raise ConfigError(str(exc)) from None


def _get(env: Mapping[str, str], name: str, parse: Callable[[str], T], default: T | None = None) -> T:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        if default is None:
            raise ConfigError(f"environment variable {name} is required but not set")
        return default
    try:
        return parse(raw.strip())
    except ValueError as exc:
        raise ConfigError(f"environment variable {name}={raw!r} is not a valid {parse.__name__}") from exc
