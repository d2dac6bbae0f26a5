"""The AWS quotas a deployment holds a level of (running vCPUs, network interfaces, shards, concurrent executions),
beside the rates of :mod:`geokernel.aws_budget.quotas`: one :class:`LevelQuota` row per quota, citing its AWS page;
what a configured fleet needs of each (:func:`needs`); and one :class:`Verdict` per quota once the account's value
is known (:func:`verdicts`, read by ``python -m georebal preflight``).

A fresh account meets these before any rate: a fleet that does not fit cannot start at all, or stalls mid-swap.

Notes
-----
* **The 2x margin.** A fleet fits a quota when the account's value, less what the account already uses of it, is at
  least :data:`~geokernel.aws_budget.report.MIN_MARGIN` (2) times the fleet's *peak* need: the rates' rule, so other
  work in the account and a fleet that grows past its estimate still fit.
* **Two fleets at the peak.** During a ``whole`` swap the old and the new fleet run together, and so they do in
  ``carry`` mode while new worker code rolls out (a code rollout is always a whole-fleet swap,
  ``lambdas/deploy/code.py``). So the worker tasks' vCPU, network interfaces and addresses peak at twice the fleet
  in both swap modes; every swap keeps both versions' geo streams, so shards peak at twice the fleet's too.
* **Estimates.** An on-demand ingest stream's shards are estimated from the fleet's cap (every worker at
  ``max_load`` per ``window_s``, 1,000 records/s per shard, doubled: on-demand keeps room for twice its peak), at
  least the 4 shards a new on-demand stream starts with. The Spark job's network interfaces (EMR Serverless in the
  private subnets) are one per worker of a driver of 1 vCPU and executors of 2 (the job's ``spark.driver.cores`` and
  ``spark.executor.cores``) within ``emr_max_vcpu``; the Glue job runs outside the VPC.
* **Defaults.** ``default`` is AWS's documented default; new accounts often start lower (Lambda, Fargate), which is
  why ``preflight`` reads the account's applied values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from geokernel.aws_budget.quotas import BY_KEY, BudgetError
from geokernel.aws_budget.report import MIN_MARGIN
from geokernel.contracts.plan import SwapMode

_QUOTA_CODE = re.compile(r"^L-[0-9A-F]{8}$")


class LevelUnit(StrEnum):
    VCPU = "vCPU"
    TASKS_PER_MINUTE = "tasks/min"
    NETWORK_INTERFACES = "ENIs"
    ADDRESSES = "IPs"
    SHARDS = "shards"
    STREAMS = "streams"
    EXECUTIONS = "executions"
    DPUS = "DPUs"
    JOB_RUNS = "job runs"


@dataclass(frozen=True)
class LevelQuota:
    """One AWS quota on a level (see the module docstring).

    ``service_code`` / ``quota_code`` name it in Service Quotas where it is there (``None``: raise it as ``raise_by``
    says, or not at all when that is empty); ``settings`` are what to ``change_verb`` (cdk.json settings, and
    ``--workers``) for a smaller need; ``engine`` limits the row to one Spark engine.
    """

    key: str
    title: str
    unit: LevelUnit
    default: float
    source: str
    service_code: str | None = None
    quota_code: str | None = None
    settings: tuple[str, ...] = ()
    raise_by: str = ""
    engine: str | None = None
    change_verb: str = "lower"

    def __post_init__(self) -> None:
        if not self.default > 0:
            raise BudgetError(f"level quota {self.key!r}: default must be positive, got {self.default!r}")
        if not self.source.startswith("https://"):
            raise BudgetError(f"level quota {self.key!r}: source must be an https URL, got {self.source!r}")
        if self.quota_code is not None and not _QUOTA_CODE.match(self.quota_code):
            raise BudgetError(f"level quota {self.key!r}: quota_code must look like 'L-3032A538', got {self.quota_code!r}")
        if (self.service_code is None) != (self.quota_code is None):
            raise BudgetError(f"level quota {self.key!r}: service_code and quota_code go together, got "
                              f"{self.service_code!r} and {self.quota_code!r}")

    @property
    def remedy(self) -> str:
        """What to do when the fleet does not fit: raise the quota, or lower the settings that drive the need."""
        change = f"{self.change_verb} {' / '.join(self.settings)}"
        if self.quota_code:
            how = f"raise the quota (Service Quotas {self.service_code} {self.quota_code})"
        elif self.raise_by:
            how = self.raise_by
        else:
            return f"not adjustable: {change}"
        return f"{how} or {change}" if self.settings else how


_ECS = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-quotas.html"
_VPC = "https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html"
_SUBNETS = "https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html"
_KINESIS = "https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html"
_LAMBDA = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
_EMR = "https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/endpoints-quotas.html"
_GLUE = "https://docs.aws.amazon.com/general/latest/gr/glue.html"
_WORKERS = "--workers (fleet_workers)"

LEVELS: tuple[LevelQuota, ...] = (
    LevelQuota("fargate.on_demand_vcpu", "Fargate On-Demand vCPU", LevelUnit.VCPU, 4000, _ECS, "fargate", "L-3032A538",
               (_WORKERS, "worker_cpu")),
    # "Rate of tasks launched by a service on AWS Fargate": 500 per service per minute, not adjustable
    LevelQuota("ecs.fargate_launches_per_service", "Fargate task launches per service", LevelUnit.TASKS_PER_MINUTE,
               500, _ECS, settings=(_WORKERS,)),
    LevelQuota("vpc.network_interfaces", "Network interfaces per Region", LevelUnit.NETWORK_INTERFACES, 5000, _VPC,
               "vpc", "L-DF5E4CA3", (_WORKERS, "emr_max_vcpu")),
    # not a quota: the addresses of the private subnets (two /20 of a created VPC, or vpc_id's free ones)
    LevelQuota("vpc.private_subnet_ips", "Private subnets' free IPv4 addresses", LevelUnit.ADDRESSES, 8182, _SUBNETS,
               settings=(_WORKERS, "emr_max_vcpu"), raise_by="use a vpc_id whose private subnets have more free addresses"),
    LevelQuota("kinesis.shards", "Kinesis shards per Region", LevelUnit.SHARDS, 1000, _KINESIS, "kinesis", "L-8EE540D4",
               (_WORKERS, "shards_per_worker (from max_load)", "ingest_shards")),
    LevelQuota("kinesis.on_demand_streams", "Kinesis on-demand streams", LevelUnit.STREAMS, 50, _KINESIS,
               settings=("ingest_shards to N > 0 (a provisioned ingest stream)",), raise_by="raise it with a support case",
               change_verb="set"),
    LevelQuota("lambda.concurrent_executions", "Lambda concurrent executions", LevelUnit.EXECUTIONS, 1000, _LAMBDA,
               "lambda", "L-B99A9384", ("ingest_shards", "router_parallelism")),
    LevelQuota("emr_serverless.max_vcpu", "EMR Serverless concurrent vCPU", LevelUnit.VCPU, 16, _EMR, "emr-serverless",
               "L-D05C8A75", ("emr_max_vcpu",), engine="emr"),
    LevelQuota("glue.task_dpus", "Glue task DPUs", LevelUnit.DPUS, 1000, _GLUE, "glue", "L-08F3B322",
               ("glue_workers",), engine="glue"),
    LevelQuota("glue.concurrent_job_runs", "Glue concurrent job runs", LevelUnit.JOB_RUNS, 50, _GLUE, "glue",
               "L-5E4153CA", engine="glue"),
)
LEVEL_BY_KEY: dict[str, LevelQuota] = {q.key: q for q in LEVELS}

#: Concurrent executions of the control functions besides the router: the partitioner, the deployer (its S3 event
#: and its one-minute schedule) and the lifecycle hooks (two stages of a deployment).
CONTROL_CONCURRENCY = 5
#: Shards a new on-demand stream starts with (4 MB/s of writes), and the room on-demand keeps over its peak.
ON_DEMAND_MIN_SHARDS = 4
ON_DEMAND_HEADROOM = 2
SHARD_RECORDS_PER_S = float(BY_KEY["kinesis.PutRecords.records"].per_second or 1000)
#: vCPU of the Spark job's driver and of each executor on EMR Serverless (one network interface each).
SPARK_DRIVER_VCPU = 1
SPARK_EXECUTOR_VCPU = 2
#: Glue G.1X: one DPU per worker.
GLUE_DPU_PER_WORKER = 1


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """A configured deployment at ``workers`` worker slots: what :func:`needs` reads (the cdk.json settings).

    ``worker_cpu`` in CPU units (1,024 per vCPU); ``ingest_shards`` 0 for an on-demand ingest stream;
    ``creates_vpc`` False when ``vpc_id`` names a VPC (no NAT gateways or Kinesis endpoint of the stack's own);
    ``green_timeout_s`` is how long a new fleet may take to be leased and warm (the deployer's ``GREEN_TIMEOUT_S``).
    """

    workers: int
    worker_cpu: int
    shards_per_worker: int
    swap_mode: str
    max_load: float
    window_s: int
    ingest_shards: int
    router_parallelism: int
    engine: str
    emr_max_vcpu: int
    glue_workers: int
    creates_vpc: bool
    nat_gateways: int
    azs: int = 2
    green_timeout_s: float = 900.0

    def __post_init__(self) -> None:
        for name in ("workers", "worker_cpu", "shards_per_worker", "window_s", "router_parallelism", "azs"):
            if getattr(self, name) < 1:
                raise BudgetError(f"fleet: {name} must be at least 1, got {getattr(self, name)!r}")
        if self.swap_mode not in tuple(SwapMode):
            raise BudgetError(f"fleet: swap_mode must be one of {[m.value for m in SwapMode]}, got {self.swap_mode!r}")
        if self.engine not in ("emr", "glue"):
            raise BudgetError(f"fleet: engine must be 'emr' or 'glue', got {self.engine!r}")
        if not (self.max_load > 0 and self.green_timeout_s > 0):
            raise BudgetError(f"fleet: max_load and green_timeout_s must be positive, got {self.max_load!r} and "
                              f"{self.green_timeout_s!r}")

    @property
    def ingest(self) -> int:
        """The ingest stream's shards: ``ingest_shards``, or the on-demand estimate (module Notes)."""
        if self.ingest_shards:
            return self.ingest_shards
        rate = self.workers * self.max_load / self.window_s
        return max(ON_DEMAND_MIN_SHARDS, ON_DEMAND_HEADROOM * math.ceil(rate / SHARD_RECORDS_PER_S - 1e-9))

    @property
    def spark_enis(self) -> int:
        """Network interfaces the Spark job holds in the private subnets (module Notes)."""
        if self.engine != "emr":
            return 0
        return 1 + max(0, self.emr_max_vcpu - SPARK_DRIVER_VCPU) // SPARK_EXECUTOR_VCPU

    @property
    def two_fleets(self) -> str:
        """When two fleets run at once, for :attr:`Need.why`."""
        return "during a whole swap or a code rollout" if self.swap_mode == SwapMode.WHOLE else "during a code rollout"


@dataclass(frozen=True)
class Need:
    """What a fleet holds of one quota: ``steady`` outside swaps, ``peak`` at most (``peak_when``: when, if above
    ``steady``); ``why`` says how."""

    key: str
    steady: float
    peak: float
    why: str
    peak_when: str = ""


def needs(fleet: Fleet) -> dict[str, Need]:
    """What ``fleet`` needs of every :data:`LEVELS` row that applies to its engine, in the rows' order.

    Parameters
    ----------
    fleet
        The configured deployment.

    Returns
    -------
    dict of str to Need
        Keyed by :attr:`LevelQuota.key`.

    Notes
    -----
    Peaks count two fleets (module Notes). A provisioned ingest stream needs no on-demand stream (0).
    """
    w, vcpu = fleet.workers, fleet.worker_cpu / 1024
    vpc_fixed = (fleet.nat_gateways + fleet.azs) if fleet.creates_vpc else 0  # NAT gateways, Kinesis endpoint
    subnet_fixed = fleet.azs if fleet.creates_vpc else 0  # the Kinesis endpoint's interfaces, one per AZ
    launches = math.ceil(w * 60 / fleet.green_timeout_s - 1e-9)
    k, ingest, two = fleet.shards_per_worker, fleet.ingest, fleet.two_fleets
    router = ingest * fleet.router_parallelism
    rows = [
        Need("fargate.on_demand_vcpu", w * vcpu, 2 * w * vcpu, f"{w:,} workers x {vcpu:g} vCPU, twice {two}"
             + ("" if fleet.swap_mode == SwapMode.WHOLE else " (new worker code is swapped in as a whole fleet)"), two),
        Need("ecs.fargate_launches_per_service", launches, launches,
             f"a fleet of {w:,} tasks started within the deployer's green timeout of {fleet.green_timeout_s:g} s"),
        Need("vpc.network_interfaces", w + fleet.spark_enis + vpc_fixed, 2 * w + fleet.spark_enis + vpc_fixed,
             f"one per worker task, twice {two}; {fleet.spark_enis} of the Spark job, {vpc_fixed} of the VPC", two),
        Need("vpc.private_subnet_ips", w + fleet.spark_enis + subnet_fixed, 2 * w + fleet.spark_enis + subnet_fixed,
             f"one per worker task, twice {two}; {fleet.spark_enis} of the Spark job, {subnet_fixed} of the Kinesis "
             f"endpoint", two),
        Need("kinesis.shards", w * k + ingest, 2 * w * k + ingest,
             f"{w:,} workers x {k} shards, twice during every swap; {ingest} of the ingest stream"
             + ("" if fleet.ingest_shards else " (on-demand, estimated)"), "during every swap"),
        Need("kinesis.on_demand_streams", 0 if fleet.ingest_shards else 1, 0 if fleet.ingest_shards else 1,
             "none: a provisioned ingest stream" if fleet.ingest_shards else "the on-demand ingest stream"),
        Need("lambda.concurrent_executions", router + CONTROL_CONCURRENCY, router + CONTROL_CONCURRENCY,
             f"the router: {ingest} ingest shards x parallelism {fleet.router_parallelism}; "
             f"{CONTROL_CONCURRENCY} of the control functions"),
        Need("emr_serverless.max_vcpu", fleet.emr_max_vcpu, fleet.emr_max_vcpu,
             "the application's maximum capacity, an update's two job runs included"),
        Need("glue.task_dpus", fleet.glue_workers * GLUE_DPU_PER_WORKER, 2 * fleet.glue_workers * GLUE_DPU_PER_WORKER,
             f"{fleet.glue_workers} G.1X workers, twice while an update starts its new run", "during a job update"),
        Need("glue.concurrent_job_runs", 1, 2, "the streaming job, twice while an update replaces its run",
             "during a job update"),
    ]
    return {n.key: n for n in rows if LEVEL_BY_KEY[n.key].engine in (None, fleet.engine)}


@dataclass(frozen=True)
class Have:
    """The account's value of one quota: ``value`` (None: not read, ``error`` says why), what kind of value it is
    (``source``: ``"applied"``, ``"AWS default"``...), what the account already ``used`` of it where that is known,
    and ``via`` (the API or page it was read from)."""

    value: float | None
    source: str
    used: float = 0.0
    error: str = ""
    via: str = ""


def number(value: float) -> str:
    """``4136`` as ``'4,136'``, ``12.5`` as ``'12.5'``."""
    return f"{value:,.10g}"


@dataclass(frozen=True)
class Verdict:
    """One quota held against a fleet: the quota, the fleet's need and the account's value; :attr:`margin`,
    :attr:`fits` and :attr:`change` (the setting to change) follow."""

    quota: LevelQuota
    need: Need
    have: Have

    @property
    def available(self) -> float | None:
        return None if self.have.value is None else self.have.value - self.have.used

    @property
    def margin(self) -> float | None:
        """available / peak need (inf for no need); None when the account's value is not known."""
        if self.available is None:
            return None
        return self.available / self.need.peak if self.need.peak else math.inf

    @property
    def fits(self) -> bool:
        return self.margin is not None and self.margin >= MIN_MARGIN

    @property
    def change(self) -> str:
        return self.quota.remedy

    def refusal(self) -> str:
        """One line naming the quota, the need, the account's value and what to change (for a verdict that fails)."""
        q, n, unit = self.quota, self.need, self.quota.unit.value
        if self.available is None:
            return f"{q.title}: not read ({self.have.error}); check it by hand, then {self.change}"
        need = (f"{number(n.steady)} {unit} ({number(n.peak)} {n.peak_when})" if n.peak != n.steady
                else f"{number(n.peak)} {unit}")
        have = (f"{number(self.available)} left ({number(self.have.value or 0)} {self.have.source}, "
                f"{number(self.have.used)} in use)" if self.have.used else f"{number(self.available)} {self.have.source}")
        return (f"{q.title}: the fleet needs {need}, {number(MIN_MARGIN * n.peak)} with the {MIN_MARGIN:g}x margin, "
                f"of {have}: {self.change}")


def verdicts(fleet: Fleet, haves: Mapping[str, Have]) -> tuple[Verdict, ...]:
    """One :class:`Verdict` per quota that applies to ``fleet``; a quota missing from ``haves`` is not read."""
    return tuple(Verdict(LEVEL_BY_KEY[key], need, haves.get(key, Have(None, "", error="no value given")))
                 for key, need in needs(fleet).items())
