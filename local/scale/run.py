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

Every AWS call of the project's code is counted per simulated second (:mod:`geokernel.aws_budget`); the report
holds each API's peak and sustained rate against its documented quota, and the run fails (exit 1) when any is
above half its quota, a swap did not complete, or an event put on a geo stream is missing from the output.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from geo_service.adapters.aws import Clients as WorkerClients
from geokernel.aws_budget.calls import CallLog, watch
from geokernel.aws_budget.usage import ACCOUNT, Usage
from geokernel.contracts.control import DeployStatus
from geokernel.contracts.enriched import ENRICHED_PREFIX, EnrichedKey, EnrichedRecord, decode_lines, parse_enriched_key
from geokernel.contracts.plan import SwapMode
from geokernel.partition_spec.shards import with_shards
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.router.ledger import LedgerStore
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from local.aws import Names
from local.scale.account import REGION, clients, create_resources, moto_on, worker_config
from local.scale.actors import CountingState, Deployer, EcsScheduler, NullTransform, Router, router_containers
from local.scale.counting import ShardLookup, protected, steady_calls, steady_output_puts
from local.scale.result import Phase, ScaleConfig, ScaleResult, summary, to_json
from local.scale.simtime import SimTime
from local.scale.world import EventSource, HomedSource, Version, World, build_world

PREFIX = "georebal-sim"
PHASES = ("deploy v1 (fleet start)", "swap v2 (load moves)", "swap v3 (more workers)")
#: The output record's slot, added to its fields when the run reads the output back.
SLOT_FIELD = "_slot"
#: The router's pool of entities, per worker slot of v1 (stateless: where the events come from does not matter).
ENTITIES_PER_WORKER = 50
#: With state handoff, each entity sends one event every this many seconds on average (a vehicle's position
#: report): how many events of one entity a router batch holds sets its number of put rounds.
EVENT_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class Context:
    """One run in progress: what it was asked, its clock and call log, where it reports, when it started (wall)."""

    cfg: ScaleConfig
    sim: SimTime
    calls: CallLog
    result: ScaleResult
    progress: Callable[[str], None]
    started: float


@dataclass(frozen=True, slots=True)
class Actors:
    """The simulated control plane and data plane, started and running on the simulated clock."""

    quiet: dict[str, Any]  # ECS's own view of the service and the checks of this harness: not counted
    controller: DeployController
    deployer: Deployer
    ecs: EcsScheduler
    router: Router
    source: list[EventSource | HomedSource]  # the load the router sends; the next version's load replaces it
    containers: int


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
    result.leases_table = names.leases_table
    ctx = Context(cfg, sim, calls, result, progress, started)
    with moto_on(sim):
        actors = start_actors(ctx, names, world)
        deploy_versions(ctx, actors, world)
        written = drain(ctx, actors, names)
    result.sim_s = sim.now - sim.start
    result.wall_s = time.monotonic() - started
    result.sim_start = sim.start
    result.steady_output_puts = steady_output_puts(result, written)
    result.steady_calls = steady_calls(result, names.specs_bucket, names.output_bucket)
    return result


def start_actors(ctx: Context, names: Names, world: World) -> Actors:
    """Create the resources and clients (the counted ones watched), then spawn ECS, the deployer and the router."""
    cfg, sim, calls = ctx.cfg, ctx.sim, ctx.calls
    retries = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=50)
    quiet = clients(retries)  # ECS's own view of the service and the checks of this harness: not counted
    cluster, service = create_resources(quiet, names)
    counted = clients(retries)
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
                       on_protect=lambda body: protected(calls),
                       on_launch=lambda at: calls.add([Usage("fargate.task_launches", ACCOUNT, 1)], at=at),
                       transform_factory=CountingState if cfg.stateful else NullTransform)
    first = world.versions[0].counts
    entities = round(cfg.events_per_s * EVENT_EVERY_S) if cfg.stateful else ENTITIES_PER_WORKER * cfg.workers
    source: list[EventSource | HomedSource] = [HomedSource(first, entities, seed=cfg.seed) if cfg.stateful else
                                               EventSource(first, entities=entities, seed=cfg.seed)]
    containers = router_containers(cfg.events_per_s)
    sample = max(1, round(cfg.events_per_s / max(1.0, cfg.sent_per_worker_s * cfg.workers)))
    router = Router(sim, control=control, s3=counted["s3"], specs_bucket=names.specs_bucket,
                    streams=GeoStreams(put_client),
                    quarantine=QuarantineSink(counted["s3"], names.quarantine_bucket, "router"),
                    events=lambda: source[0], events_per_s=cfg.events_per_s, containers=containers,
                    sample=sample, count_put=lambda stream, entries, at: shard_of.count(calls, stream, entries, at),
                    ledgers=LedgerStore(counted["s3"], names.specs_bucket, clock=sim.time) if cfg.stateful else None,
                    calls=calls)
    for actor, name in ((ecs.run, "ecs"), (deployer.run, "deployer"), (router.run, "router")):
        sim.spawn(actor, name)
    return Actors(quiet, controller, deployer, ecs, router, source, containers)


