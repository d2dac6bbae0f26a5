"""The Spark aggregation job of the loop: ``python -m glue_jobs.quadkey_counts`` in streaming local mode.

It reads the ingest stream, counts load per zoom-:data:`~local.environment.GRID_ZOOM` quadkey per window and
writes each window as a snapshot (``snapshots/…/_manifest.json``) to the snapshots bucket, whose notification
drives the partitioner (:class:`local.loops.ObjectCreatedNotifier`). It signs as the stack's Spark job role.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from local import procs
from local.aws import EmbeddedAws
from local.environment import GRID_ZOOM, REPO_ROOT, handler_env
from local.state import RunState, say
from local.wiring.stack_wiring import Component

#: Allowed event lateness in the aggregation job: events are stamped at send time, so a
#: couple of seconds covers the producer's batching; a window is emitted once the watermark
#: passes its end (append mode), i.e. about window + watermark + trigger after it starts.
WATERMARK_S = 3
SPARK_READY_LINE = "[aggregation] streaming from"
SPARK_START_TIMEOUT_S = 150.0


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
    if not cfg.event_fields.is_default:
        argv += ["--event-fields", cfg.event_fields.to_json()]
    env = {**os.environ, **aws.environment(handler_env(cfg)), "PYSPARK_PYTHON": sys.executable}
    if state.twin is not None:  # the job signs as its synthesized role (the EMR Serverless / Glue job role)
        env.update(state.twin.environment(Component.SPARK))
    return procs.start("spark-quadkey-counts", argv, env, cfg.out / "logs", REPO_ROOT)


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
