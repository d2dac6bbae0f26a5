"""``python -m local.scale``: the control plane at fleet scale, on a simulated clock, with every AWS call counted.

A thousand worker slots run as light in-process workers on the worker's own code paths (lease claims and
heartbeats, the stream manifest, the handover gate and its summary, GetRecords, output flushes, checkpoints, cost
reports, scale-in protection), with the deploy controller, the router and ECS's scheduler beside them
(:mod:`local.scale.actors`), against moto in-process, on a simulated clock (:mod:`local.scale.simtime`). The run:

1. deploys v1 on a fresh service (every task launched, every slot claimed and warmed, the flip);
2. runs steady for ``steady_s`` while the routers route ``events_per_s``;
3. deploys v2, which moves about 5 % of the load (a carry swap: kept slots carry over, moved cells hand over);
4. deploys v3, which needs about 20 % more workers (new tasks launch, claim the new slots, the flip);
5. lets the old version drain and the output flush.

Every AWS call of the project's code is counted per simulated second (:mod:`partitioner.aws_budget`); the report
holds each API's peak and sustained rate against its documented quota, and the run fails (exit 1) when any is
above half its quota, a swap did not complete, or an event put on a geo stream is missing from the output.
"""

from __future__ import annotations

import argparse
import bisect
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
from botocore.config import Config

from geo_service.aws import Clients as WorkerClients
from geo_service.config import WorkerConfig
from lambdas.common.aws import (
    ControlTable,
    EcsFleet,
    EcsService,
    GeoStreams,
    LeaseTable,
    PutEntry,
    QuarantineSink,
    SpecStore,
)
from lambdas.deploy.controller import DeployController
from local.aws import Names
from local.scale.actors import Deployer, EcsScheduler, Router, router_containers
from local.scale.memo import shared_objects
from local.scale.simtime import SimTime
from local.scale.world import EventSource, World, build_world
from partitioner.aws_budget.calls import CallLog, watch
from partitioner.aws_budget.report import BudgetRow, budget, failures, rates_per_api, render
from partitioner.aws_budget.usage import ACCOUNT, Usage
from partitioner.contracts.control import DeployStatus
from partitioner.contracts.enriched import parse_enriched_key
from partitioner.contracts.lease import LEASE_KEY_ATTR
from partitioner.contracts.plan import SwapMode
from partitioner.shards import with_shards

log = logging.getLogger("local.scale")
REGION = "us-east-1"
PREFIX = "georebal-sim"


@dataclass(frozen=True)
class ScaleConfig:
    """What to simulate (the defaults are the issue's: 1,000 slots, 100,000 events/s)."""

    workers: int = 1000
    events_per_s: float = 100_000.0
    #: Events per simulated second per worker put into moto for real (one router invocation in ``sample``).
    sent_per_worker_s: float = 5.0
    shards_per_worker: int = 1
    steady_s: float = 30.0
    #: Seconds from a raised desired count to a running task (Fargate's pull and start).
    launch_delay_s: float = 20.0
    phase_timeout_s: float = 900.0
    seed: int = 11
    out: Path = Path("out/scale")


@dataclass
class Phase:
    """One step of the run, in simulated seconds from the start."""

    name: str
    start: float
    end: float = 0.0
    ok: bool = False
    detail: str = ""


@dataclass
class ScaleResult:
    """What one run measured."""

    config: ScaleConfig
    phases: list[Phase] = field(default_factory=list)
    slots: tuple[int, ...] = ()
    moved_shares: tuple[float, ...] = ()
    events_routed: int = 0
    events_sent: int = 0
    events_out: int = 0
    events_missing: int = 0
    tasks_started: int = 0
    wall_s: float = 0.0
    sim_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    calls: CallLog = field(default_factory=CallLog, repr=False)
    #: the simulated epoch second the run started at (phases count from it; the call log is in epoch seconds)
    sim_start: float = 0.0
    #: S3 PUTs of output objects per slot per second during the steady phase (target <= 0.1); None when no slot
    #: wrote two objects in it (records reach the slots too rarely: raise ``--sent-per-worker-s``)
    steady_output_puts: float | None = None

    def budget(self) -> list[BudgetRow]:
        return budget(self.calls)

    def rates(self) -> dict[str, float]:
        """Every API's calls (or units) per simulated second over the whole run."""
        return rates_per_api(self.calls, max(1.0, self.sim_s))

    @property
    def ok(self) -> bool:
        return (all(p.ok for p in self.phases) and self.events_missing == 0 and not self.errors
                and not failures(self.budget()))


