"""``python -m local.run``: the whole Geo Rebalancer loop on this machine, with a report.

What runs (all real, nothing mocked that a local component can do)::

    Replayer ──PutRecords──► ingest stream (moto Kinesis)
                              │                        │
     Spark streaming job ◄────┘ (subprocess,           └──► RouterPoller ─► lambdas.router.handler
     python -m glue_jobs.quadkey_counts                       (Kinesis ESM)     └─► geo stream v<N>
       └─► snapshots/…/_manifest.json (moto S3)                                        │
     ManifestNotifier ─► lambdas.partitioner.handler (S3 event) ─► spec v<N>, desired     │
     DeployDriver ─► lambdas.deploy controller + hooks ─► LocalFleet: python -m geo_service ◄┘
     ControlObserver: control + leases tables ─► flips, green ready, drained, lease safety

At the end :mod:`local.report` prints and writes the report; the exit code is 0 when every
invariant holds, 1 when one breaks (the report says which), 2 on bad arguments, 3 when a
component of the loop is missing or failed to start.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from local import procs
from local.aws import EmbeddedAws, start_moto, stop_moto
from local.calls import CALL_LOG_DIR, count_this_process
from local.config import RunConfig, parse_args
from local.dataset import EventFactory, Places, Scenario, choose_hotspot, load_places
from local.errors import LocalRunError
from local.events import LambdaContext
from local.fleet import LocalFleet, WorkerSettings
from local.loops import Invocation, LoopThread, ManifestNotifier, RouterPoller, load_handler
from local.observe import ControlObserver
from local.output import EnrichedReader
from local.replay import Replayer
from partitioner.aws_budget.calls import CallLog
from partitioner.contracts.control import ControlKey
from partitioner.contracts.lease import lease_key

REPO_ROOT = Path(__file__).resolve().parent.parent
GRID_ZOOM = 12
#: Allowed event lateness in the aggregation job: events are stamped at send time, so a
#: couple of seconds covers the producer's batching; a window is emitted once the watermark
#: passes its end (append mode), i.e. about window + watermark + trigger after it starts.
WATERMARK_S = 3
#: Control-plane timings of the local loop (AWS defaults are 900 s): a green fleet that is not
#: leased and warm within GREEN_TIMEOUT_S is rolled back; blue gets DRAIN_TIMEOUT_S to drain.
GREEN_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 60.0
#: The tail gives up after drain_timeout_s without new output, and never waits longer than this
#: many drain timeouts in total.
TAIL_HARD_LIMIT_FACTOR = 3
#: How long the replay may stay in warm-up (no active spec yet) before the run fails.
WARMUP_TIMEOUT_S = 240.0

#: Modules the loop cannot run without, and what each is for.
REQUIRED_MODULES = {
    "glue_jobs.quadkey_counts": "the Spark aggregation job (streaming local mode)",
    "lambdas.partitioner.handler": "the partitioner Lambda handler",
    "lambdas.router.handler": "the router Lambda handler",
    "lambdas.deploy.controller": "the deploy controller (blue/green orchestration)",
    "lambdas.deploy.hooks": "the blue/green lifecycle hook logic",
    "geo_service.__main__": "the geo worker process (python -m geo_service)",
    "partitioner.metrics": "spec evaluation (mismatch, utilisation) for the report",
}


class Interrupted(LocalRunError):
    """SIGTERM or SIGINT arrived: shut down cleanly and exit non-zero."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(f"signal {signal.Signals(signum).name}")


def missing_components() -> dict[str, str]:
    """Return ``{module: why it is needed}`` for every required module that is not importable."""
    missing = {}
    for module, what in REQUIRED_MODULES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing[module] = what
    return missing


