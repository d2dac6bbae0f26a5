"""``spark-kill``: ``kill -9`` of the Spark aggregation job, and its restart on the same checkpoint.

The kill hits the job's process group (driver and JVM) once a spec is live and ``delay_s`` have passed; the loop
restarts it on the same checkpoint (as EMR Serverless' job retry policy or Glue's job restart would). *Detected*
when the loop saw the process gone, *recovered* when the restarted job wrote a snapshot again (its log says
``snapshot``). A window in flight at the kill is recomputed from the checkpointed offsets; a snapshot rewritten with
the same content is skipped (``glue_jobs.snapshot``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from local.faults.record import IN_SWAP, FaultRecord, LiveDelay, LiveSince


class SparkKill:
    """Inject and follow one ``spark-kill`` fault: ``child()`` is the running job, ``restart()`` starts a new one."""

    def __init__(self, child: Callable[[], Any], restart: Callable[[], Any], deploy_status: Callable[[], str],
                 live_since: LiveSince, *, delay_s: float, deadline_s: float,
                 kill: Callable[[int], None] = lambda pid: os.killpg(os.getpgid(pid), signal.SIGKILL),
                 clock: Callable[[], float] = time.time) -> None:
        self.child = child
        self.restart = restart
        self.deploy_status = deploy_status
        self.kill = kill
        self.clock = clock
        self._delay = LiveDelay(live_since, delay_s)
        self.record = FaultRecord("spark-kill", deadline_s=deadline_s)
        self._restarted: Any = None
        self._log_offset = 0

    def owns_exit(self) -> bool:
        """True while the job's exit is this fault's (the loop must restart it, not fail)."""
        return self.record.injected_at is not None and self._restarted is None

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            if not self._delay.due(now):
                return
            child = self.child()
            self.record.target = f"Spark job pid {child.pid} (driver and JVM, kill -9 of the process group)"
            self.record.mid_swap = self.deploy_status() in IN_SWAP
            self.kill(child.pid)
            self.record.injected_at = now
        elif self._restarted is None:
            old = self.child()
            if not old.alive():
                self.record.detected_at = now
                try:
                    self._log_offset = old.log_path.stat().st_size  # the new job appends to the same log
                except OSError:
                    self._log_offset = 0
                self._restarted = self.restart()
                self.record.took_over_by["job"] = f"restarted as pid {self._restarted.pid} on the same checkpoint"
        elif self.record.recovered_at is None and "snapshot s3://" in self._restarted_log():
            self.record.recovered_at = now

    def _restarted_log(self) -> str:
        try:
            with self._restarted.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return str(f.read().decode(errors="replace"))
        except OSError:
            return ""