def run_phase(ctx: Context, actors: Actors, name: str, until: Callable[[], bool], detail: Callable[[], str]) -> None:
    """Run the simulation one second at a time until ``until()`` or the phase timeout; record the phase."""
    sim, calls = ctx.sim, ctx.calls
    p = Phase(name, sim.now - sim.start)
    deadline = sim.now + ctx.cfg.phase_timeout_s
    while sim.now < deadline and not until():
        sim.run_for(1.0)
        # a level, not a rate: the router's containers (one per ingest shard) and the deployer
        calls.add([Usage("lambda.concurrency", ACCOUNT, float(actors.containers + 1))], at=sim.now - 1.0)
        if int(sim.now - sim.start) % 10 == 0:
            ctx.progress(f"  t={sim.now - sim.start:5.0f}s  {name}: tasks {len(actors.ecs.workers)}  "
                         f"{_deploy_line(actors.controller)}  routed {actors.router.stats.routed}  "
                         f"wall {time.monotonic() - ctx.started:.0f}s")
    p.end, p.ok, p.detail = sim.now - sim.start, until(), detail()
    ctx.result.phases.append(p)
    ctx.progress(f"{name}: {'done' if p.ok else 'NOT DONE'} at t={p.end:.0f}s ({p.detail})")


def deploy_versions(ctx: Context, actors: Actors, world: World) -> None:
    """Publish each version and wait for its deployment (v1 then a steady stretch, then the two swaps)."""
    cfg, sim, controller, deployer = ctx.cfg, ctx.sim, actors.controller, actors.deployer
    for i, version in enumerate(world.versions):
        v = version.spec.version
        if i > 0:
            now = actors.source[0]
            actors.source[0] = (now.follow(version.counts, seed=cfg.seed + v) if isinstance(now, HomedSource) else
                                EventSource(version.counts, entities=ENTITIES_PER_WORKER * cfg.workers,
                                            seed=cfg.seed + v, first_id=now.next_id))
        deployer.publish(version.spec)

        def finished(v: int = v) -> bool:
            return deployer.done(v) and controller.state().status == DeployStatus.DONE

        run_phase(ctx, actors, PHASES[i], finished, lambda: _deploy_line(controller))
        if i == 0:
            steady = Phase("steady", sim.now - sim.start)
            sim.run_for(cfg.steady_s)
            steady.end, steady.ok, steady.detail = sim.now - sim.start, True, f"{cfg.steady_s:g} s"
            ctx.result.phases.append(steady)


def drain(ctx: Context, actors: Actors, names: Names) -> list[EnrichedKey]:
    """Stop routing, wait until every event put on a geo stream is in the output, stop the actors, count; return the
    keys of the output objects."""
    sim, result, router = ctx.sim, ctx.result, actors.router
    router.stop()
    tail = Phase("drain and flush", sim.now - sim.start)
    sent = set(router.stats.sent_ids)
    records: dict[str, list[Mapping[str, Any]]] = {}
    written: list[EnrichedKey] = []
    out: set[str] = set()
    deadline = sim.now + 120.0
    while sim.now < deadline:
        sim.run_for(5.0)
        records, written = _output(actors.quiet["s3"], names.output_bucket)
        out = set(records)
        if sent <= out:
            break
    tail.end, tail.ok = sim.now - sim.start, sent <= out
    tail.detail = f"{len(sent & out)} of {len(sent)} sent events in the output"
    if ctx.cfg.stateful:
        breaks = state_breaks(records)
        result.errors += [f"state did not follow entity {b}" for b in breaks[:10]]
        slots: dict[str, set[str]] = {}
        for copies in records.values():
            slots.setdefault(str(copies[0].get("entity_id")), set()).update(str(c[SLOT_FIELD]) for c in copies)
        moved = sum(len(v) > 1 for v in slots.values())
        tail.detail += (f"; the state followed all {len(slots)} entities ({moved} of them changed slot)" if not breaks
                        else f"; the state broke for {len(breaks)} of {len(slots)} entities")
    result.phases.append(tail)
    actors.deployer.stop()
    actors.ecs.stop()
    result.events_routed, result.events_sent = router.stats.routed, len(sent)
    result.events_out, result.events_missing = len(out), len(sent - out)
    result.tasks_started = actors.ecs.started
    result.errors = [*sim.errors, *([f"{router.stats.failed} router puts failed"] if router.stats.failed else [])]
    return written