@dataclass
class RunState:
    """Everything the report needs after the loop stopped."""

    config: RunConfig
    started_at: float
    aws: EmbeddedAws | None = None
    replayer: Replayer | None = None
    notifier: ManifestNotifier | None = None
    router: RouterPoller | None = None
    observer: ControlObserver | None = None
    #: the AWS calls of the handlers run in this process (the workers write theirs to <out>/calls/)
    calls: CallLog | None = None
    deployer: Any = None
    fleet: LocalFleet | None = None
    spark: procs.Child | None = None
    output: EnrichedReader | None = None
    scenario: Scenario | None = None
    places_source: str = ""
    hotspot_name: str = ""
    events_log: list[str] = field(default_factory=list)
    failure: str | None = None
    interrupted: str | None = None
    drained_cleanly: bool = False
    replay_ended_at: float | None = None
    finished_at: float | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="georebal-local-")))
    flips_announced: int = 0
    live: dict[str, Any] = field(default_factory=dict)  # read from moto before it stops (local.report)
    desired_after: dict[str, int | None] = field(default_factory=dict)  # manifest key -> desired version
    faults: list[Any] = field(default_factory=list)  # local.faults injectors (--faults)


def say(state: RunState, message: str) -> None:
    """Print a notable event on its own line (and keep it for the report)."""
    line = f"[{time.time() - state.started_at:6.1f}s] {message}"
    state.events_log.append(line)
    print(("\r\x1b[2K" if sys.stdout.isatty() else "") + line, flush=True)


def handler_env(cfg: RunConfig) -> dict[str, str]:
    """Environment of the in-process handlers beyond the AWS names (cap, zoom, policy)."""
    policy = {"cooldown_s": cfg.cooldown_s, "target_fill": cfg.target_fill, "high_watermark": cfg.high_watermark}
    return {"MAX_LOAD": f"{cfg.cap:g}", "GRID_ZOOM": str(GRID_ZOOM), "POLICY_JSON": json.dumps(policy),
            "ROUTER_SPEC_TTL_S": "1", "GREEN_TIMEOUT_S": f"{GREEN_TIMEOUT_S:g}",
            "DRAIN_TIMEOUT_S": f"{DRAIN_TIMEOUT_S:g}", "HOOK_CALLBACK_DELAY_S": "1", "STREAM_ACTIVE_WAIT_S": "30",
            "POLL_INTERVAL_S": "0.5", "ACTIVE_POLL_S": "1", "POWERTOOLS_SERVICE_NAME": "georebal-local", "POWERTOOLS_LOG_LEVEL": "ERROR",
            "LOG_LEVEL": "ERROR", "POWERTOOLS_METRICS_DISABLED": "true", "SWAP_MODE": cfg.swap_mode,
            "SHARDS_PER_WORKER": str(cfg.shards_per_worker)}


def start_spark(state: RunState, aws: EmbeddedAws) -> procs.Child:
    """Start the aggregation job in streaming local mode on the ingest stream."""
    cfg = state.config
    argv = [sys.executable, "-m", "glue_jobs.quadkey_counts",
            "--kinesis-stream", aws.names.ingest_stream, "--endpoint-url", aws.endpoint_url,
            "--out", f"s3://{aws.names.snapshots_bucket}",
            "--quarantine", f"s3://{aws.names.quarantine_bucket}/aggregation",
            "--window", f"{round(cfg.window_s)}s", "--watermark", f"{WATERMARK_S}s",
            "--grid-zoom", str(GRID_ZOOM), "--trigger", f"{max(1, round(cfg.window_s / 3))}s",
            "--checkpoint", str(state.workdir / "spark-checkpoint")]
    env = {**os.environ, **aws.environment(handler_env(cfg)), "PYSPARK_PYTHON": sys.executable}
    return procs.start("spark-quadkey-counts", argv, env, cfg.out / "logs", REPO_ROOT)


SPARK_READY_LINE = "[aggregation] streaming from"
SPARK_START_TIMEOUT_S = 150.0


def wait_for_spark(state: RunState, spark: procs.Child) -> None:
    """Wait until the aggregation job says its streaming queries started (its first stdout line).

    Starting the replay before that only builds a backlog the first micro-batch must chew through.
    On a timeout the run goes on (the job reads the stream from TRIM_HORIZON anyway).
    """
    deadline = time.time() + SPARK_START_TIMEOUT_S
    while time.time() < deadline:
        if not spark.alive():
            raise RuntimeError(f"the Spark job exited with code {spark.popen.returncode} while starting; "
                               f"last log lines:\n{spark.tail()}")
        with contextlib.suppress(OSError):
            if SPARK_READY_LINE in spark.log_path.read_text(errors="replace"):
                say(state, "Spark streaming queries started")
                return
        time.sleep(0.5)
    say(state, f"Spark did not report its queries started within {SPARK_START_TIMEOUT_S:g}s; replaying anyway")


