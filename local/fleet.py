"""LocalFleet: the deploy controller's fleet adapter with real worker processes.

It does locally what the ECS service does in AWS (``lambdas.deploy.fleet.EcsFleet``), one
``python -m geo_service`` process per worker, each pinned to one slot id (``WORKER_ID``), with the
version it was started for (``SPEC_VERSION``), the swap mode (``SWAP_MODE``), the worker environment of
CONTRACTS ("Worker lifecycle"), its own health port and log file (``<out>/logs/worker-v<version>-<slot>.log``):

* ``carry`` plans: :meth:`LocalFleet.start` starts processes for the plan's new slots only (a kept slot's
  process claims the new version's lease itself and keeps serving), :meth:`LocalFleet.stop` stops the
  removed slots' processes once the old version drained (they have exited by then: a pinned worker exits
  when nothing is left for its slot), :meth:`LocalFleet.abort` stops what :meth:`start` started.
* ``whole`` plans: a process per slot of the new version; ``stop`` stops every process of the old one.

Like the ECS service scheduler, which replaces a task that stops while the service still counts it,
:meth:`LocalFleet.poll` restarts a process that died (killed, or exit code other than 0) for the same slot;
the new process takes the slot over once its lease expires. A clean exit (0: drained, released, nothing
left) is not replaced. :attr:`LocalFleet.history` records every start, stop, exit and restart with the
process id, for the report's swap section.

Notes
-----
Processes are started from the thread that drives the deploy controller; they get
``PR_SET_PDEATHSIG`` (see :mod:`local.procs`), which Linux ties to that *thread*, so the
controller thread must live until :meth:`LocalFleet.stop_all`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from geokernel.contracts.env import EnvVar
from geokernel.contracts.plan import SwapMode
from lambdas.deploy.plan import DeployPlan
from local import procs
from local.aws import free_port
from local.calls import CALL_LOG_DIR

#: A slot's process is restarted at most this many times within RESTART_WINDOW_S (a worker that cannot start,
#: e.g. a bad setting, is not restarted in a loop: ECS throttles restarts the same way).
MAX_RESTARTS = 3
RESTART_WINDOW_S = 120.0


@dataclass(frozen=True)
class WorkerSettings:
    """Timing knobs every local worker gets (seconds)."""

    lease_s: float = 9.0
    drain_quiet_s: float = 4.0
    cost_report_interval_s: float = 10.0
    #: moto stamps a record's arrival on the same clock the workers read and makes it readable at once.
    handover_margin_s: float = 0.25
    #: A slot's output buffer is written this often (AWS default 10 s against 300 s windows; the local loop's
    #: windows are 15 s, so its flush is scaled down with them).
    output_flush_s: float = 0.5


@dataclass(frozen=True)
class FleetEvent:
    """One entry of :attr:`LocalFleet.history`: ``kind`` is ``start``, ``restart``, ``stop`` or ``exit``."""

    at: float
    kind: str
    version: int
    worker: str
    pid: int
    code: int | None = None


@dataclass
class WorkerProcess:
    """One worker process: the slot it is pinned to, the version it was started for, health port, child."""

    version: int
    worker_id: str
    mode: SwapMode
    health_port: int
    child: procs.Child
    exited_at: float | None = None
    exit_code: int | None = None
    restarts: list[float] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.child.pid


class LocalFleet:
    """Starts, stops and supervises ``python -m geo_service`` processes; see the module docstring."""

    def __init__(self, base_env: Mapping[str, str], log_dir: Path, repo_root: Path,
                 settings: WorkerSettings = WorkerSettings()) -> None:
        self.base_env = dict(base_env)
        self.log_dir = log_dir
        self.repo_root = repo_root
        self.settings = settings
        self._lock = threading.Lock()
        self._procs: list[WorkerProcess] = []
        self._stopping = False
        self.history: list[FleetEvent] = []
        #: ``whole`` mode: the SPEC_VERSION the ECS service's current revision carries (None before the first
        #: whole deployment), and every ECS deployment started (start or reconcile), in order, for the driver's hooks.
        self.service_version: int | None = None
        self.ecs_deployments: list[int] = []
        self._before: dict[int, int | None] = {}  # deployed version -> the service's revision before it

    # ------------------------------------------------------------------ the controller's Fleet interface
    def start(self, plan: DeployPlan) -> list[WorkerProcess]:
        """Start a process per slot the plan starts (every slot of the new version in ``whole`` mode)."""
        if not plan.started and plan.mode is SwapMode.WHOLE:
            raise ValueError(f"spec v{plan.to_version} has no worker slots to start")
        started = [self._spawn(plan.to_version, wid, plan.mode) for wid in plan.started]
        if plan.mode is SwapMode.WHOLE:  # an ECS blue/green deployment of a revision carrying SPEC_VERSION
            self._deployed(plan.to_version)
        return started

    def advance(self, plan: DeployPlan) -> bool:
        """Every process of the plan started in :meth:`start`: nothing more to launch."""
        return True

    def _deployed(self, version: int) -> None:
        self._before[version] = self.service_version
        self.service_version = version
        self.ecs_deployments.append(version)

    def stop(self, plan: DeployPlan, grace_s: float = 10.0) -> None:
        """Stop the processes of the slots the plan stops (the old version drained)."""
        old = plan.from_version or 0
        if plan.mode is SwapMode.WHOLE:
            self._terminate([p for p in self._live() if p.version == old], grace_s)
        else:
            gone = set(plan.stopped)
            self._terminate([p for p in self._live() if p.worker_id in gone and p.version <= old], grace_s)

    def abort(self, plan: DeployPlan, grace_s: float = 10.0) -> None:
        """Stop the processes :meth:`start` started for the plan (rollback before the flip)."""
        started = set(plan.started)
        self._terminate([p for p in self._live() if p.version == plan.to_version and p.worker_id in started], grace_s)

    # ------------------------------------------------------------------ ECS's rollback and the deployer's reconcile
    def ecs_rollback(self, version: int, grace_s: float = 10.0) -> list[WorkerProcess]:
        """Play ECS rolling the deployment of ``version`` back ("to the last successful service revision",
        https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html): the service runs
        the revision it ran before that deployment again and the tasks of ``version`` are stopped (SIGTERM: they
        release their leases); the previous revision's tasks keep running. Return the processes stopped."""
        doomed = [p for p in self._live() if p.version == version]
        self.service_version = self._before.get(version)
        self._terminate(doomed, grace_s)
        return doomed

    def rolled_back(self, version: int) -> bool:
        """True when the service runs another version's revision than ``version`` (see :meth:`ecs_rollback`)."""
        return self.service_version != version

    def serves(self, version: int) -> bool:
        """True when the service runs ``version``'s revision (the local ECS driver holds the deployer back while a
        deployment's hooks run)."""
        return self.service_version == version

    def target_version(self) -> int | None:
        """The SPEC_VERSION the service's revision carries (the one being deployed during a deployment)."""
        return self.service_version

    def reconcile(self, version: int, worker_ids: Sequence[str]) -> bool:
        """Deploy ``version`` again if the service runs another revision: a process per slot of ``worker_ids``
        with none of ``version`` running; True if it did."""
        if self.service_version == version:
            return False
        running = {p.worker_id for p in self._live() if p.version == version}
        for wid in worker_ids:
            if wid not in running:
                self._spawn(version, wid, SwapMode.WHOLE)
        self._deployed(version)
        return True

    # ------------------------------------------------------------------ supervision
    def poll(self) -> None:
        """Record exits; restart a process that died while it may still hold a slot (see the module docstring)."""
        now = time.time()
        for p in self._live():
            code = p.child.popen.poll()
            if code is None:
                continue
            p.exited_at, p.exit_code = now, code
            self.history.append(FleetEvent(now, "exit", p.version, p.worker_id, p.pid, code))
            recent = [t for t in p.restarts if now - t < RESTART_WINDOW_S]
            if code != 0 and not self._stopping and len(recent) < MAX_RESTARTS:
                fresh = self._spawn(p.version, p.worker_id, p.mode, kind="restart")
                fresh.restarts = [*recent, now]

    def _spawn(self, version: int, wid: str, mode: SwapMode, kind: str = "start") -> WorkerProcess:
        if version < 1:
            raise ValueError(f"spec version must be >= 1, got {version!r}")
        port = free_port()
        env = {**self.base_env, EnvVar.SPEC_VERSION: str(version), EnvVar.WORKER_ID: wid, EnvVar.HEALTH_PORT: str(port),
               EnvVar.SWAP_MODE: mode.value, EnvVar.LEASE_S: str(self.settings.lease_s),
               EnvVar.DRAIN_QUIET_S: str(self.settings.drain_quiet_s),
               EnvVar.HANDOVER_MARGIN_S: str(self.settings.handover_margin_s),
               EnvVar.OUTPUT_FLUSH_S: str(self.settings.output_flush_s),
               EnvVar.COST_REPORT_INTERVAL_S: str(self.settings.cost_report_interval_s), "PYTHONUNBUFFERED": "1"}
        # with GEO_CALL_LOG_DIR set, the worker runs under local.calls, which counts its AWS calls
        argv = [sys.executable, "-m", *(("local.calls",) if CALL_LOG_DIR in env else ()), "geo_service"]
        child = procs.start(f"worker-v{version}-{wid}", argv, env, self.log_dir, self.repo_root)
        proc = WorkerProcess(version, wid, mode, port, child)
        with self._lock:
            self._procs.append(proc)
        self.history.append(FleetEvent(child.started_at, kind, version, wid, child.pid))
        return proc

    def _terminate(self, workers: Iterable[WorkerProcess], grace_s: float) -> None:
        workers = list(workers)
        for w in workers:  # ask all first, then wait: they release their leases in parallel
            procs.terminate(w.child)
        for w in workers:
            code = procs.stop(w.child, grace_s)
            if w.exited_at is None:
                w.exited_at, w.exit_code = time.time(), code
                self.history.append(FleetEvent(w.exited_at, "stop", w.version, w.worker_id, w.pid, code))

    def _live(self) -> list[WorkerProcess]:
        with self._lock:
            return [p for p in self._procs if p.exited_at is None]

    # ------------------------------------------------------------------ views
    def versions(self) -> list[int]:
        """Versions that running processes were started for."""
        return sorted({p.version for p in self._live()})

    def alive(self, version: int | None = None) -> int:
        """Number of live worker processes (started for one version, or all)."""
        return sum(1 for p in self._live() if (version is None or p.version == version) and p.child.alive())

    def processes(self, version: int | None = None) -> list[WorkerProcess]:
        """Every process started (for one version, or all), running or not."""
        with self._lock:
            return [p for p in self._procs if version is None or p.version == version]

    def stop_all(self) -> None:
        """Stop every worker process (shutdown path: nothing is restarted from now on)."""
        self._stopping = True
        self._terminate(self._live(), grace_s=5.0)