def _clients(config: Config) -> dict[str, Any]:
    return {s: boto3.client(s, region_name=REGION, config=config) for s in ("s3", "dynamodb", "kinesis", "ecs", "kms")}


def _create_resources(c: dict[str, Any], names: Names) -> tuple[str, str]:
    for bucket in names.buckets:
        c["s3"].create_bucket(Bucket=bucket)
    for table, key in ((names.control_table, "pk"), (names.leases_table, LEASE_KEY_ATTR)):
        c["dynamodb"].create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                                   KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                   AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}])
    key_id = c["kms"].create_key(Description="geo streams")["KeyMetadata"]["KeyId"]
    c["kms"].create_alias(AliasName=names.geo_stream_key, TargetKeyId=key_id)
    cluster, service = f"{names.prefix}-workers", f"{names.prefix}-geo-workers"
    c["ecs"].create_cluster(clusterName=cluster)
    c["ecs"].register_task_definition(family=f"{names.prefix}-geo-worker", networkMode="awsvpc",
                                      requiresCompatibilities=["FARGATE"], cpu="512", memory="1024",
                                      containerDefinitions=[{"name": "worker", "image": "geo-worker", "essential": True}])
    c["ecs"].create_service(cluster=cluster, serviceName=service, taskDefinition=f"{names.prefix}-geo-worker",
                            desiredCount=0)
    return cluster, service


@contextmanager
def _moto_on(sim: SimTime) -> Iterator[None]:
    """moto in-process, its Kinesis arrival stamps on the simulated clock (workers compare them with it)."""
    from moto import mock_aws

    def now() -> datetime:
        return datetime.fromtimestamp(sim.now, UTC).replace(tzinfo=None)

    with mock_aws(), mock.patch("moto.kinesis.models.utcnow", now), shared_objects():
        yield


def worker_config(names: Names, cluster_prefix: str) -> WorkerConfig:
    """The AWS defaults of a generic carry-mode task (``infra/workers.py`` sets no timing variables)."""
    return WorkerConfig(spec_version=None, control_table=names.control_table, leases_table=names.leases_table,
                        specs_bucket=names.specs_bucket, costs_bucket=names.costs_bucket,
                        output_bucket=names.output_bucket, quarantine_bucket=names.quarantine_bucket,
                        prefix=cluster_prefix, swap_mode=SwapMode.CARRY)