def status_line(state: RunState) -> str:
    """The progress line: events, snapshots, specs, active version, workers, flips, output."""
    r, n, o, f = state.replayer, state.notifier, state.observer, state.fleet
    sent = len(r.sent_ids) if r else 0
    specs = sorted(v for v, s in (o.specs.items() if o else []) if s is not None)
    per_version = " ".join(f"v{v}:{f.alive(v)}" for v in f.versions()) if f else ""
    phase = "warm-up" if r is None or r.warming_up else f"replay {100 * r.fraction:3.0f}%"
    if r is not None and r.started_at is not None:
        assert state.scenario is not None
        phase += f" {state.scenario.phase(r.fraction)} (sim {state.scenario.sim_time(r.fraction):%H:%M} UTC)"
    return (f"t={time.time() - state.started_at:5.0f}s  {phase}  "
            f"sent {sent}  routed {state.router.records_in if state.router else 0}  "
            f"out {len(state.output.ids) if state.output else 0}  snapshots {len(n.invocations) if n else 0}  "
            f"specs {','.join(f'v{v}' for v in specs) or '-'}  "
            f"active {f'v{o.active_version}' if o and o.active_version else '-'}  "
            f"workers {f.alive() if f else 0} ({per_version})  flips {len(o.flips) if o else 0}")


def progress(state: RunState, last_print: float) -> float:
    """Redraw the status line (TTY, every second) or print it (logs, every 5 s)."""
    now = time.time()
    if sys.stdout.isatty():
        print("\r\x1b[2K" + status_line(state), end="", flush=True)
        return now
    if now - last_print >= 5.0:
        print(status_line(state), flush=True)
        return now
    return last_print


def check_children(state: RunState) -> None:
    """Fail fast when a loop died or the Spark job exited."""
    for loop in (state.notifier, state.router, state.observer, state.deployer, state.replayer):
        if isinstance(loop, LoopThread) and loop.fatal:
            raise RuntimeError(f"{loop.name} stopped: {loop.fatal}")
    if state.spark is not None and not state.spark.alive() and not any(
            getattr(f, "owns_exit", lambda: False)() for f in state.faults):
        raise RuntimeError(f"the Spark job exited with code {state.spark.popen.returncode}; "
                           f"last log lines:\n{state.spark.tail()}")


def on_invocation(state: RunState, aws: EmbeddedAws) -> Any:
    """Return the notifier's callback: note the desired version after the call and announce it."""
    ddb = aws.client("dynamodb")  # used by the notifier thread only

    def report(inv: Invocation) -> None:
        item = ddb.get_item(TableName=aws.names.control_table, Key={"pk": {"S": ControlKey.DESIRED}},
                            ConsistentRead=True).get("Item")
        desired = int(item["version"]["N"]) if item and "version" in item else None
        before = max((v for v in state.desired_after.values() if v is not None), default=None)
        state.desired_after[inv.key] = desired
        what = f"ERROR {inv.error}" if inv.error else _summarise_result(inv.result)
        verdict = f"PUBLISHED v{desired}" if desired != before else "no new spec"
        say(state, f"snapshot {inv.key.split('/')[1]}: {verdict} ({what})")
    return report


