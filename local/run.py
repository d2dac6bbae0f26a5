"""``python -m local.run``: the whole Geo Rebalancer loop on this machine, with a report.

What runs (all real, nothing mocked that a local component can do)::

    Replayer ──PutRecords──► ingest stream (moto Kinesis)
                              │                        │
     Spark streaming job ◄────┘ (subprocess,           └──► EventSourceMapping ─► lambdas.router.handler
     python -m glue_jobs.quadkey_counts                     (the stack's ESM, └─► geo stream v<N>
                                                               2 environments)         │
       └─► snapshots/…/_manifest.json (moto S3)                                        │
     ObjectCreatedNotifier ─► lambdas.partitioner.handler (S3 event) ─► spec v<N>, desired │
     DeployDriver ─► lambdas.deploy controller + hooks ─► LocalFleet: python -m geo_service ◄┘
     ControlObserver: control + leases tables ─► flips, green ready, drained, lease safety

The event source mapping, the S3 notifications and each part's IAM role come from the stack synthesized with the
run's settings (:mod:`local.twin`): every part signs its calls as its role, an IAM gate and moto's access control
refuse what the role does not allow, and a refusal fails the run.

At the end :mod:`local.report` prints and writes the report; the exit code is 0 when every
invariant holds, 1 when one breaks (the report says which), 2 on bad arguments, 3 when a
component of the loop is missing or failed to start.

The parts: :mod:`local.start` brings the components up, :mod:`local.phases` watches the replay and the
tail, :mod:`local.faults` injects and follows ``--faults``, and this module stops everything whatever
happened and turns the outcome into the exit code.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType

from local import procs
from local.aws import stop_moto
from local.config import RunConfig, parse_args
from local.dataset import load_places
from local.faults.follow import fault_table
from local.loops import LoopThread
from local.phases import replay_phase, tail_phase
from local.recorded import RecordedLog, ReplayPlan, builtin_log, builtin_path, plan_replay, read_recorded
from local.rejected import REJECTED_DIR
from local.report.collect import collect_live
from local.report.finish import finish
from local.report.product import KEPT_DIR
from local.start import build_scenario, start_aws, start_recorded_services, start_services
from local.state import RunState
from partitioner.load.eventcols import EventColumns, column_names

#: Modules the loop cannot run without, and what each is for.
REQUIRED_MODULES = {
    "glue_jobs.quadkey_counts": "the Spark aggregation job (streaming local mode)",
    "lambdas.partitioner.handler": "the partitioner Lambda handler",
    "lambdas.router.handler": "the router Lambda handler",
    "lambdas.deploy.controller": "the deploy controller (blue/green orchestration)",
    "lambdas.deploy.hooks": "the blue/green lifecycle hook logic",
    "geo_service.__main__": "the geo worker process (python -m geo_service)",
    "partitioner.output.metrics": "spec evaluation (mismatch, utilisation) for the report",
}


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived: shut down cleanly and exit non-zero.

    A :class:`BaseException`, as :class:`KeyboardInterrupt` is: the handler raises it wherever the main thread
    is, often inside a boto3 call, and botocore catches ``Exception`` around a request and retries it
    (``Endpoint._do_get_response``), which swallowed a SIGTERM as a failed request and kept the run going.
    """


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


def run_loop(state: RunState) -> None:
    """Start everything, replay, wait for the tail (the teardown is :func:`teardown`)."""
    if state.recorded is not None:
        aws = start_aws(state)
        start_recorded_services(state, aws, *state.recorded)
        assert state.scenario is not None
        replay_phase(state, state.scenario)
        tail_phase(state)
        fault_table(state)
        return
    places, scenario = build_scenario(state)
    aws = start_aws(state)
    start_services(state, aws, places, scenario)
    replay_phase(state, scenario)
    tail_phase(state)
    fault_table(state)


def stop_loops_and_fleet(state: RunState) -> None:
    """Stop the loops, then every worker process: each writes its last cost report on the way out."""
    loops = (state.replayer, state.router, state.notifier, state.surge_notifier, state.deployer, state.observer)
    for loop in loops:
        if isinstance(loop, LoopThread):
            loop.stop()
    for loop in loops:
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
    """Create the output folder and clear what a previous run left (specs, figures, logs, kept snapshots and buckets,
    reports)."""
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("specs", "logs", "calls", REJECTED_DIR, KEPT_DIR):
        shutil.rmtree(out / sub, ignore_errors=True)
    for old in [*out.glob("*.png"), out / "report.txt", out / "report.json"]:
        old.unlink(missing_ok=True)


def execute(cfg: RunConfig, recorded: tuple[RecordedLog, ReplayPlan] | None = None) -> int:
    """Run the loop, write the report, and return the exit code (see the module docstring).

    ``recorded`` is the log of ``--events`` and its schedule (:func:`load_recorded`), None for the built-in replay.
    """
    state = RunState(config=cfg, started_at=time.time(), recorded=recorded)
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
    return finish(state)


def _collect_before_teardown(state: RunState) -> None:
    """Read what only the live moto server has (output, quarantine, costs) into the state."""
    if state.aws is not None and state.output is not None:
        try:
            state.output.refresh()
            collect_live(state)
        except Exception as exc:  # the report says what could not be read
            state.events_log.append(f"collecting results failed: {type(exc).__name__}: {exc}")


def load_recorded(cfg: RunConfig) -> tuple[RunConfig, tuple[RecordedLog, ReplayPlan]]:
    """Read the log of ``--events`` and plan its replay; return the config with the plan's speed, duration and rate.

    Raises
    ------
    ValueError
        The log cannot be read, lacks a mapped column, has no valid event, or names an unknown built-in
        (:class:`~geokernel.errors.EventLogError` or :class:`~local.recorded.RecordedLogError`).
    """
    ev = cfg.events
    assert ev is not None
    builtin = builtin_log(ev.path)
    preset = builtin.columns if builtin is not None else EventColumns()
    columns = EventColumns(ev.lat or preset.lat, ev.lon or preset.lon, ev.time or preset.time,
                           ev.entity or preset.entity, ev.entity is not None or preset.entity_given,
                           column_names(ev.columns or "") or preset.names)
    unit = ev.time_unit or (builtin.time_unit if builtin is not None else "auto")
    path = builtin_path(builtin) if builtin is not None else Path(ev.path)
    log = read_recorded(path, columns, ev.event_id, unit)
    plan = plan_replay(log, ev.speed, ev.max_duration_s, cfg.duration_s, cfg.window_s)
    return replace(cfg, speed=plan.speed, duration_s=plan.duration_s, rate=plan.rate), (log, plan)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m local.run``."""
    recorded = None
    try:
        cfg = parse_args(argv)
        if cfg.events is None:
            load_places(cfg.dataset, limit=2)
        else:
            cfg, recorded = load_recorded(cfg)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return execute(cfg, recorded)


if __name__ == "__main__":
    sys.exit(main())
