"""Child processes of the local loop (Spark job, geo workers): start, watch, stop.

Every child runs in its own session (process group) so :func:`stop` can end it and
its own children (Spark's JVM) by group id, and on Linux it gets ``PR_SET_PDEATHSIG``
so it dies with the runner even if the runner is killed with SIGKILL. Output goes to a
log file under the run's ``logs/`` folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_LIBC = None
if sys.platform.startswith("linux"):  # loaded once in the parent: the child only calls prctl
    with contextlib.suppress(OSError):
        _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    """``preexec_fn``: ask Linux to SIGTERM this child when the runner exits."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class Child:
    """A started child process and where its output goes."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    started_at: float

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        """Return True while the process has not exited."""
        return self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        """Return the last ``lines`` lines of the child's log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start(name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path, cwd: Path) -> Child:
    """Start ``argv`` as a child in its own process group, output appended to ``log_dir/name.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
    return Child(name=name, popen=popen, log_path=log_path, started_at=time.time())


def terminate(child: Child) -> None:
    """Send SIGTERM to the child itself (not its group); :func:`stop` then waits and escalates."""
    if child.alive():
        with contextlib.suppress(ProcessLookupError):
            child.popen.send_signal(signal.SIGTERM)


def stop(child: Child, grace_s: float = 10.0) -> int | None:
    """Stop a child: SIGTERM to the child itself (so it can shut down its own children, e.g.
    Spark stops its queries and JVM), then SIGKILL to its whole process group after ``grace_s``.

    Returns
    -------
    int or None
        The exit code (None if it could not be reaped).
    """
    if child.alive():
        with contextlib.suppress(ProcessLookupError):
            child.popen.send_signal(signal.SIGTERM)
        try:
            return child.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(child.pid, signal.SIGKILL)  # also reaps stragglers of the group (the JVM)
    try:
        return child.popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # the child is its group's leader (start_new_session)
