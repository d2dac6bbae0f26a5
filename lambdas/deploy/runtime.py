"""Build the DeployController for the Lambda handlers (once per container)."""

from __future__ import annotations

import functools

from geokernel.contracts.env import EnvVar
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.clients import make_clients
from lambdas.runtime.config import LambdaConfig
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import SpecStore


@functools.cache
def config() -> LambdaConfig:
    return LambdaConfig.from_env().require(EnvVar.CONTROL_TABLE, EnvVar.LEASES_TABLE, EnvVar.SPECS_BUCKET,
                                           EnvVar.ECS_CLUSTER, EnvVar.ECS_SERVICE)


@functools.cache
def controller() -> DeployController:
    """The controller over ECS (``controller.cache_clear()`` and ``config.cache_clear()`` rebuild it)."""
    cfg = config()
    c = make_clients(cfg)
    fleet = EcsFleet(EcsService(c.ecs, cfg.ecs_cluster, cfg.ecs_service), cfg.worker_task_definition)
    return DeployController(ControlTable(c.dynamodb, cfg.control_table), LeaseTable(c.dynamodb, cfg.leases_table),
                            SpecStore(c.s3, cfg.specs_bucket),
                            GeoStreams(c.kinesis, cfg.geo_stream_kms_key, deployment=cfg.deployment_id),
                            fleet, prefix=cfg.prefix,
                            green_timeout_s=cfg.green_timeout_s, drain_timeout_s=cfg.drain_timeout_s,
                            stream_wait_s=cfg.stream_active_wait_s, swap_mode=cfg.swap_mode,
                            code_stale=fleet.code_stale)
