"""The fleet a deployment is sized for (``fleet_workers``) and what follows from it: the leases table's warm
throughput (``leases_warm_writes`` / ``leases_warm_reads``), and the shape of the private subnets the workers run in.

``fleet_workers`` is the most worker slots the deployment is expected to run at its peak load (``0``: not declared).
``python -m georebal preflight`` checks the account's quotas for it (``--workers`` overrides it), and the leases
table is pre-warmed for it unless ``leases_warm_writes`` / ``leases_warm_reads`` name numbers of their own.

Notes
-----
* **Per-worker rates.** The 1,000-worker scale run (``python -m local.scale --workers 1000``, bench/README.md)
  peaked at 2,956 write and 6,550 read units/s on the leases table. Twice that per worker (the 2x margin the API
  budget asks of every quota, :data:`geokernel.aws_budget.report.MIN_MARGIN`), rounded up, is
  :data:`LEASE_WRITE_UNITS_PER_WORKER` = 6 and :data:`LEASE_READ_UNITS_PER_WORKER` = 14 units/s: 1,000 workers get
  6,000 writes and 14,000 reads, the settings that run was measured OK with.
* **Below a new table's.** A derived value at or below what a new on-demand table sustains anyway (4,000 writes,
  12,000 reads: fleets of up to 666 and 857 workers) is ``0``: no pre-warming, which is charged once.
* **Above a table's maximum.** A derived value above :data:`MAX_TABLE_UNITS` (40,000 units/s, the default table
  maximum; 6,667 workers for writes, 2,858 for reads) is refused naming ``fleet_workers``: give the setting an
  explicit number (a raised table quota) instead.
* **Explicit numbers win.** ``leases_warm_writes`` / ``leases_warm_reads`` above ``0`` are taken as they are
  (above a new table's and at most 40,000, as before); ``0`` means "follow ``fleet_workers``".
* A raised warm throughput cannot be lowered again: raising ``fleet_workers`` raises the table's for good.
"""

from __future__ import annotations

import math
from typing import Any

from geokernel.aws_budget.quotas import BY_KEY
from infra.context import as_int
from infra.errors import ConfigError

#: Write / read units per second the leases table is warmed to per worker of ``fleet_workers`` (see Notes).
LEASE_WRITE_UNITS_PER_WORKER = 6
LEASE_READ_UNITS_PER_WORKER = 14
#: A table's warm throughput maximum per direction (the default table-level quota,
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html).
MAX_TABLE_UNITS = 40_000
#: The most worker slots ``fleet_workers`` may declare.
MAX_FLEET_WORKERS = 100_000
#: A created VPC's private subnets (``infra/network.py``): one per AZ, ``/20`` each. AWS keeps 5 addresses of every
#: subnet (https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html).
MAX_AZS = 2
PRIVATE_SUBNET_MASK = 20
SUBNET_RESERVED_IPS = 5


def private_subnet_ips() -> int:
    """Usable IPv4 addresses of a created VPC's private subnets together: 2 x (4,096 - 5) = 8,182."""
    return MAX_AZS * ((1 << (32 - PRIVATE_SUBNET_MASK)) - SUBNET_RESERVED_IPS)


def warm_for(workers: int, new_writes: int, new_reads: int) -> tuple[int, int]:
    """The write and read units/s ``fleet_workers=workers`` warms the leases table to (0: a new table's suffice)."""
    writes, reads = workers * LEASE_WRITE_UNITS_PER_WORKER, workers * LEASE_READ_UNITS_PER_WORKER
    return (writes if writes > new_writes else 0), (reads if reads > new_reads else 0)


def fleet_workers(value: Any) -> int:
    """``fleet_workers``: 0 (not declared) or the fleet's worker slots at peak, at most :data:`MAX_FLEET_WORKERS`."""
    return as_int(value, "fleet_workers", 0, MAX_FLEET_WORKERS)


