"""The local AWS in a process of its own: the loop's moto server, run as ``python -m local.moto_process``.

AWS is not in the caller's process, and the local stand-in should not be either: run in a thread of the loop's
process (:class:`local.aws.SerialMotoServer`), every request of every worker waits for that process's interpreter
lock, which the router, the partitioner and deploy handlers, the replay and the output reader hold most of the time
on a busy machine. :class:`MotoProcess` starts the same server in a child process and waits until it answers;
the ``stream-throttle`` fault reaches the child's :class:`~local.aws.KinesisThrottle` over HTTP
(:data:`THROTTLE_PATH`, :class:`RemoteThrottle`).

The child exits when its stdin closes (the parent died or called :meth:`MotoProcess.stop`), so it never outlives
the run.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

from local.aws import THROTTLE_PATH, SerialMotoServer

REPO = Path(__file__).resolve().parent.parent  # where ``-m local.moto_process`` is found
#: Seconds the parent waits for the child's first line (its URL): imports of moto take several on a loaded machine.
START_TIMEOUT_S = 120.0


class RemoteThrottle:
    """The child's :class:`~local.aws.KinesisThrottle` seen from the parent (:class:`local.faults.stream_throttle.Throttle`)."""

    def __init__(self, url: str) -> None:
        self._url = url + THROTTLE_PATH

    def _call(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self._url, data=data, method="GET" if data is None else "POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            out: dict[str, Any] = json.loads(resp.read())
            return out

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0) -> None:
        self._call({"stream_prefix": stream_prefix, "share": share, "duration_s": duration_s, "seed": seed})

    @property
    def until(self) -> float:
        return float(self._call()["until"])

    @property
    def refused(self) -> int:
        return int(self._call()["refused"])

    @property
    def passed(self) -> int:
        return int(self._call()["passed"])

    @property
    def first_refused_at(self) -> float | None:
        at = self._call()["first_refused_at"]
        return None if at is None else float(at)


class MotoProcess:
    """A :class:`~local.aws.SerialMotoServer` in a child process; :attr:`url` is its endpoint."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "local.moto_process"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, cwd=REPO)
        self.url = _first_line(self._proc, START_TIMEOUT_S)
        self.throttle = RemoteThrottle(self.url)

    @property
    def returncode(self) -> int | None:
        """The child's exit code once it ended (None while it runs)."""
        return self._proc.poll()

    def stop(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The URL the child prints once it serves; RuntimeError if it exits or stays silent for ``timeout_s``."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = got[0].strip() if got else ""
    if not line.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"the local AWS (python -m local.moto_process) did not start within {timeout_s:g} s "
                           f"(exit code {proc.poll()!r}, said {line!r})")
    return line


def main() -> int:
    """Serve until stdin closes; print the URL first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the loop stops this one
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access line per request
    server = SerialMotoServer().start()
    print(server.url, flush=True)
    sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
