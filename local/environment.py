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

from geo_service.pipeline.transform import load_transform, stateful_of, transform_name
from geokernel.contracts.env import EnvVar
from local.aws import Names
from local.config import RunConfig
from local.recorded import RECORDED_TIME_FIELD

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
            **transform_env(cfg.transform, recorded=cfg.events is not None)} | event_env(cfg) | geofence_env(cfg)


#: Seconds between two EMF metric lines of a worker in the loop (AWS: 60), so a quick run's worker logs hold several.
METRICS_INTERVAL_S = 10.0


def worker_env() -> dict[str, str]:
    """What the workers get beyond :func:`handler_env`: their CloudWatch EMF lines on (the in-process handlers' stay
    off: ``POWERTOOLS_METRICS_DISABLED``), every :data:`METRICS_INTERVAL_S`, into their logs (``<out>/logs/``)."""
    return {"POWERTOOLS_METRICS_DISABLED": "false", EnvVar.METRICS_INTERVAL_S: f"{METRICS_INTERVAL_S:g}"}


def event_env(cfg: RunConfig) -> dict[str, str]:
    """``EVENT_FIELDS`` of the router and the workers when ``--event-fields`` renames a field (else nothing)."""
    return {} if cfg.event_fields.is_default else {EnvVar.EVENT_FIELDS: cfg.event_fields.to_json()}


def transform_env(spec: str, *, recorded: bool = False) -> dict[str, str]:
    """``GEO_TRANSFORM`` for the workers, and this process's values of the variables the transform names in its
    ``settings`` (so the workers and the oracle, :mod:`local.oracle`, build the same transform); for a stateful
    transform also ``STATE_HANDOFF=1`` for the router, so each entity's state follows it (:mod:`geo_service.entity.handoff`).

    Replaying a recorded log (``recorded``, ``--events``), an event's ``ts`` is its replay time and its recorded time
    is in :data:`~local.recorded.RECORDED_TIME_FIELD`: a transform that declares a ``time_setting`` (the variable
    naming the event field its time comes from) gets that field in it, unless this process sets the variable already.
    The oracle reads the same value: :func:`local.start.start_aws` puts this environment into the process's."""
    transform = load_transform(spec)
    names = [n for n in getattr(transform, "settings", ()) if n != EnvVar.GEOFENCE_EVENT_BUS]  # the loop's: geofence_env
    handoff = {EnvVar.STATE_HANDOFF: "1"} if stateful_of(transform) is not None else {}
    time = time_setting(transform)
    clock = {time: os.environ.get(time, RECORDED_TIME_FIELD)} if recorded and time is not None else {}
    return {EnvVar.GEO_TRANSFORM: spec, **handoff, **{n: os.environ[n] for n in names if n in os.environ}, **clock}


def time_setting(transform: object) -> str | None:
    """The variable naming the event field ``transform`` takes an event's time from (its ``time_setting``), None when
    it declares none."""
    name = getattr(transform, "time_setting", None)
    return name if isinstance(name, str) and name else None


def replay_clocks(spec: str, speed: float) -> str:
    """What a recorded replay's times mean, for the report and the start line: ``ts`` is the replay clock, and which
    clock the transform ``spec`` measures time by (its ``time_setting``'s value in this process's environment)."""
    transform = load_transform(spec)
    name, time = transform_name(transform), time_setting(transform)
    field = None if time is None else transform_env(spec, recorded=True).get(time, "") or "ts"
    head = (f"an event's ts is its replay time ({speed:.4g} recorded s per wall s: Spark's windows, the utilisation "
            f"per window, lags and flips run on it), its recorded time is {RECORDED_TIME_FIELD}; ")
    if field is None:
        return head + (f"the transform {name} declares no time_setting: whatever it computes from ts (a speed, a "
                       f"dwell) is in replay time ({speed:.4g}x the recorded speeds)")
    if field == "ts":
        return head + (f"the transform {name} measures time by ts ({time}=ts): its speeds are {speed:.4g}x the recorded "
                       f"ones and its dwell times 1/{speed:.4g} of them (REPLAY TIME)")
    return head + f"the transform {name} measures time by {field} ({time}): its speeds and dwell times are recorded ones"


def geofence_events(spec: str) -> bool:
    """Whether the workers push the transform's geofence transitions: it names ``GEOFENCE_EVENT_BUS`` among its
    ``settings`` (the geofence transforms do; :mod:`geo_service.pipeline.geofence_events`)."""
    return EnvVar.GEOFENCE_EVENT_BUS in getattr(load_transform(spec), "settings", ())


def geofence_env(cfg: RunConfig) -> dict[str, str]:
    """``GEOFENCE_EVENT_BUS`` of the workers: the loop's own bus (:attr:`local.aws.Names.geofence_bus`, created in moto)
    when the transform's transitions are pushed, whatever the shell says; else nothing."""
    return {EnvVar.GEOFENCE_EVENT_BUS: Names(cfg.prefix).geofence_bus} if geofence_events(cfg.transform) else {}
