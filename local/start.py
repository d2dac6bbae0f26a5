"""Bringing the loop up: the scenario, moto as AWS, then Spark, the loops, the fleet and the replay, in that order.

:func:`build_scenario` draws the load scenario from the seed, :func:`start_aws` starts moto and creates the
resources, :func:`start_services` starts every component (see the picture in :mod:`local.run`) and arms the faults
of ``--faults`` (:mod:`local.faults.arm`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Container
from typing import Any

import numpy as np

from geokernel.aws_budget.calls import CallLog
from geokernel.contracts.env import EnvVar
from lambdas.partitioner.logic import PartitionerDeps
from lambdas.runtime.clients import Clients
from lambdas.runtime.config import LambdaConfig
from local.aws import EmbeddedAws, start_moto
from local.calls import CALL_LOG_DIR, count_this_process
from local.dataset import EventFactory, Places, Scenario, choose_hotspot, load_places, surge_crowd
from local.deploy import DeployDriver
from local.environment import DRAIN_TIMEOUT_S, GREEN_TIMEOUT_S, REPO_ROOT, handler_env, replay_clocks, worker_env
from local.event_source import EventSourceMapping
from local.faults.arm import arm_faults
from local.faults.deployer_crash import CrashingFleet
from local.fleet import LocalFleet, WorkerSettings
from local.loops import Invocation, ObjectCreatedNotifier, lambda_environments, load_handler
from local.observe import ControlObserver
from local.outcomes import outcome, summarise
from local.output import EnrichedReader
from local.recorded import RecordedLog, ReplayPlan, describe, quarantine_bad_rows
from local.rejected import build_rejection, keep_rejected
from local.replay import KPL_EVENTS_PER_RECORD, RecordedReplayer, RecordedTimeline, Replayer
from local.report.eventbridge import GeofenceLog
from local.spark import start_spark, wait_for_spark
from local.state import RunState, say
from local.twin import wire_twin
from local.wiring.stack_wiring import Component

#: How long the replay may stay in warm-up (no active spec yet) before the run fails.
WARMUP_TIMEOUT_S = 240.0
#: After the first spec is active, how long the replay waits at most for its warm-up backlog to come out before its
#: clock starts anyway (local.replay, "Backlog"): a loaded 2-core machine took 44 s for 10,700 events
BACKLOG_TIMEOUT_S = 90.0
#: Execution environments the router's invocations are spread over (as Lambda spreads a function's invocations).
ROUTER_ENVIRONMENTS = 2
#: How often the surge notification lists the specs bucket's signals (S3 delivers an event within about a second)
SURGE_POLL_S = 0.5


def build_scenario(state: RunState) -> tuple[Places, Scenario]:
    """Load the places and draw the scenario (start hour, hotspot) from the seed; with ``--surge`` the crowd too
    (from its own draw, so the rest of the scenario is the run's without it)."""
    cfg = state.config
    places = load_places(cfg.dataset)
    rng = np.random.default_rng(cfg.seed)
    scenario = Scenario(start_utc_hour=float(rng.uniform(3.0, 6.0)), shift_s=cfg.shift_s,
                        hotspot_place=choose_hotspot(places, rng))
    state.scenario, state.places_source = scenario, places.source
    state.hotspot_name = places.names[scenario.hotspot_place]
    if cfg.surge:
        state.crowd = surge_crowd(places, scenario.hotspot_place, np.random.default_rng((cfg.seed, 61)), cfg.cap,
                                  cfg.window_s)
    return places, scenario


def start_aws(state: RunState) -> EmbeddedAws:
    """Start moto, point this process's handlers at it, create the resources, wire the twin from the synthesized
    stack and turn IAM on (:func:`local.twin.wire_twin`); returns the harness's view of AWS."""
    cfg = state.config
    aws = start_moto(cfg.prefix)
    state.aws = aws
    env = handler_env(cfg)
    os.environ.update(aws.environment(env))
    # The in-process partitioner balances on event counts, so the cap and the utilisation the report
    # measures share one unit; workers still write cost reports (counted in the report).
    os.environ.pop(EnvVar.COSTS_BUCKET, None)
    aws.create_resources(ingest_shards=2, geofence_events=EnvVar.GEOFENCE_EVENT_BUS in env)
    for note in (aws.server.kinesis_note, aws.server.events_note):
        if note is not None:
            say(state, note)
    state.twin = wire_twin(aws, cfg, stateful=EnvVar.STATE_HANDOFF in env, say=lambda m: say(state, m))
    aws = state.aws = state.twin.aws
    say(state, f"moto server (AWS) at {aws.endpoint_url}; stream, buckets and tables created "
               f"(prefix {cfg.prefix}); cap {cfg.cap:g} events per {cfg.window_s:g}s window; policy: build to "
               f"{100 * cfg.target_fill:.0f}%, redeploy above {100 * cfg.high_watermark:.0f}%, cooldown {cfg.cooldown_s:g}s")
    return aws


def on_invocation(state: RunState, aws: EmbeddedAws) -> Any:
    """Return the notifier's callback: note the version the snapshot published (the one before when it published
    none: a relief of the fast path in between is not the snapshot's) and announce it; keep the snapshot of a
    rejected build (:func:`keeper`)."""
    keep = keeper(state, aws)

    def report(inv: Invocation) -> None:
        status, _, version = outcome(inv.result)
        before = max((v for v in state.desired_after.values() if v is not None), default=None)
        published = status == "published" and version is not None
        state.desired_after[inv.key] = version if published else before
        what = f"ERROR {inv.error}" if inv.error else summarise(inv.result)
        verdict = f"PUBLISHED v{version}" if published else "no new spec"
        say(state, f"snapshot {inv.key.split('/')[1]}: {verdict} ({what})")
        reason = build_rejection(inv.result)
        if reason is not None:
            keep(inv.key, reason)
    return report


def on_surge(state: RunState) -> Callable[[Invocation], None]:
    """Return the surge notifier's callback: keep each signal's outcome for the report and announce it."""
    def report(inv: Invocation) -> None:
        state.surge_invocations.append(inv)
        what = f"ERROR {inv.error}" if inv.error else summarise(inv.result)
        status, _, version = outcome(inv.result)
        verdict = f"RELIEF PUBLISHED v{version}" if status == "published" else "no relief"
        say(state, f"surge signal {inv.key.rsplit('/', 2)[-2]}/{inv.key.rsplit('/', 1)[-1]}: {verdict} ({what})")
    return report


def keeper(state: RunState, aws: EmbeddedAws) -> Callable[[str, str], None]:
    """Return ``keep(manifest_key, reason)``: copy a rejected build's snapshot, the live spec and the build's exact
    input into ``<out>/rejected/`` (:func:`local.rejected.keep_rejected`) before moto's S3 goes away.

    It reads as the harness (its calls are not the partitioner's) and replays the partitioner's step without
    writing; a snapshot it cannot keep is named on the timeline, and the run goes on.
    """
    made: list[PartitionerDeps] = []

    def keep(key: str, reason: str) -> None:
        window = key.split("/")[1] if "/" in key else key
        try:
            if not made:
                clients = Clients(s3=aws.client("s3"), dynamodb=aws.client("dynamodb"), kinesis=None, ecs=None)
                made.append(PartitionerDeps.from_config(LambdaConfig.from_env(), clients))
            kept = keep_rejected(made[0], key, reason, state.config.out)
        except Exception as exc:  # keeping is a courtesy of the harness: the run goes on and says why
            say(state, f"snapshot {window}: its rejected build could not be kept: {type(exc).__name__}: {exc}")
            return
        state.rejected.append(kept)
        say(state, f"snapshot {window}: rejected build kept in {kept.folder} (replay: {kept.replayed}); "
                   f"reproduce: {kept.command}")
    return keep


def start_services(state: RunState, aws: EmbeddedAws, places: Places, scenario: Scenario) -> None:
    """Start Spark, then the observer, the S3 notifier, the router ESM, the deployer and the replay."""
    cfg = state.config
    observer = _start_components(state, aws)
    state.replayer = Replayer(aws.client("kinesis"), aws.names.ingest_stream, EventFactory(places, scenario, cfg.seed, fields=cfg.event_fields),
                              cfg.rate, cfg.duration_s, live=lambda: observer.active_version is not None,
                              warmup_timeout_s=WARMUP_TIMEOUT_S, align_s=cfg.window_s,
                              kpl=KPL_EVENTS_PER_RECORD if cfg.kpl else 0, out_ids=_out_ids(state),
                              backlog_timeout_s=BACKLOG_TIMEOUT_S, crowd=state.crowd)
    _start_loops(state, aws)
    if state.crowd is not None:
        c = state.crowd
        say(state, f"surge: an undeclared crowd of {c.rate_per_s:.1f} events/s ({100 * c.rate_per_s * cfg.window_s / cfg.cap:.0f}% "
                   f"of the cap) will arrive at {c.name} ({c.lat:.3f}, {c.lon:.3f}) {c.at * cfg.duration_s:.0f}s into "
                   f"the replay, ramping up over {c.ramp_s:g}s")
    say(state, f"replaying {len(places)} places of {places.source!r} at {cfg.rate:g} events/s: warm-up at "
               f"simulated {scenario.sim_time(0):%H:%M} UTC until the first spec is active and its backlog "
               f"is out, then {cfg.duration_s:g}s: "
               f"steady, day/night shift ({cfg.speed:g}x simulated time), new hotspot {state.hotspot_name!r} "
               f"ramping, steady; pace: {cfg.pace()}"
               + (f"; KPL-aggregated, {KPL_EVENTS_PER_RECORD} events per Kinesis record" if cfg.kpl else ""))


def start_recorded_services(state: RunState, aws: EmbeddedAws, log: RecordedLog, plan: ReplayPlan) -> None:
    """Like :func:`start_services`, replaying a recorded log (``--events``); its bad rows go to the quarantine."""
    cfg = state.config
    state.scenario = RecordedTimeline(int(log.ms[0]), plan.speed, plan.duration_s)
    key = quarantine_bad_rows(aws.client("s3"), aws.names.quarantine_bucket, log, int(time.time() * 1000))
    observer = _start_components(state, aws)
    state.replayer = RecordedReplayer(aws.client("kinesis"), aws.names.ingest_stream, log, plan,
                                      live=lambda: observer.active_version is not None,
                                      warmup_timeout_s=WARMUP_TIMEOUT_S, align_s=cfg.window_s,
                                      fields=cfg.event_fields, out_ids=_out_ids(state),
                                      backlog_timeout_s=BACKLOG_TIMEOUT_S)
    _start_loops(state, aws)
    say(state, describe(log, plan) + (f"; bad rows written to s3://{aws.names.quarantine_bucket}/{key}" if key else ""))
    say(state, "clocks: " + replay_clocks(cfg.transform, plan.speed))


def _out_ids(state: RunState) -> Callable[[], Container[str]]:
    """The ids of the events that came out so far (the run refreshes the reader; the replay only reads them)."""
    def ids() -> Container[str]:
        assert state.output is not None
        return state.output.ids
    return ids


def _start_components(state: RunState, aws: EmbeddedAws) -> ControlObserver:
    """Start Spark and make the fleet, the observer, the notifier, the router, the deployer and the output reader."""
    cfg = state.config
    state.calls = count_this_process(CallLog())  # before any handler makes its clients
    partitioner_handler = load_handler("lambdas.partitioner.handler:handler")
    routers = lambda_environments("lambdas.router.handler:handler", ROUTER_ENVIRONMENTS)
    state.spark = start_spark(state, aws)
    say(state, f"Spark streaming job started (pid {state.spark.pid}, log {state.spark.log_path})")
    wait_for_spark(state, state.spark)
    twin = state.twin
    assert twin is not None
    state.fleet = LocalFleet({**aws.environment(handler_env(cfg)), **worker_env(), CALL_LOG_DIR: str(cfg.out / "calls"),
                              **twin.environment(Component.WORKER)}, cfg.out / "logs", REPO_ROOT, WorkerSettings())
    fleet_now = state.fleet
    observer = state.observer = ControlObserver(
        aws, alive_pids=lambda: {p.pid for p in fleet_now.processes() if p.exited_at is None and p.child.alive()})
    wiring = twin.wiring
    state.notifier = ObjectCreatedNotifier(aws, wiring.notification(aws.names.snapshots_bucket), partitioner_handler,
                                           retries=wiring.async_retries[Component.PARTITIONER],
                                           on_invocation=on_invocation(state, aws))
    # the stack's event source mapping (synthesized template): batch size, starting position, retries, record age;
    # it polls twice per batching window (at one poll per window, a small recorded log's run measured one
    # worker-window at 153 % of its cap: bursts) and reads as the router's role
    state.router = EventSourceMapping(aws, routers, wiring.event_source(Component.ROUTER),
                                      role=twin.principals.of(Component.ROUTER))
    fleet: Any = state.fleet
    if "deployer-crash" in cfg.faults:
        fleet = CrashingFleet(state.fleet)  # the deployer's view of the fleet; the report reads state.fleet
    # the fast path: the routers' surge signals in the specs bucket invoke the partitioner (a second notification)
    state.surge_notifier = ObjectCreatedNotifier(
        aws, wiring.notification(aws.names.specs_bucket, Component.PARTITIONER), partitioner_handler,
        retries=wiring.async_retries[Component.PARTITIONER], interval_s=SURGE_POLL_S, on_invocation=on_surge(state))
    state.surge_notifier.name = "s3-notify-surge"
    state.deployer = DeployDriver(aws, fleet, say=lambda m: say(state, m),
                                  specs=wiring.notification(aws.names.specs_bucket, Component.DEPLOYER),
                                  green_timeout_s=GREEN_TIMEOUT_S, drain_timeout_s=DRAIN_TIMEOUT_S)
    state.output = EnrichedReader(aws.client("s3"), aws.names.output_bucket)
    if EnvVar.GEOFENCE_EVENT_BUS in handler_env(cfg):  # the report reads the geofence bus's log group at the end
        state.geofence = GeofenceLog(aws.client("logs"), aws.names.geofence_log_group)
    return observer


def _start_loops(state: RunState, aws: EmbeddedAws) -> None:
    """Start the loop threads (the replay last) and arm the faults of ``--faults``."""
    for loop in (state.observer, state.notifier, state.surge_notifier, state.router, state.deployer, state.replayer):
        assert loop is not None
        loop.start()
    arm_faults(state, aws)
