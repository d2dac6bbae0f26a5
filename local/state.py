"""What one local run started and saw: :class:`RunState`, filled while the loop runs and read by the report.

Every part of the loop (:mod:`local.start`, :mod:`local.phases`, :mod:`local.faults`) writes into the state and
:func:`say` keeps the notable events for the report's timeline; :mod:`local.report` reads the state after the loop
stopped. The state imports only the components it holds, never the modules that fill or read it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geokernel.aws_budget.calls import CallLog
from local import procs
from local.aws import EmbeddedAws
from local.config import RunConfig
from local.dataset import Scenario, SurgeCrowd
from local.event_source import EventSourceMapping
from local.fleet import LocalFleet
from local.loops import Invocation, ObjectCreatedNotifier
from local.observe import ControlObserver
from local.output import EnrichedReader
from local.recorded import RecordedLog, ReplayPlan
from local.rejected import KeptSnapshot
from local.replay import RecordedReplayer, RecordedTimeline, Replayer
from local.twin import Twin


@dataclass
class RunState:
    """Everything the report needs after the loop stopped."""

    config: RunConfig
    started_at: float
    aws: EmbeddedAws | None = None
    #: the stack's wiring and the parts' principals (local.twin); its IAM gate is in front of moto
    twin: Twin | None = None
    replayer: Replayer | RecordedReplayer | None = None
    notifier: ObjectCreatedNotifier | None = None
    #: the fast path's notification: the routers' surge signals -> the partitioner (lambdas.partitioner.surge)
    surge_notifier: ObjectCreatedNotifier | None = None
    #: --surge: the undeclared crowd the replay sends (local.dataset.SurgeCrowd)
    crowd: SurgeCrowd | None = None
    #: every surge signal the partitioner processed, with its outcome
    surge_invocations: list[Invocation] = field(default_factory=list)
    router: EventSourceMapping | None = None
    observer: ControlObserver | None = None
    #: reads the geofence events the loop's bus sends to its log group (local.report.eventbridge), when the workers push
    geofence: Any = None
    #: the AWS calls of the handlers run in this process (the workers write theirs to <out>/calls/)
    calls: CallLog | None = None
    deployer: Any = None
    fleet: LocalFleet | None = None
    spark: procs.Child | None = None
    output: EnrichedReader | None = None
    scenario: Scenario | RecordedTimeline | None = None
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
    live: dict[str, Any] = field(default_factory=dict)  # read from moto before it stops (local.report.collect)
    desired_after: dict[str, int | None] = field(default_factory=dict)  # manifest key -> desired version
    faults: list[Any] = field(default_factory=list)  # local.faults injectors (--faults)
    #: asked every tail tick; True while one wants the tail to go on (local.faults.hooks.SwapForHooks.waiting)
    tail_waits: list[Callable[[], bool]] = field(default_factory=list)
    recorded: tuple[RecordedLog, ReplayPlan] | None = None  # --events: the log and its schedule (local.recorded)
    #: snapshots whose build the partitioner rejected, kept for the CLI in <out>/rejected/ (local.rejected)
    rejected: list[KeptSnapshot] = field(default_factory=list)


def say(state: RunState, message: str) -> None:
    """Print a notable event on its own line (and keep it for the report)."""
    line = f"[{time.time() - state.started_at:6.1f}s] {message}"
    state.events_log.append(line)
    print(("\r\x1b[2K" if sys.stdout.isatty() else "") + line, flush=True)
