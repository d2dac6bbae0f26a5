"""What the loop's components are told: the fixed control-plane timings and the handlers' environment.

The partitioner, router and deploy handlers run in this process and the workers in child processes; both read
their settings from the environment (:func:`handler_env`, beside the AWS names of :meth:`local.aws.EmbeddedAws.
environment`). The timings are the local loop's, much shorter than the AWS defaults, so that a run of a few
minutes sees several deployments.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from geo_service.pipeline.transform import load_transform, stateful_of
from geokernel.contracts.env import EnvVar
from local.config import RunConfig

#: The working directory of every child process (the Spark job, the workers): the repository's root.
REPO_ROOT = Path(__file__).resolve().parent.parent
GRID_ZOOM = 12
#: Control-plane timings of the local loop (AWS defaults are 900 s): a green fleet that is not
#: leased and warm within GREEN_TIMEOUT_S is rolled back; blue gets DRAIN_TIMEOUT_S to drain.
GREEN_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 60.0
#: The local loop's relief latency, signal -> flip, that the router's surge meter projects over (a carry swap that
#: starts a worker process: 5-11 s measured on the 2-core machine, plus the notification and the partitioner)
RELIEF_S = 10.0


def surge_env(cfg: RunConfig) -> str:
    """``SURGE_JSON`` of the local routers: one-second intervals judged three at a time (each environment sees about
    half the events: two environments), projecting over an interval and :data:`RELIEF_S`; the meter's defaults
    otherwise (:class:`geokernel.surge.meter.SurgeSettings`)."""
    bucket = 1.0 / cfg.window_s
    return json.dumps({"bucket_share": bucket, "recent_buckets": 3, "baseline_buckets": 12, "min_baseline": 4,
                       "slope_buckets": 4, "horizon_s": 1.0 + RELIEF_S})


def handler_env(cfg: RunConfig) -> dict[str, str]:
    """Environment of the in-process handlers beyond the AWS names (cap, zoom, policy)."""
    policy = {"cooldown_s": cfg.cooldown_s, "target_fill": cfg.target_fill, "high_watermark": cfg.high_watermark}
    return {EnvVar.MAX_LOAD: f"{cfg.cap:g}", EnvVar.GRID_ZOOM: str(GRID_ZOOM), EnvVar.POLICY_JSON: json.dumps(policy),
            EnvVar.GREEN_TIMEOUT_S: f"{GREEN_TIMEOUT_S:g}",
            EnvVar.DRAIN_TIMEOUT_S: f"{DRAIN_TIMEOUT_S:g}", EnvVar.HOOK_CALLBACK_DELAY_S: "1", EnvVar.STREAM_ACTIVE_WAIT_S: "30",
            EnvVar.POLL_INTERVAL_S: "0.5", EnvVar.ACTIVE_POLL_S: "1", "POWERTOOLS_SERVICE_NAME": "georebal-local", "POWERTOOLS_LOG_LEVEL": "ERROR",
            "LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_DISABLED": "true", EnvVar.SWAP_MODE: cfg.swap_mode,
            EnvVar.SHARDS_PER_WORKER: str(cfg.shards_per_worker), EnvVar.SURGE_JSON: surge_env(cfg),
            **transform_env(cfg.transform)} | event_env(cfg)


def event_env(cfg: RunConfig) -> dict[str, str]:
    """``EVENT_FIELDS`` of the router and the workers when ``--event-fields`` renames a field (else nothing)."""
    return {} if cfg.event_fields.is_default else {EnvVar.EVENT_FIELDS: cfg.event_fields.to_json()}


def transform_env(spec: str) -> dict[str, str]:
    """``GEO_TRANSFORM`` for the workers, and this process's values of the variables the transform names in its
    ``settings`` (so the workers and the oracle, :mod:`local.oracle`, build the same transform); for a stateful
    transform also ``STATE_HANDOFF=1`` for the router, so each entity's state follows it (:mod:`geo_service.entity.handoff`)."""
    transform = load_transform(spec)
    names = getattr(transform, "settings", ())
    handoff = {EnvVar.STATE_HANDOFF: "1"} if stateful_of(transform) is not None else {}
    return {EnvVar.GEO_TRANSFORM: spec, **handoff, **{n: os.environ[n] for n in names if n in os.environ}}
