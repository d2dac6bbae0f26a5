"""LocalFleet: the deploy controller's fleet adapter with real worker processes.

In AWS the deployer starts a new ECS service revision (one Fargate task per worker slot
of the spec) and stops blue's tasks after it drained. Locally :class:`LocalFleet` does the
same with ``python -m geo_service`` processes, one per worker slot of the spec version,
each with the worker environment of CONTRACTS ("Worker lifecycle") and its own health
port and log file (``<out>/logs/worker-v<version>-<worker>.log``).

Notes
-----
Processes are started from the thread that drives the deploy controller; they get
``PR_SET_PDEATHSIG`` (see :mod:`local.procs`), which Linux ties to that *thread*, so the
controller thread must live until :meth:`LocalFleet.stop_all`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from local import procs
from local.aws import free_port


@dataclass(frozen=True)
class WorkerSettings:
    """Timing knobs every local worker gets (seconds)."""

    lease_s: float = 9.0
    drain_quiet_s: float = 4.0
    cost_report_interval_s: float = 10.0


@dataclass(frozen=True)
class WorkerProcess:
    """One worker process: which version and slot, its health port, the child handle."""

    version: int
    worker_id: str
    health_port: int
    child: procs.Child


class LocalFleet:
    """Starts and stops one ``python -m geo_service`` process per worker slot of a version."""

    def __init__(self, base_env: Mapping[str, str], log_dir: Path, repo_root: Path,
                 settings: WorkerSettings = WorkerSettings()) -> None:
        self.base_env = dict(base_env)
        self.log_dir = log_dir
        self.repo_root = repo_root
        self.settings = settings
        self._lock = threading.Lock()
        self._workers: dict[int, list[WorkerProcess]] = {}
        self.history: list[tuple[float, str, int, str]] = []  # (time, "start"|"stop"|"exit", version, worker)

    def start(self, version: int, worker_ids: Sequence[str]) -> list[WorkerProcess]:
        """Start one worker process per ``worker_ids`` slot of spec ``version``."""
        if version < 1:
            raise ValueError(f"spec version must be >= 1, got {version!r}")
        if not worker_ids:
            raise ValueError(f"spec v{version} has no worker slots to start")
        started = []
        for wid in worker_ids:
            port = free_port()
            env = {**self.base_env, "SPEC_VERSION": str(version), "WORKER_ID": wid, "HEALTH_PORT": str(port),
                   "LEASE_S": str(self.settings.lease_s), "DRAIN_QUIET_S": str(self.settings.drain_quiet_s),
                   "COST_REPORT_INTERVAL_S": str(self.settings.cost_report_interval_s),
                   "PYTHONUNBUFFERED": "1"}
            child = procs.start(f"worker-v{version}-{wid}", [sys.executable, "-m", "geo_service"], env,
                                self.log_dir, self.repo_root)
            proc = WorkerProcess(version, wid, port, child)
            started.append(proc)
            self.history.append((child.started_at, "start", version, wid))
        with self._lock:
            self._workers.setdefault(version, []).extend(started)
        return started

    def stop(self, version: int, grace_s: float = 10.0) -> None:
        """Stop every process of ``version`` (SIGTERM, then SIGKILL after ``grace_s``)."""
        import time

        with self._lock:
            workers = self._workers.pop(version, [])
        for w in workers:  # ask all first, then wait: they release their leases in parallel
            procs.terminate(w.child)
        for w in workers:
            procs.stop(w.child, grace_s)
            self.history.append((time.time(), "stop", version, w.worker_id))

    def versions(self) -> list[int]:
        """Versions with processes started and not stopped."""
        with self._lock:
            return sorted(self._workers)

    def alive(self, version: int | None = None) -> int:
        """Number of live worker processes (of one version, or all)."""
        with self._lock:
            groups = [self._workers.get(version, [])] if version is not None else list(self._workers.values())
        return sum(1 for g in groups for w in g if w.child.alive())

    def processes(self, version: int) -> list[WorkerProcess]:
        with self._lock:
            return list(self._workers.get(version, []))

    def stop_all(self) -> None:
        """Stop every worker process (shutdown path)."""
        for v in self.versions():
            self.stop(v, grace_s=5.0)