def warm_units(value: Any, key: str, *, new_table: int, per_worker: int, workers: int) -> int:
    """The leases table's warm throughput for setting ``key`` (``leases_warm_writes`` or ``leases_warm_reads``).

    Parameters
    ----------
    value
        The setting's value (an int, or its text from ``-c``).
    key
        The setting's name, for the error message.
    new_table
        What a new on-demand table sustains in that direction (4,000 writes, 12,000 reads per second).
    per_worker
        Units per second per worker of ``fleet_workers`` (:data:`LEASE_WRITE_UNITS_PER_WORKER` or ``_READ_``).
    workers
        ``fleet_workers`` (0: not declared).

    Returns
    -------
    int
        ``value`` when above 0; else ``workers * per_worker`` when that is above ``new_table``; else 0.

    Raises
    ------
    ConfigError
        ``value`` is not 0 and not in ``(new_table, 40,000]``, or the derived value is above 40,000.

    Notes
    -----
    See the module docstring for the rates and the edges.
    """
    explicit = as_int(value, key, 0, MAX_TABLE_UNITS)
    direction = "write" if "write" in key else "read"
    if 0 < explicit <= new_table:
        raise ConfigError(f"context {key!r} must be 0 (follow fleet_workers) or above a new on-demand table's "
                          f"{new_table} {direction} units/s, got {value!r}")
    if explicit:
        return explicit
    derived = workers * per_worker
    if derived > MAX_TABLE_UNITS:
        most = math.floor(MAX_TABLE_UNITS / per_worker)
        raise ConfigError(
            f"context 'fleet_workers' ({workers!r}) needs {derived:,} {direction} units/s of warm throughput on the "
            f"leases table ({per_worker} per worker), above a table's {MAX_TABLE_UNITS:,}: declare at most {most:,} "
            f"workers, or set {key!r} to the table's raised maximum")
    return derived if derived > new_table else 0


# A geo-stream shard takes up to 1,000 records/s and 1 MB/s of writes
# (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html). A slot's cap is max_load events per
# window_s (events at mean cost: a slot of cheap events carries more events, and arrivals burst within a window),
# so a slot gets k shards with its mean rate within SHARD_HEADROOM of them: k = ceil(max_load / window_s / 500),
# which also keeps 1 MB/s per shard for events of up to 2 KB on average (docs/SIZING.md "Shards per worker").
SHARD_RECORDS_PER_S = int(BY_KEY["kinesis.PutRecords.records"].per_second or 0)  # 1,000: the quota table's row
SHARD_HEADROOM = 0.5
# Most shards one worker may own. The same page gives a default account quota of 1,000 shards outside us-east-1,
# us-west-2 and eu-west-1, and a swap keeps two versions' streams: 50 shards a worker leaves room for 10 workers.
MAX_SHARDS_PER_WORKER = 50


def shards_per_worker(given_raw: Any, max_load: float, max_load_raw: Any, window_s: int) -> int:
    """The geo-stream shards each worker owns: ``shards_per_worker`` (its context value ``given_raw``), or (when 0)
    what the cap ``max_load`` (its context value ``max_load_raw``, named in errors) per ``window_s`` needs.

    A worker's cap is ``max_load / window_s`` events/s; each shard takes :data:`SHARD_RECORDS_PER_S` records/s of
    which a worker may plan on :data:`SHARD_HEADROOM`, so it needs ``ceil(rate / (1000 * 0.5))`` shards. An explicit
    value below that, or a need above :data:`MAX_SHARDS_PER_WORKER`, is rejected naming the setting.
    """
    per_shard = SHARD_RECORDS_PER_S * SHARD_HEADROOM
    rate = max_load / window_s
    need = max(1, math.ceil(rate / per_shard - 1e-9))
    given = as_int(given_raw, "shards_per_worker", 0, MAX_SHARDS_PER_WORKER)
    if given == 0 and need > MAX_SHARDS_PER_WORKER:
        raise ConfigError(
            f"context 'max_load' ({max_load_raw!r} events per window_s={window_s}) is {rate:g} events/s per "
            f"worker, which needs {need} geo-stream shards at {per_shard:g} events/s each; a worker owns at most "
            f"{MAX_SHARDS_PER_WORKER}: max_load <= {MAX_SHARDS_PER_WORKER * per_shard * window_s:g} for this window_s"
        )
    if 0 < given < need:
        raise ConfigError(
            f"context 'shards_per_worker' must be >= {need} for max_load={max_load_raw!r} per "
            f"window_s={window_s} ({rate:g} events/s per worker, {per_shard:g} per shard), got "
            f"{given_raw!r}"
        )
    return given or need