def run(cfg: ScaleConfig, progress: Callable[[str], None] = print) -> ScaleResult:
    """Run the scenario of the module docstring; every AWS call lands in ``result.calls`` per simulated second."""
    started = time.monotonic()
    threading.stack_size(512 * 1024)
    sim = SimTime()
    calls = CallLog(clock=sim.time)
    result = ScaleResult(cfg, calls=calls)
    progress(f"building the world: {cfg.workers} slots from real places ...")
    world = _shard(build_world(cfg.workers, seed=cfg.seed), cfg.shards_per_worker)
    result.slots = tuple(len(v.spec.workers) for v in world.versions)
    result.moved_shares = tuple(round(v.moved_share, 4) for v in world.versions)
    names = Names(PREFIX)
    retries = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=50)
    with _moto_on(sim):
        quiet = _clients(retries)  # ECS's own view of the service and the checks of this harness: not counted
        cluster, service = _create_resources(quiet, names)
        counted = _clients(retries)
        for client in counted.values():
            watch(client.meta.events, calls)
        put_client = boto3.client("kinesis", region_name=REGION,
                                  config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        watch(put_client.meta.events, calls)
        shard_of = ShardLookup(quiet["kinesis"])
        control = ControlTable(counted["dynamodb"], names.control_table)
        specs = SpecStore(counted["s3"], names.specs_bucket)
        controller = DeployController(control, LeaseTable(counted["dynamodb"], names.leases_table), specs,
                                      GeoStreams(counted["kinesis"], names.geo_stream_key),
                                      EcsFleet(EcsService(counted["ecs"], cluster, service)), prefix=PREFIX,
                                      swap_mode=SwapMode.CARRY, clock=sim.time)
        deployer = Deployer(sim, controller, specs, control)
        ecs = EcsScheduler(sim, quiet["ecs"], cluster, service, config=worker_config(names, PREFIX),
                           clients=WorkerClients(s3=counted["s3"], kinesis=counted["kinesis"],
                                                 dynamodb=counted["dynamodb"]),
                           launch_delay_s=cfg.launch_delay_s,
                           on_protect=lambda body: _protected(calls),
                           on_launch=lambda at: calls.add([Usage("fargate.task_launches", ACCOUNT, 1)], at=at))
        source: list[EventSource] = [EventSource(world.versions[0].counts, entities=50 * cfg.workers, seed=cfg.seed)]
        containers = router_containers(cfg.events_per_s)
        sample = max(1, round(cfg.events_per_s / max(1.0, cfg.sent_per_worker_s * cfg.workers)))
        router = Router(sim, control=control, s3=counted["s3"], specs_bucket=names.specs_bucket,
                        streams=GeoStreams(put_client),
                        quarantine=QuarantineSink(counted["s3"], names.quarantine_bucket, "router"),
                        events=lambda: source[0], events_per_s=cfg.events_per_s, containers=containers,
                        sample=sample, count_put=lambda stream, entries, at: shard_of.count(calls, stream, entries, at))
        for actor, name in ((ecs.run, "ecs"), (deployer.run, "deployer"), (router.run, "router")):
            sim.spawn(actor, name)

        def phase(name: str, until: Callable[[], bool], detail: Callable[[], str]) -> None:
            p = Phase(name, sim.now - sim.start)
            deadline = sim.now + cfg.phase_timeout_s
            while sim.now < deadline and not until():
                sim.run_for(1.0)
                # a level, not a rate: the router's containers (one per ingest shard) and the deployer
                calls.add([Usage("lambda.concurrency", ACCOUNT, float(containers + 1))], at=sim.now - 1.0)
                if int(sim.now - sim.start) % 10 == 0:
                    progress(f"  t={sim.now - sim.start:5.0f}s  {name}: tasks {len(ecs.workers)}  "
                             f"{_deploy_line(controller)}  routed {router.stats.routed}  "
                             f"wall {time.monotonic() - started:.0f}s")
            p.end, p.ok, p.detail = sim.now - sim.start, until(), detail()
            result.phases.append(p)
            progress(f"{name}: {'done' if p.ok else 'NOT DONE'} at t={p.end:.0f}s ({p.detail})")

        for i, version in enumerate(world.versions):
            v = version.spec.version
            if i > 0:
                source[0] = EventSource(version.counts, entities=50 * cfg.workers, seed=cfg.seed + v)
            deployer.publish(version.spec)

            def finished(v: int = v) -> bool:
                return deployer.done(v) and controller.state().status == DeployStatus.DONE

            phase(("deploy v1 (fleet start)", "swap v2 (load moves)", "swap v3 (more workers)")[i], finished,
                  lambda: _deploy_line(controller))
            if i == 0:
                steady = Phase("steady", sim.now - sim.start)
                sim.run_for(cfg.steady_s)
                steady.end, steady.ok, steady.detail = sim.now - sim.start, True, f"{cfg.steady_s:g} s"
                result.phases.append(steady)
        router.stop()
        tail = Phase("drain and flush", sim.now - sim.start)
        sent = set(router.stats.sent_ids)
        out: set[str] = set()
        deadline = sim.now + 120.0
        while sim.now < deadline:
            sim.run_for(5.0)
            out = _output_ids(quiet["s3"], names.output_bucket)
            if sent <= out:
                break
        tail.end, tail.ok = sim.now - sim.start, sent <= out
        tail.detail = f"{len(sent & out)} of {len(sent)} sent events in the output"
        result.phases.append(tail)
        deployer.stop()
        ecs.stop()
        result.events_routed, result.events_sent = router.stats.routed, len(sent)
        result.events_out, result.events_missing = len(out), len(sent - out)
        result.tasks_started = ecs.started
        result.errors = [*sim.errors, *([f"{router.stats.failed} router puts failed"] if router.stats.failed else [])]
    result.sim_s = sim.now - sim.start
    result.wall_s = time.monotonic() - started
    result.sim_start = sim.start
    result.steady_output_puts = _steady_output_puts(result, names.output_bucket)
    return result


def _steady_output_puts(result: ScaleResult, output_bucket: str) -> float | None:
    """Output objects written per slot per second in the steady phase (every slot serving, no swap): the number of
    intervals between a slot's consecutive objects over their summed length (a window's edges would count a part
    of an interval as a whole one). Calls are logged in whole seconds, so an interval reads 1 s short or long."""
    steady = next((p for p in result.phases if p.name == "steady"), None)
    if steady is None:
        return None
    lo, hi = result.sim_start + steady.start, result.sim_start + steady.end
    gaps, span = 0, 0.0
    for row in result.calls.series():
        if row.key == "s3.put.prefix" and row.scope.startswith(f"{output_bucket}/"):
            times = sorted(t for t in row.seconds if lo <= t < hi)
            if len(times) >= 2:
                gaps += sum(int(row.seconds[t]) for t in times) - 1
                span += times[-1] - times[0]
    return gaps / span if span else None


def _protected(calls: CallLog) -> dict[str, object]:
    """The ECS agent's answer to a scale-in protection request (counted as the ECS call the agent makes for it)."""
    calls.add([Usage("ecs.UpdateTaskProtection", ACCOUNT, 1)])
    return {}


class ShardLookup:
    """The shard of each hash key of a geo stream (its shard list, read once per stream), so that the router's
    invocations that are counted rather than sent still count per shard (records and bytes)."""

    def __init__(self, kinesis: Any) -> None:
        self._kinesis = kinesis
        self._streams: dict[str, tuple[list[int], list[str]]] = {}

    def _ranges(self, stream: str) -> tuple[list[int], list[str]]:
        if stream not in self._streams:
            shards, token = [], {"StreamName": stream}
            while True:
                resp = self._kinesis.list_shards(**token)
                shards += [s for s in resp["Shards"] if "EndingSequenceNumber" not in s["SequenceNumberRange"]]
                if not resp.get("NextToken"):
                    break
                token = {"NextToken": resp["NextToken"]}
            shards.sort(key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
            self._streams[stream] = ([int(s["HashKeyRange"]["StartingHashKey"]) for s in shards],
                                     [str(s["ShardId"]) for s in shards])
        return self._streams[stream]

    def count(self, calls: CallLog, stream: str, entries: list[PutEntry], at: float) -> None:
        starts, ids = self._ranges(stream)
        found = [Usage("kinesis.PutRecords", ACCOUNT, 1)]
        for e in entries:
            shard = f"{stream}/{ids[bisect.bisect_right(starts, int(e.explicit_hash_key)) - 1]}"
            size = len(e.data) + len(e.partition_key)
            found += [Usage("kinesis.PutRecords.records", shard, 1), Usage("kinesis.PutRecords.bytes", shard, size)]
        calls.add(found, at=at)


def _shard(world: World, k: int) -> World:
    if k == 1:
        return world
    from local.scale.world import Version
    return World(tuple(Version(with_shards(v.spec, k), v.counts, v.moved_share) for v in world.versions),
                 world.max_load)


def _deploy_line(ctl: DeployController) -> str:
    st = ctl.state()
    return f"deploy v{st.version} {st.status}"


def _output_ids(s3: Any, bucket: str) -> set[str]:
    ids: set[str] = set()
    token: dict[str, str] = {}
    while True:
        resp = s3.list_objects_v2(Bucket=bucket, Prefix="enriched/", **token)
        for obj in resp.get("Contents", []):
            parse_enriched_key(obj["Key"])
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            ids.update(json.loads(line)["event_id"] for line in body.splitlines() if line)
        if not resp.get("IsTruncated"):
            return ids
        token = {"ContinuationToken": resp["NextContinuationToken"]}


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for v in value]
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def to_json(result: ScaleResult) -> dict[str, Any]:
    d = {f.name: _plain(getattr(result, f.name)) for f in fields(result) if f.name != "calls"}
    d["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(result.config).items()}
    d["ok"] = result.ok
    d["budget"] = [{"key": r.key, "scope": r.scope, "scopes": r.scopes, "peak": r.peak, "sustained": r.sustained,
                    "total": r.total, "margin": r.margin, "ok": r.ok} for r in result.budget()]
    d["rates"] = result.rates()
    return d


def parse_args(argv: list[str] | None = None) -> ScaleConfig:
    p = argparse.ArgumentParser(prog="python -m local.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1000, help="worker slots of v1 (default 1000)")
    p.add_argument("--events-per-s", type=float, default=100_000.0, help="events routed per second (100000)")
    p.add_argument("--sent-per-worker-s", type=float, default=5.0,
                   help="of those, events per second per worker put into moto for the workers to read (5)")
    p.add_argument("--shards-per-worker", type=int, default=1, help="geo-stream shards per worker, k (1)")
    p.add_argument("--steady", type=float, default=30.0, help="simulated seconds of steady state after v1 (30)")
    p.add_argument("--launch-delay", type=float, default=20.0, help="simulated seconds to start a task (20)")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", type=Path, default=Path("out/scale"))
    a = p.parse_args(argv)
    for name in ("workers", "shards_per_worker"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)!r}")
    return ScaleConfig(workers=a.workers, events_per_s=a.events_per_s, sent_per_worker_s=a.sent_per_worker_s,
                       shards_per_worker=a.shards_per_worker, steady_s=a.steady, launch_delay_s=a.launch_delay,
                       seed=a.seed, out=a.out)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "result.json").write_text(json.dumps(to_json(result), indent=2, default=str))
    (cfg.out / "calls.json").write_text(json.dumps(result.calls.to_json()))
    print(summary(result))
    print(f"wrote {cfg.out / 'result.json'} and {cfg.out / 'calls.json'}")
    return 0 if result.ok else 1


def summary(result: ScaleResult) -> str:
    """The phases, the events, the budget table and the verdict, as printed by ``python -m local.scale``."""
    cfg = result.config
    lines = [f"scale simulation: {cfg.workers} slots (v1..v3: {', '.join(map(str, result.slots))}), "
             f"{cfg.events_per_s:,.0f} events/s routed, k={cfg.shards_per_worker}"]
    lines += [f"  {p.name:26} {'done' if p.ok else 'NOT DONE':9} t={p.start:6.0f}..{p.end:6.0f}s  {p.detail}"
              for p in result.phases]
    lines.append(f"  events routed {result.events_routed:,}; put into moto {result.events_sent:,}; "
                 f"in the output {result.events_out:,}; missing {result.events_missing}; "
                 f"tasks launched {result.tasks_started}")
    puts = result.steady_output_puts
    lines.append(f"  output objects in the steady phase: "
                 f"{'not measured (no slot wrote two)' if puts is None else f'{puts:.3f}'} S3 PUTs per slot per second "
                 f"(OUTPUT_FLUSH_S {WorkerConfig.output_flush_s:g} s; during a swap the old slots write every poll "
                 f"interval until they drain)")
    rows = result.budget()
    lines += ["", render(rows, f"AWS API budget at {cfg.workers} workers")]
    bad = failures(rows)
    lines += [f"  BELOW 2x: {b}" for b in bad]
    lines += [f"  error: {e}" for e in result.errors]
    lines.append(f"{'OK' if result.ok else 'FAILED'}: {result.sim_s:.0f} simulated s in {result.wall_s:.0f} s wall")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