def _shard(world: World, k: int) -> World:
    if k == 1:
        return world
    return World(tuple(Version(with_shards(v.spec, k), v.counts, v.moved_share) for v in world.versions),
                 world.max_load)


def _deploy_line(ctl: DeployController) -> str:
    st = ctl.state()
    return f"deploy v{st.version} {st.status}"


def state_breaks(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Entities whose :class:`~local.scale.actors.CountingState` counts in the output are not 1, 2, ... n for their
    n events (``records``: every output record's fields per event id): a state lost, applied twice or out of order.

    A copy of an event (at-least-once output) must carry the same count as the event."""
    seen: dict[str, list[int]] = {}
    broken: set[str] = set()
    for copies in records.values():
        entity = str(copies[0].get("entity_id"))
        counts = {int(c.get("seen", 0)) for c in copies}
        if len(counts) > 1:
            broken.add(entity)
        seen.setdefault(entity, []).append(min(counts))
    broken |= {e for e, c in seen.items() if sorted(c) != list(range(1, len(c) + 1))}
    return sorted(broken)


def _output(s3: Any, bucket: str) -> tuple[dict[str, list[Mapping[str, Any]]], list[EnrichedKey]]:
    """Every output record's fields and slot (:data:`SLOT_FIELD`), per event id (a copy written twice is listed
    twice), and the keys of the objects holding them."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    keys: list[EnrichedKey] = []
    token: dict[str, str] = {}
    while True:
        resp = s3.list_objects_v2(Bucket=bucket, Prefix=ENRICHED_PREFIX, **token)
        for obj in resp.get("Contents", []):
            keys.append(parse_enriched_key(obj["Key"]))
            for line in decode_lines(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read(), obj["Key"]):
                rec = EnrichedRecord.from_dict(json.loads(line), obj["Key"])
                out.setdefault(rec.event_id, []).append({**rec.fields, SLOT_FIELD: rec.worker_id})
        if not resp.get("IsTruncated"):
            return out, keys
        token = {"ContinuationToken": resp["NextContinuationToken"]}


def parse_args(argv: list[str] | None = None) -> ScaleConfig:
    """The command line of ``python -m local.scale`` as a :class:`ScaleConfig`."""
    p = argparse.ArgumentParser(prog="python -m local.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1000, help="worker slots of v1 (default 1000)")
    p.add_argument("--events-per-s", type=float, default=100_000.0, help="events routed per second (100000)")
    p.add_argument("--sent-per-worker-s", type=float, default=5.0,
                   help="of those, events per second per worker put into moto for the workers to read (5)")
    p.add_argument("--shards-per-worker", type=int, default=1, help="geo-stream shards per worker, k (1)")
    p.add_argument("--steady", type=float, default=30.0, help="simulated seconds of steady state after v1 (30)")
    p.add_argument("--launch-delay", type=float, default=20.0, help="simulated seconds to start a task (20)")
    p.add_argument("--leases-warm-writes", type=int, default=0,
                   help="the stack's leases_warm_writes: hold the leases table's writes against it (0: 4,000)")
    p.add_argument("--leases-warm-reads", type=int, default=0,
                   help="the stack's leases_warm_reads: hold the leases table's reads against it (0: 12,000)")
    p.add_argument("--stateful", action="store_true",
                   help="state handoff on: the router numbers events through its ledgers, the workers run a "
                        "stateful transform, entities keep their home cells")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", type=Path, default=Path("out/scale"))
    a = p.parse_args(argv)
    for name in ("workers", "shards_per_worker"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)!r}")
    for name in ("leases_warm_writes", "leases_warm_reads"):
        if getattr(a, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(a, name)!r}")
    return ScaleConfig(workers=a.workers, events_per_s=a.events_per_s, sent_per_worker_s=a.sent_per_worker_s,
                       shards_per_worker=a.shards_per_worker, steady_s=a.steady, launch_delay_s=a.launch_delay,
                       seed=a.seed, out=a.out, leases_warm_writes=a.leases_warm_writes,
                       leases_warm_reads=a.leases_warm_reads, stateful=a.stateful)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m local.scale``: run, write ``result.json`` and ``calls.json``, print the summary."""
    cfg = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(cfg)
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "result.json").write_text(json.dumps(to_json(result), indent=2, default=str))
    (cfg.out / "calls.json").write_text(json.dumps(result.calls.to_json()))
    print(summary(result))
    print(f"wrote {cfg.out / 'result.json'} and {cfg.out / 'calls.json'}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
