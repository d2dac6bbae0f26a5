"""Environment variable names: the one place they are spelled, with who sets each one, who reads it, and what it means.

The CDK stack (``infra/stack.py``, ``infra/workers.py``) sets them on the Lambda functions and the worker
container; the local loop (``local/``) sets them on the processes it starts; the Lambdas
(``lambdas/runtime/config.py``) and the geo worker (``geo_service/runtime/config.py``) read them once at start-up. Every
side imports :class:`EnvVar`, so a renamed variable cannot reach one side only.

A member is a ``str`` equal to its value (``EnvVar.GEO_PREFIX == "GEO_PREFIX"``, the same hash), so it is the same
dictionary key as the plain string and ``os.environ.get(EnvVar.GEO_PREFIX)`` reads the variable; each member's
name is also its value. :data:`ENV_VARS` documents every member (:class:`EnvVarUse`: setters, readers, meaning).

This module imports nothing of the project: the worker image and the Lambda asset both ship it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class EnvVar(StrEnum):
    """The name of every environment variable a part of the system sets for another (or reads from AWS)."""

    # -- resource names: the stack (and the local loop) give them to every Lambda and the workers
    GEO_PREFIX = "GEO_PREFIX"
    CONTROL_TABLE = "CONTROL_TABLE"
    LEASES_TABLE = "LEASES_TABLE"
    SNAPSHOTS_BUCKET = "SNAPSHOTS_BUCKET"
    SPECS_BUCKET = "SPECS_BUCKET"
    COSTS_BUCKET = "COSTS_BUCKET"
    QUARANTINE_BUCKET = "QUARANTINE_BUCKET"
    OUTPUT_BUCKET = "OUTPUT_BUCKET"
    ECS_CLUSTER = "ECS_CLUSTER"
    ECS_SERVICE = "ECS_SERVICE"
    GEO_STREAM_KMS_KEY = "GEO_STREAM_KMS_KEY"
    INGEST_STREAM = "INGEST_STREAM"
    # -- partitioning and deployment settings
    MAX_LOAD = "MAX_LOAD"
    SHARDS_PER_WORKER = "SHARDS_PER_WORKER"
    GRID_ZOOM = "GRID_ZOOM"
    POLICY_JSON = "POLICY_JSON"
    SWAP_MODE = "SWAP_MODE"
    WORKER_TASK_DEFINITION = "WORKER_TASK_DEFINITION"
    EVENT_FIELDS = "EVENT_FIELDS"
    STATE_HANDOFF = "STATE_HANDOFF"
    # -- control-plane timings (the Lambdas' defaults apply in AWS; the local loop shortens them)
    ROUTER_SPEC_TTL_S = "ROUTER_SPEC_TTL_S"
    ROUTER_PARALLELISM = "ROUTER_PARALLELISM"
    SURGE_JSON = "SURGE_JSON"
    GREEN_TIMEOUT_S = "GREEN_TIMEOUT_S"
    DRAIN_TIMEOUT_S = "DRAIN_TIMEOUT_S"
    HOOK_CALLBACK_DELAY_S = "HOOK_CALLBACK_DELAY_S"
    STREAM_ACTIVE_WAIT_S = "STREAM_ACTIVE_WAIT_S"
    FUNCTION_TIMEOUT_S = "FUNCTION_TIMEOUT_S"
    DEPLOYMENT_ID = "DEPLOYMENT_ID"
    # -- the worker's revision marks (the deployer writes them into each task-definition revision it registers)
    SPEC_VERSION = "SPEC_VERSION"
    CODE_REVISION = "CODE_REVISION"
    # -- geo worker settings
    WORKER_ID = "WORKER_ID"
    LEASE_S = "LEASE_S"
    DRAIN_QUIET_S = "DRAIN_QUIET_S"
    COST_REPORT_INTERVAL_S = "COST_REPORT_INTERVAL_S"
    HEALTH_PORT = "HEALTH_PORT"
    GEO_TRANSFORM = "GEO_TRANSFORM"
    POLL_INTERVAL_S = "POLL_INTERVAL_S"
    ACTIVE_POLL_S = "ACTIVE_POLL_S"
    BUFFER_RING = "BUFFER_RING"
    HANDOVER_MARGIN_S = "HANDOVER_MARGIN_S"
    OUTPUT_FLUSH_S = "OUTPUT_FLUSH_S"
    OUTPUT_FLUSH_BYTES = "OUTPUT_FLUSH_BYTES"
    GET_RECORDS_INTERVAL_S = "GET_RECORDS_INTERVAL_S"
    METRICS_INTERVAL_S = "METRICS_INTERVAL_S"
    ECS_AGENT_URI = "ECS_AGENT_URI"
    GEOFENCE_EVENT_BUS = "GEOFENCE_EVENT_BUS"
    # -- AWS SDK settings the readers look at themselves
    AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
    AWS_REGION = "AWS_REGION"
    AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"


class Component(StrEnum):
    """A part of the system that sets or reads environment variables."""

    STACK = "stack"  # infra/: the Lambda functions' and the worker container's environment
    LOCAL = "local"  # local/: the processes of the local loop
    AWS = "aws"  # the AWS runtime: Lambda and ECS set the region, the ECS agent its endpoint
    PARTITIONER = "partitioner"  # lambdas/partitioner/
    ROUTER = "router"  # lambdas/router/
    DEPLOYER = "deployer"  # lambdas/deploy/deployer.py
    HOOKS = "hooks"  # lambdas/deploy/hooks.py
    WORKER = "worker"  # geo_service/


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvVarUse:
    """Who sets an environment variable, who reads it, and what it means (with the reader's default)."""

    set_by: tuple[Component, ...]
    read_by: tuple[Component, ...]
    meaning: str


_S, _L, _AWS = Component.STACK, Component.LOCAL, Component.AWS
_P, _R, _D, _H, _W = Component.PARTITIONER, Component.ROUTER, Component.DEPLOYER, Component.HOOKS, Component.WORKER
_LAMBDAS = (_P, _R, _D, _H)
_DEPLOY = (_D, _H)


def _use(set_by: tuple[Component, ...], read_by: tuple[Component, ...], meaning: str) -> EnvVarUse:
    return EnvVarUse(set_by=set_by, read_by=read_by, meaning=meaning)


#: Every variable's setters, readers and meaning.
ENV_VARS: Mapping[EnvVar, EnvVarUse] = MappingProxyType({
    EnvVar.GEO_PREFIX: _use((_S, _L), (*_LAMBDAS, _W),
                            "Name prefix of the deployment; geo streams are '<prefix>-geo-v<version>' (default 'georebal'); "
                            "the 'deployment' dimension of every metric (geokernel.contracts.metric_names)."),
    EnvVar.CONTROL_TABLE: _use((_S, _L), (*_LAMBDAS, _W), "DynamoDB control table (desired, active, deploy, plan items)."),
    EnvVar.LEASES_TABLE: _use((_S, _L), (*_DEPLOY, _W), "DynamoDB table of the workers' slot leases."),
    EnvVar.SNAPSHOTS_BUCKET: _use((_S, _L), (_P,), "S3 bucket of the Spark job's load snapshots (not given to workers)."),
    EnvVar.SPECS_BUCKET: _use((_S, _L), (*_LAMBDAS, _W), "S3 bucket of the partition specs and stream manifests."),
    EnvVar.COSTS_BUCKET: _use((_S, _L), (_P, _W),
                              "S3 bucket of the workers' cost reports; the partitioner applies their cost rates to a "
                              "snapshot without costs (unset: it does not)."),
    EnvVar.QUARANTINE_BUCKET: _use((_S, _L), (_R, _W),
                                   "S3 bucket of undecodable events (worker: defaults to OUTPUT_BUCKET)."),
    EnvVar.OUTPUT_BUCKET: _use((_S, _L), (_W,), "S3 bucket the workers write enriched records to."),
    EnvVar.ECS_CLUSTER: _use((_S,), _DEPLOY, "ECS cluster of the geo workers."),
    EnvVar.ECS_SERVICE: _use((_S,), _DEPLOY, "ECS service of the geo workers."),
    EnvVar.GEO_STREAM_KMS_KEY: _use((_S, _L), _DEPLOY,
                                    "KMS key the per-version geo streams are created with (unset: unencrypted)."),
    EnvVar.INGEST_STREAM: _use((_L,), (), "Name of the ingest stream, for a process of the local loop that wants it."),
    EnvVar.MAX_LOAD: _use((_S, _L), (_P,), "A worker's load cap per window (events at mean cost); required."),
    EnvVar.SHARDS_PER_WORKER: _use((_S, _L), (_P,),
                                   "Geo-stream shards each worker owns, written into each spec (default 1)."),
    EnvVar.GRID_ZOOM: _use((_S, _L), (_W,),
                           "Zoom of the quadkeys a worker reports costs at (default 12; the Lambdas parse it, the "
                           "partitioner uses each snapshot's own zoom)."),
    EnvVar.POLICY_JSON: _use((_S, _L), (_P,), "The rebalance policy as JSON (partitioner.control.controller.ControlSettings)."),
    EnvVar.SWAP_MODE: _use((_S, _L), (*_DEPLOY, _W),
                           "How a new spec reaches the workers: 'carry' (default, only changed slots move) or 'whole'."),
    EnvVar.WORKER_TASK_DEFINITION: _use((_S,), (_D,),
                                        "ARN of the worker revision the stack registered: the code the fleet should "
                                        "run (unset: whatever the service runs)."),
    EnvVar.EVENT_FIELDS: _use((_S, _L), (_R, _W),
                              "Which JSON key of an event holds each field and how ts is encoded, as JSON "
                              "{canonical: name, 'ts_unit': unit} (geokernel.contracts.event_fields.EventFields; "
                              "unset: the canonical names, ts_unit auto)."),
    EnvVar.STATE_HANDOFF: _use((_S, _L), (_R,),
                               "1: the router numbers each entity's events and marks where it changes slot, so a "
                               "stateful transform's state follows the entity (geokernel.contracts.handoff); "
                               "unset or 0: events are put as they came."),
    EnvVar.ROUTER_SPEC_TTL_S: _use((_L,), (_R,), "Seconds the router caches the active pointer (default 0: read on "
                                   "every invocation, which keeps each ingest shard's flip monotonic; above 0 "
                                   "environments may disagree that long and an entity's records may go back to the "
                                   "old version after the flip, out of order: lambdas.router.routing)."),
    EnvVar.ROUTER_PARALLELISM: _use((_S,), (_R,),
                                    "The router's event source mapping's parallelization factor (default 1): how "
                                    "many invocations per ingest shard share a geo shard's write quota while "
                                    "catching up (lambdas.runtime.pacing)."),
    EnvVar.SURGE_JSON: _use((_S, _L), (_R,),
                            "The router's surge meter as JSON (geokernel.surge.meter.SurgeSettings: interval, horizon, "
                            "trigger); a worker heading past its cap is signalled to the partitioner's fast path "
                            "(geokernel.contracts.surge). Unset: the defaults; 'off': no meter."),
    EnvVar.GREEN_TIMEOUT_S: _use((_L,), _DEPLOY, "Seconds a new fleet may take to be leased and warm (default 900)."),
    EnvVar.DRAIN_TIMEOUT_S: _use((_L,), (*_DEPLOY, _W),
                                 "Seconds the old fleet may take to drain; the worker's handover gate holds records "
                                 "for the previous version as long (default 900)."),
    EnvVar.HOOK_CALLBACK_DELAY_S: _use((_L,), _DEPLOY,
                                       "Seconds before ECS calls a held lifecycle hook again (callBackDelay); the "
                                       "deployer steps a carry swap as often (default 15)."),
    EnvVar.STREAM_ACTIVE_WAIT_S: _use((_L,), (_D,), "Seconds the deployer waits for a new geo stream to be ACTIVE (default 120)."),
    EnvVar.FUNCTION_TIMEOUT_S: _use((_S,), _LAMBDAS,
                                    "The function's own timeout in seconds: its AWS clients' timeouts and retries are "
                                    "derived from it, so one call's worst case ends in time to report "
                                    "(lambdas.runtime.clients.client_limits; default 60)."),
    EnvVar.DEPLOYMENT_ID: _use((_S,), _DEPLOY,
                               "The deployment's id (the stack's): the deploy controller tags every geo stream it "
                               "creates with it and deletes a same-named stream without it, left by an earlier "
                               "deployment with the same prefix (unset: no tags, every stream is its own)."),
    EnvVar.SPEC_VERSION: _use((_D, _L), (_W, _D),
                              "The spec version a worker was started for ('whole' mode: required); the deployer "
                              "reads it back from the running revision."),
    EnvVar.CODE_REVISION: _use((_D,), (_D,),
                               "ARN of the stack's revision a deployer-registered revision was copied from (the code it runs)."),
    EnvVar.WORKER_ID: _use((_L,), (_W,), "Pins a worker to one slot (e.g. 'w0001'; unset: it claims any free slot)."),
    EnvVar.LEASE_S: _use((_S, _L), (_W,), "Slot lease duration in seconds; heartbeats every third of it (default 30)."),
    EnvVar.DRAIN_QUIET_S: _use((_L,), (_W,), "Quiet seconds before a retired version's worker counts as drained (default 10)."),
    EnvVar.COST_REPORT_INTERVAL_S: _use((_L,), (_W,), "Seconds between two cost reports of a worker (default 300)."),
    EnvVar.HEALTH_PORT: _use((_L,), (_W,), "Port of the worker's health endpoint and its probe (0 or unset: off)."),
    EnvVar.GEO_TRANSFORM: _use((_S, _L), (_W,), "The worker's transform as 'module:Class' (default the reverse geocoder)."),
    EnvVar.POLL_INTERVAL_S: _use((_L,), (_W,), "Pause after an empty GetRecords, in seconds (default 1)."),
    EnvVar.ACTIVE_POLL_S: _use((_L,), (_W,), "Seconds between two reads of the active-spec pointer (default 2)."),
    EnvVar.BUFFER_RING: _use((), (_W,), "Tiles of buffer loaded around a worker's region (default 1)."),
    EnvVar.HANDOVER_MARGIN_S: _use((_L,), (_W,),
                                   "Seconds of Kinesis visibility and clock difference the swap handover allows (default 1)."),
    EnvVar.OUTPUT_FLUSH_S: _use((_L,), (_W,), "Age in seconds at which a slot's output buffer is written (default 10)."),
    EnvVar.OUTPUT_FLUSH_BYTES: _use((), (_W,), "Size at which a slot's output buffer is written (default 8 MiB)."),
    EnvVar.GET_RECORDS_INTERVAL_S: _use((), (_W,), "Least seconds between two GetRecords calls on one shard (default 0.5)."),
    EnvVar.METRICS_INTERVAL_S: _use((_L,), (_W,),
                                    "Seconds between two EMF metric lines of a worker on stdout (default 60; 0: none; "
                                    "geo_service/adapters/metrics.py)."),
    EnvVar.ECS_AGENT_URI: _use((_AWS,), (_W,),
                               "The ECS agent's endpoint in a task: the worker keeps its scale-in protection on while "
                               "it holds a lease (unset outside ECS)."),
    EnvVar.GEOFENCE_EVENT_BUS: _use((_S, _L), (_W,),
                                    "EventBridge bus the worker puts each record's geofence transitions on, shaped "
                                    "like Amazon Location's geofence events (geo_service.pipeline.geofence_events; "
                                    "unset or empty: none are put)."),
    EnvVar.AWS_ENDPOINT_URL: _use((_L,), (*_LAMBDAS, _W), "Endpoint of every AWS client: the moto server (local loop only)."),
    EnvVar.AWS_REGION: _use((_AWS, _L), (*_LAMBDAS, _W), "AWS region of the clients."),
    EnvVar.AWS_DEFAULT_REGION: _use((_L,), (*_LAMBDAS, _W), "AWS region when AWS_REGION is unset."),
})  # fmt: skip