def _summarise_result(result: Any) -> str:
    """One line from the partitioner handler's ``{"results": [{"status", "reason", "version"}]}``."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        parts = [f"{r.get('status')}" + (f" v{r['version']}" if r.get("version") else "")
                 + (f": {r['reason']}" if r.get("reason") else "") for r in result["results"]]
        return "; ".join(parts) or "no manifest in the event"
    return json.dumps(result, default=str)[:200]


def build_scenario(state: RunState) -> tuple[Places, Scenario]:
    """Load the places and draw the scenario (start hour, hotspot) from the seed."""
    cfg = state.config
    places = load_places(cfg.dataset)
    rng = np.random.default_rng(cfg.seed)
    scenario = Scenario(start_utc_hour=float(rng.uniform(3.0, 6.0)), shift_s=cfg.shift_s,
                        hotspot_place=choose_hotspot(places, rng))
    state.scenario, state.places_source = scenario, places.source
    state.hotspot_name = places.names[scenario.hotspot_place]
    return places, scenario


def start_aws(state: RunState) -> EmbeddedAws:
    """Start moto, point this process's handlers at it, create the resources."""
    cfg = state.config
    aws = start_moto(cfg.prefix)
    state.aws = aws
    os.environ.update(aws.environment(handler_env(cfg)))
    # The in-process partitioner balances on event counts, so the cap and the utilisation the report
    # measures share one unit; workers still write cost reports (counted in the report).
    os.environ.pop("COSTS_BUCKET", None)
    aws.create_resources(ingest_shards=2)
    say(state, f"moto server (AWS) at {aws.endpoint_url}; stream, buckets and tables created "
               f"(prefix {cfg.prefix}); cap {cfg.cap:g} events per {cfg.window_s:g}s window; policy: build to "
               f"{100 * cfg.target_fill:.0f}%, redeploy above {100 * cfg.high_watermark:.0f}%, cooldown {cfg.cooldown_s:g}s")
    return aws


def start_services(state: RunState, aws: EmbeddedAws, places: Places, scenario: Scenario) -> None:
    """Start Spark, then the observer, the S3 notifier, the router ESM, the deployer and the replay."""
    from local.deploy import DeployDriver

    cfg = state.config
    state.calls = count_this_process(CallLog())  # before any handler makes its clients
    partitioner_handler = load_handler("lambdas.partitioner.handler:handler")
    router_handler = load_handler("lambdas.router.handler:handler")
    state.spark = start_spark(state, aws)
    say(state, f"Spark streaming job started (pid {state.spark.pid}, log {state.spark.log_path})")
    wait_for_spark(state, state.spark)
    state.fleet = LocalFleet({**aws.environment(handler_env(cfg)), CALL_LOG_DIR: str(cfg.out / "calls")},
                             cfg.out / "logs", REPO_ROOT, WorkerSettings())
    fleet_now = state.fleet
    observer = state.observer = ControlObserver(
        aws, alive_pids=lambda: {p.pid for p in fleet_now.processes() if p.exited_at is None and p.child.alive()})
    state.notifier = ManifestNotifier(aws, partitioner_handler, on_invocation=on_invocation(state, aws))
    state.router = RouterPoller(aws, router_handler, gate=lambda: observer.active_version is not None)
    fleet: Any = state.fleet
    if "deployer-crash" in cfg.faults:
        from local.faults import CrashingFleet

        fleet = CrashingFleet(state.fleet)  # the deployer's view of the fleet; the report reads state.fleet
    state.deployer = DeployDriver(aws, fleet, say=lambda m: say(state, m),
                                  green_timeout_s=GREEN_TIMEOUT_S, drain_timeout_s=DRAIN_TIMEOUT_S)
    state.output = EnrichedReader(aws.client("s3"), aws.names.output_bucket)
    state.replayer = Replayer(aws.client("kinesis"), aws.names.ingest_stream, EventFactory(places, scenario, cfg.seed),
                              cfg.rate, cfg.duration_s, live=lambda: observer.active_version is not None,
                              warmup_timeout_s=WARMUP_TIMEOUT_S, align_s=cfg.window_s)
    for loop in (state.observer, state.notifier, state.router, state.deployer, state.replayer):
        loop.start()
    arm_faults(state, aws)
    say(state, f"replaying {len(places)} places of {places.source!r} at {cfg.rate:g} events/s: warm-up at "
               f"simulated {scenario.sim_time(0):%H:%M} UTC until the first spec is active, then {cfg.duration_s:g}s: "
               f"steady, day/night shift ({cfg.speed:g}x simulated time), new hotspot {state.hotspot_name!r} "
               f"ramping, steady; pace: {cfg.pace()}")


