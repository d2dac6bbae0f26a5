"""A configured deployment as the kernel's :class:`~geokernel.aws_budget.levels.Fleet`: the settings of
:class:`~infra.config.GeoConfig` at a given number of worker slots."""

from __future__ import annotations

from geokernel.aws_budget.levels import Fleet
from infra.config import GeoConfig
from infra.fleet_size import MAX_AZS


def fleet_of(config: GeoConfig, workers: int) -> Fleet:
    """The fleet ``config`` deploys at ``workers`` worker slots (a created VPC spans :data:`MAX_AZS` AZs)."""
    return Fleet(workers=workers, worker_cpu=config.worker_cpu, shards_per_worker=config.shards_per_worker,
                 swap_mode=config.swap_mode, max_load=config.max_load, window_s=config.window_s,
                 ingest_shards=config.ingest_shards, router_parallelism=config.router_parallelism,
                 engine=config.engine, emr_max_vcpu=config.emr_max_vcpu, glue_workers=config.glue_workers,
                 creates_vpc=config.vpc_id is None, nat_gateways=config.nat_gateways, azs=MAX_AZS)


def describe(config: GeoConfig, workers: int) -> str:
    """One line: the fleet preflight checks."""
    ingest = f"{config.ingest_shards} provisioned ingest shards" if config.ingest_shards else "on-demand ingest"
    spark = (f"engine=emr (emr_max_vcpu={config.emr_max_vcpu})" if config.engine == "emr"
             else f"engine=glue (glue_workers={config.glue_workers})")
    return (f"{workers:,} workers x {config.worker_cpu / 1024:g} vCPU, swap_mode={config.swap_mode}, "
            f"{config.shards_per_worker} geo shard(s) per worker, {ingest} x router_parallelism "
            f"{config.router_parallelism}, {spark}, {'vpc_id=' + config.vpc_id if config.vpc_id else 'a new VPC'}")
