"""Every AWS call of the local loop, counted per API and second, and held against AWS's quotas in the report.

The loop's own parts in this process (the router, partitioner and deployer handlers) make their clients from boto3's
default session: :func:`count_this_process` hooks it (:func:`geokernel.aws_budget.calls.watch`). The harness's
clients (the observer, the replayer, the report) come from a session of their own (:func:`harness_session`), so they
are not counted. Each worker process runs as ``python -m local.calls geo_service``: the same hook in the child, its
log written to ``<out>/calls/<pid>.json`` every :data:`DUMP_EVERY_S` and at exit (a killed worker loses at most
that much). :func:`section` merges them all into the report's budget table.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
import threading
from pathlib import Path

import boto3

from geokernel.aws_budget.calls import CallLog, watch
from geokernel.aws_budget.report import budget, failures, render

CALL_LOG_DIR = "GEO_CALL_LOG_DIR"  # where a counted child writes its log (set by the fleet for each worker)
DUMP_EVERY_S = 5.0


def harness_session() -> boto3.session.Session:
    """A session for the harness's own clients (not counted: they are not part of the system)."""
    return boto3.session.Session()


def count_this_process(log: CallLog) -> CallLog:
    """Count every call made through boto3's default session (clients made after this call) into ``log``."""
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    watch(boto3.DEFAULT_SESSION.events, log)
    return log


def _dump_forever(log: CallLog, path: Path, stop: threading.Event) -> None:
    while not stop.wait(DUMP_EVERY_S):
        log.dump(str(path))


def run_counted(module: str, out_dir: Path) -> None:
    """Run ``module`` as ``__main__`` with its calls counted into ``out_dir/<pid>.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log = count_this_process(CallLog())
    path = out_dir / f"{os.getpid()}.json"
    stop = threading.Event()
    threading.Thread(target=_dump_forever, args=(log, path, stop), name="call-log", daemon=True).start()

    def final() -> None:
        stop.set()
        log.dump(str(path))

    atexit.register(final)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def merged(log: CallLog, out_dir: Path) -> CallLog:
    """``log`` plus every child log in ``out_dir`` (a file cut short by a kill is skipped)."""
    total = CallLog()
    total.merge(log)
    for f in sorted(out_dir.glob("*.json")) if out_dir.is_dir() else []:
        try:
            total.merge(json.loads(f.read_text()))
        except ValueError:
            continue
    return total


def section(log: CallLog, out_dir: Path) -> tuple[list[str], list[str]]:
    """The report's budget lines, and one line per API below the 2x margin."""
    rows = budget(merged(log, out_dir))
    return render(rows, "AWS API BUDGET OF THIS RUN (every call of the routers, partitioner, deployer and "
                        "workers)").splitlines(), failures(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m local.calls MODULE  (with GEO_CALL_LOG_DIR set)", file=sys.stderr)
        return 2
    out = os.environ.get(CALL_LOG_DIR)
    if not out:
        print(f"python -m local.calls: {CALL_LOG_DIR} is not set", file=sys.stderr)
        return 2
    sys.argv = [args[0]]
    run_counted(args[0], Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