def arm_faults(state: RunState, aws: EmbeddedAws) -> None:
    """Arm the injectors of ``--faults`` (:mod:`local.faults`); :func:`poll_faults` drives them."""
    from local.faults import SparkKill, WorkerKill, leases_from_items

    cfg, fleet, deployer = state.config, state.fleet, state.deployer
    if not cfg.faults or fleet is None:
        return
    ddb = aws.client("dynamodb")

    def leases() -> list[Any]:
        items: list[dict[str, Any]] = []
        kw: dict[str, Any] = {"TableName": aws.names.leases_table, "ConsistentRead": True}
        while True:
            page = ddb.scan(**kw)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return leases_from_items(items)
            kw["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def status() -> str:
        return str(deployer.ctl.state().status)

    if "worker-kill" in cfg.faults:
        state.faults.append(WorkerKill(fleet.processes, leases, status, lease_s=WorkerSettings().lease_s,
                                       fallback_after_s=0.6 * cfg.duration_s))
    if "spark-kill" in cfg.faults:
        def restart() -> procs.Child:
            state.spark = start_spark(state, aws)
            say(state, f"Spark job restarted on its checkpoint (pid {state.spark.pid})")
            return state.spark

        # in the last steady phase, after the hotspot ramp: no snapshot comes until the restarted job wrote one (a JVM
        # start plus a window and its watermark, 78 s in a measured --quick run), and a Spark outage during a load
        # shift delays rebalancing by that much (that run, killed during the ramp, had one of 20 worker-windows at
        # 105% of the cap); recovered once the new job wrote a snapshot, the tail waits for it
        state.faults.append(SparkKill(lambda: state.spark, restart, status, delay_s=0.8 * cfg.duration_s,
                                      deadline_s=SPARK_START_TIMEOUT_S + 3 * cfg.window_s))
    if "deployer-crash" in cfg.faults:
        from lambdas.common.records import read_active
        from local.faults import DeployerCrash

        ctl = deployer.ctl

        def active() -> int | None:
            pointer = read_active(ctl.control)
            return pointer.version if pointer else None

        state.faults.append(DeployerCrash(ctl.fleet, ctl.fleet_started, active, status,
                                          deadline_s=ctl.fleet_start_grace_s + GREEN_TIMEOUT_S))
    arm_data_faults(state, aws, status)
    arm_hook_faults(state, leases)
    say(state, f"faults armed: {', '.join(cfg.faults)}")


def arm_hook_faults(state: RunState, leases: Callable[[], list[Any]]) -> None:
    """Arm ``hook-fail`` and ``hook-timeout`` (:class:`local.faults.HookFault`) on the local ECS's hook calls."""
    from lambdas.common.records import read_active
    from local.faults import WHOLE_ONLY, HookFault

    cfg, fleet, deployer = state.config, state.fleet, state.deployer
    names = [n for n in cfg.faults if n in WHOLE_ONLY]
    if not names or fleet is None or deployer is None:
        return
    ctl = deployer.ctl

    def active() -> int | None:
        pointer = read_active(ctl.control)
        return pointer.version if pointer else None

    def served(version: int) -> bool:
        """Every slot of ``version`` leased (unexpired, not drained) by a running worker process."""
        spec = state.observer.specs.get(version) if state.observer else None
        if spec is None:
            return False
        alive = {p.pid for p in fleet.processes() if p.exited_at is None and p.child.alive()}
        now = time.time()
        held = {le.key for le in leases() if le.owner and le.expires_at > now and not le.drained and le.pid() in alive}
        return all(lease_key(version, w.id) in held for w in spec.workers)

    faults = [HookFault(n, ctl.state, active, lambda: list(deployer.reconciled), served,
                        lease_s=WorkerSettings().lease_s) for n in names]
    # a swap that another deploy fault is still open on is left alone (a rollback would leave that fault's swap
    # unable to finish: deployer-crash recovers when its swap flips)
    others = [f for f in state.faults if f.record.fault in ("deployer-crash", "worker-kill")]
    state.faults.extend(faults)

    def intercept(version: int, stage: str) -> str | None:
        if any(f.record.injected_at is not None and not f.record.recovered for f in others):
            return None
        return next((f for f in (h.intercept(version, stage) for h in faults) if f is not None), None)

    deployer.hook_fault = intercept


class SnapshotBucket:
    """The snapshots bucket as :class:`local.snapshot_faults.Store` (read, write, list manifests)."""

    def __init__(self, aws: EmbeddedAws) -> None:
        self._s3, self.bucket = aws.client("s3"), aws.names.snapshots_bucket

    def get(self, key: str) -> bytes | None:
        try:
            return bytes(self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except self._s3.exceptions.NoSuchKey:
            return None

    def put(self, key: str, body: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def manifests(self) -> list[str]:
        keys = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix="snapshots/"):
            keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith("/_manifest.json")]
        return sorted(keys)


def arm_data_faults(state: RunState, aws: EmbeddedAws, status: Any) -> None:
    """Arm ``snapshot-corrupt``, ``snapshot-dup`` and ``stream-throttle`` (:mod:`local.snapshot_faults`, :mod:`local.faults`).

    Their moments, as shares of the replay after the first spec went live: corrupt snapshots at 20%, the held-back
    window at 10% (it and a later window must be judged before the replay ends and the notifier stops), the
    throttle at 30% for 15% of the replay; the kills come later (worker-kill at the next swap, spark-kill at 80%).
    """
    from local.events import s3_object_created
    from local.faults import StreamThrottle
    from local.snapshot_faults import SnapshotCorrupt, SnapshotDup
    from partitioner.contracts.stream import geo_stream_prefix

    cfg, notifier, bucket = state.config, state.notifier, SnapshotBucket(aws)
    assert notifier is not None
    judged_within = 3 * cfg.window_s + WATERMARK_S + 30.0  # a window, its watermark and trigger, the partitioner
    if "snapshot-corrupt" in cfg.faults:
        state.faults.append(SnapshotCorrupt(bucket, lambda: list(notifier.invocations), state.desired_after, status,
                                            delay_s=0.2 * cfg.duration_s, deadline_s=judged_within))
    if "snapshot-dup" in cfg.faults:
        s3 = aws.client("s3")

        def deliver(key: str) -> Any:
            head = s3.head_object(Bucket=bucket.bucket, Key=key)
            event = s3_object_created(bucket.bucket, key, int(head["ContentLength"]), str(head.get("ETag", "")))
            result = notifier.handler(event, LambdaContext("georebal-partitioner"))
            first = (result.get("results") or [{}])[0]
            say(state, f"snapshot {key.split('/')[1]}: delivered by the fault: {first.get('status')} "
                       f"({first.get('reason')})")
            return result

        state.faults.append(SnapshotDup(bucket, lambda: list(notifier.invocations), notifier.seen.add, deliver, status,
                                        window_s=cfg.window_s, delay_s=0.1 * cfg.duration_s,
                                        deadline_s=2 * judged_within))
    if "stream-throttle" in cfg.faults:
        replayer, output, router = state.replayer, state.output, state.router
        assert replayer is not None and output is not None and router is not None
        state.faults.append(StreamThrottle(
            aws.server.throttle, geo_stream_prefix(cfg.prefix), lambda: replayer.sent_ids, lambda: output.ids,
            lambda: router.failed_items, status, delay_s=0.3 * cfg.duration_s, duration_s=0.15 * cfg.duration_s,
            share=0.5, deadline_s=0.15 * cfg.duration_s + cfg.drain_timeout_s))


def poll_faults(state: RunState) -> None:
    for fault in state.faults:
        was = fault.record.injected_at
        fault.poll()
        if was is None and fault.record.injected_at is not None:
            held = f", holding {', '.join(fault.record.leases)}" if fault.record.leases else ""
            done = " killed" if fault.record.fault.endswith(("-kill", "-crash")) else ""
            say(state, f"FAULT {fault.record.fault}: {fault.record.target}{done} "
                       f"({'mid-swap' if fault.record.mid_swap else 'no swap in flight'}){held}")
        if fault.record.problems and len(fault.record.problems) > getattr(fault, "_announced", 0):
            for problem in fault.record.problems[getattr(fault, "_announced", 0):]:
                say(state, f"FAULT {fault.record.fault}: BROKEN: {problem}")
            fault._announced = len(fault.record.problems)


def fault_table(state: RunState) -> None:
    """Print the fault table, write ``faults.json``, and fail the run if a fault did not recover in time."""
    if not state.faults:
        return
    from local.faults import events_column
    from local.output import delivery
    from local.snapshot_faults import spec_order_problems

    records = [f.record for f in state.faults]
    out = state.output.records if state.output else []
    lost = delivery(state.replayer.sent_ids if state.replayer else [], out).lost
    copies = [(r.event_id, r.written_ms) for r in out]
    for r in records:
        if r.injected_at is not None:
            end = r.recovered_at or time.time()
            r.events = events_column(lost, copies, int(1000 * r.injected_at), int(1000 * end))
    if any(r.fault.startswith("snapshot-") for r in records) and state.observer is not None:
        ends = {v: str(s.source.get("window_end", "")) for v, s in state.observer.specs.items() if s is not None}
        order = spec_order_problems(ends)
        for r in records:
            if r.fault.startswith("snapshot-"):
                r.problems += order
    say(state, "fault table (seconds since the run started):")
    for r in records:
        say(state, "  " + r.row(state.started_at))
    (state.config.out / "faults.json").write_text(json.dumps([r.to_dict() for r in records], indent=2) + "\n")
    bad = [r.fault for r in records if r.injected_at is None or not r.within_deadline]
    broken = [f"{r.fault}: {p}" for r in records for p in r.problems]
    if (bad or broken) and state.failure is None:
        state.failure = "; ".join(
            ([f"fault(s) not injected or not recovered within their deadline: {', '.join(bad)}"] if bad else [])
            + broken) + " (see faults.json)"


def _fault_pending(state: RunState) -> bool:
    """True while an injected fault has not recovered and its deadline has not passed (the tail waits for it)."""
    now = time.time()
    return any(f.record.injected_at is not None and not f.record.recovered
               and now - f.record.injected_at <= f.record.deadline_s for f in state.faults)


def replay_phase(state: RunState, scenario: Scenario) -> None:
    """Watch the replay until it is done: progress, phases, flips, output."""
    assert state.replayer is not None and state.output is not None
    last_print, flips_seen, last_out_read, phase = 0.0, 0, 0.0, ""
    while not state.replayer.done:
        time.sleep(0.25)
        check_children(state)
        poll_faults(state)
        flips_seen = _announce_flips(state, flips_seen)
        if state.replayer.started_at is not None and scenario.phase(state.replayer.fraction) != phase:
            phase = scenario.phase(state.replayer.fraction)
            say(state, f"replay phase: {phase} (simulated {scenario.sim_time(state.replayer.fraction):%H:%M} UTC)")
        if time.time() - last_out_read > 5:
            state.output.refresh()
            last_out_read = time.time()
        last_print = progress(state, last_print)
    state.flips_announced = flips_seen


def tail_phase(state: RunState) -> None:
    """After the replay: stop rebalancing, wait for every event to come out and deployments to end."""
    assert state.replayer is not None and state.output is not None and state.notifier is not None
    cfg = state.config
    state.replay_ended_at = time.time()
    state.notifier.stop()  # the stream ended: no more rebalancing, let in-flight deployments finish
    say(state, f"replay done: {len(state.replayer.sent_ids)} valid events and "
               f"{sum(state.replayer.bad_sent.values())} bad ones sent; snapshot notifications stopped; "
               f"waiting for every event to come out and deployments to finish (gives up after "
               f"{cfg.drain_timeout_s:g}s without new output, or {TAIL_HARD_LIMIT_FACTOR * cfg.drain_timeout_s:g}s)")
    last_print, flips_seen = 0.0, state.flips_announced
    sent = set(state.replayer.sent_ids)
    hard_deadline = time.time() + TAIL_HARD_LIMIT_FACTOR * cfg.drain_timeout_s
    last_progress, seen_out = time.time(), len(state.output.ids)
    while time.time() < hard_deadline and (time.time() - last_progress < cfg.drain_timeout_s or _fault_pending(state)):
        time.sleep(1.0)
        check_children(state)
        poll_faults(state)
        flips_seen = _announce_flips(state, flips_seen)
        state.output.refresh()
        if len(state.output.ids) > seen_out:  # still draining: a slow machine gets more time, a stall does not
            last_progress, seen_out = time.time(), len(state.output.ids)
        last_print = progress(state, last_print)
        if sent <= state.output.ids and state.deployer.idle() and all(f.record.recovered for f in state.faults
                                                                         if f.record.injected_at is not None):
            break
    state.output.refresh()
    state.drained_cleanly = sent <= state.output.ids
    in_flight = "" if state.deployer.idle() else f"; deployment still in flight at shutdown: {state.deployer.describe()}"
    say(state, ("all events out" if state.drained_cleanly else
                f"tail timeout: {len(sent - state.output.ids)} events not out yet") + in_flight)


def run_loop(state: RunState) -> None:
    """Start everything, replay, wait for the tail (the teardown is :func:`teardown`)."""
    places, scenario = build_scenario(state)
    aws = start_aws(state)
    start_services(state, aws, places, scenario)
    replay_phase(state, scenario)
    tail_phase(state)
    fault_table(state)


def _announce_flips(state: RunState, seen: int) -> int:
    assert state.observer is not None
    flips = state.observer.flips
    for old, new, _at in flips[seen:]:
        say(state, f"FLIP active spec v{old if old is not None else '-'} -> v{new}")
    return len(flips)


def stop_loops_and_fleet(state: RunState) -> None:
    """Stop the loops, then every worker process: each writes its last cost report on the way out."""
    for loop in (state.replayer, state.router, state.notifier, state.deployer, state.observer):
        if isinstance(loop, LoopThread):
            loop.stop()
    for loop in (state.replayer, state.router, state.notifier, state.deployer, state.observer):
        if isinstance(loop, LoopThread) and loop.is_alive():
            loop.join(timeout=15)
    if state.fleet is not None:
        state.fleet.stop_all()


def teardown(state: RunState) -> None:
    """Stop everything that was started, in reverse order, whatever happened."""
    stop_loops_and_fleet(state)
    if state.spark is not None:
        procs.stop(state.spark, grace_s=10.0)
    if state.aws is not None:
        stop_moto(state.aws)
    shutil.rmtree(state.workdir, ignore_errors=True)


def prepare_out(out: Path) -> None:
    """Create the output folder and clear what a previous run left (specs, figures, logs, reports)."""
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("specs", "logs", "calls"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for old in [*out.glob("*.png"), out / "report.txt", out / "report.json"]:
        old.unlink(missing_ok=True)


def execute(cfg: RunConfig) -> int:
    """Run the loop, write the report, and return the exit code (see the module docstring)."""
    from local import report

    state = RunState(config=cfg, started_at=time.time())
    missing = missing_components()
    if missing:
        print("cannot run the local loop: these components are missing:", file=sys.stderr)
        for module, what in missing.items():
            print(f"  - {module}: {what}", file=sys.stderr)
        return 3
    prepare_out(cfg.out)
    old_handlers = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_loop(state)
    except Interrupted as exc:
        state.interrupted = str(exc)
        print(f"\ninterrupted ({exc}): shutting down", flush=True)
    except Exception as exc:
        state.failure = f"{type(exc).__name__}: {exc}"
        print(f"\nthe run failed: {state.failure}", file=sys.stderr, flush=True)
    finally:
        with contextlib.suppress(Interrupted):
            # the workers' last cost reports (the interval since their previous one) are written as they stop,
            # so the report reads S3 after the fleet stopped and before moto goes away
            stop_loops_and_fleet(state)
            _collect_before_teardown(state)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        teardown(state)
        for s, h in old_handlers.items():
            signal.signal(s, h)
    state.finished_at = time.time()
    return report.finish(state)


def _collect_before_teardown(state: RunState) -> None:
    """Read what only the live moto server has (output, quarantine, costs) into the state."""
    from local import report

    if state.aws is not None and state.output is not None:
        try:
            state.output.refresh()
            report.collect_live(state)
        except Exception as exc:  # the report says what could not be read
            state.events_log.append(f"collecting results failed: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m local.run``."""
    try:
        cfg = parse_args(argv)
        load_places(cfg.dataset, limit=2)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return execute(cfg)


if __name__ == "__main__":
    sys.exit(main())
