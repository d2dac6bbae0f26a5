"""Local runner: JSON-lines events (batch) or a Kinesis stream (streaming) -> load snapshots.

Batch (backfills, the embedded default)::

    python -m glue_jobs.quadkey_counts --events 'data/*.jsonl' --zoom 18 --out out/ \\
        [--grid-zoom 12] [--window 60s] [--slide 30s] [--refine-events 500] [--costs FILE] \\
        [--quarantine DIR_OR_S3URI]

Streaming (Spark 4 only; the local loop runs this against moto server)::

    python -m glue_jobs.quadkey_counts --kinesis-stream NAME --endpoint-url http://127.0.0.1:5000 \\
        --out s3://snapshots-bucket [--trigger 5s] [--checkpoint DIR] [--watermark 2m] \\
        [--starting-position TRIM_HORIZON|LATEST] ...

Streaming prints one line per written snapshot / quarantine batch and per progress tick on
stdout, and stops cleanly (query stopped, exit 0) on SIGTERM or SIGINT. In-process callers
use :func:`run_batch` and :func:`run_stream` (with a ``threading.Event`` to stop it).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from geokernel.contracts.event_fields import EventFields
from glue_jobs.batch import (
    BatchReport,
    JobConfig,
    progress_line,
    rates_frame,
    read_cost_rates,
    start_streaming,
    write_quarantine_batch,
    write_snapshot_batch,
)
from glue_jobs.events import classify_events, valid_events
from glue_jobs.snapshot import storage_for
from glue_jobs.transform import RollupSpec, WindowSpec, aggregate_cells, check_rollup
from glue_jobs.window_state import FROM_OLDEST, FROM_TIP, complete_from_ms, interval_ms

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: str, where: str) -> str:
    """``60s`` / ``2m`` / ``500ms`` / ``1h`` (or a Spark interval like ``60 seconds``) -> Spark interval string."""
    m = _DURATION.match(text)
    if m:
        if int(m.group(1)) <= 0:
            raise ValueError(f"{where}: duration must be positive, got {text!r}")
        return f"{int(m.group(1))} {_UNITS[m.group(2)]}"
    if re.match(r"^\s*\d+\s+(milliseconds?|seconds?|minutes?|hours?|days?)\s*$", text):
        return text.strip()
    raise ValueError(f"{where}: expected a duration like 60s, 2m, 500ms or '60 seconds', got {text!r}")


#: JVM options of a local Spark (the loop's job, the batch CLI, the tests): the C1 compiler only and the serial
#: collector. Local micro-batches are small and the JVM shares the machine with the whole loop; the second JIT tier
#: and a parallel collector cost more CPU than they return. ``bench/bench_local_spark.py`` (10 micro-batches of 500
#: events through the job's batch body, 2 cores, two draws): the JVM's CPU 0.50-0.62x of its defaults', the first batch
#: 0.67-0.79x, the later ones 0.83-1.10x (within the machine's noise).
#: Passed as ``spark.driver.extraJavaOptions`` before the JVM starts (in local mode the driver runs every task).
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def local_spark(app: str = "geo-rebalancer-aggregation", master: str = "local[2]", *,
                java_options: str = LOCAL_JAVA_OPTIONS) -> SparkSession:
    """A local Spark session configured like every entry point (UTC, small shuffles, UI off), its JVM started with
    ``java_options`` (:data:`LOCAL_JAVA_OPTIONS`; empty: the JVM's defaults, the baseline of
    ``bench/bench_local_spark.py``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = (builder.config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# ---------------------------------------------------------------------------
# Batch
# ---------------------------------------------------------------------------


def read_json_lines(spark: SparkSession, events: str) -> DataFrame:
    """Raw ``value, source`` records of JSON-lines files (path, directory or glob); source = ``file:line``.

    Files are read whole (one task per file) to number their lines; blank lines are skipped.
    """
    files = (spark.read.text(events, wholetext=True)
             .select(F.input_file_name().alias("file"), F.col("value").alias("text")))
    lines = files.select("file", F.posexplode(F.split("text", "\r?\n")).alias("pos", "value"))
    return lines.where(F.trim("value") != "").select(
        "value", F.concat(F.col("file"), F.lit(":"), (F.col("pos") + 1).cast("string")).alias("source"))


class BatchSummary(NamedTuple):
    """What :func:`run_batch` read and wrote."""

    records: int
    valid: int
    report: BatchReport
    windows: int


def run_batch(spark: SparkSession, events: str, cfg: JobConfig, batch_id: int = 0) -> BatchSummary:
    """Batch run: read ``events``, quarantine the bad ones, write one snapshot per window.

    Parameters
    ----------
    spark : SparkSession
    events : str
        JSON-lines path, directory or glob.
    cfg : JobConfig
    batch_id : int
        Written into manifests and data keys; re-running with the same id and input rewrites
        nothing (idempotent).
    """
    _check_input(events)
    classified = classify_events(read_json_lines(spark, events), fields=cfg.event_fields).persist()
    try:
        counts, uris = write_quarantine_batch(classified, batch_id, storage_for(cfg.quarantine or cfg.out))
        valid = valid_events(classified)
        fine = aggregate_cells(valid, cfg.window, cfg.rollup.zoom).persist()
        rates = read_cost_rates(cfg.costs) if cfg.costs else {}
        rates_df, zooms = rates_frame(spark, rates)
        snaps = write_snapshot_batch(fine, batch_id, storage_for(cfg.out), cfg.rollup, rates_df, zooms,
                                     cfg.rows_per_file)
        records = classified.count()
        fine.unpersist()
    finally:
        classified.unpersist()
    quarantined = sum(counts.values())
    return BatchSummary(records, records - quarantined, BatchReport(batch_id, snaps, counts, uris), len(snaps))


def _check_input(events: str) -> None:
    if any(ch in events for ch in "*?[") or "://" in events:
        return
    if not Path(events).exists():
        raise FileNotFoundError(f"--events: {events!r} does not exist")


def format_summary(s: BatchSummary) -> str:
    """Human summary of a batch run."""
    lines = [f"events read: {s.records}", f"valid: {s.valid}",
             f"quarantined: {sum(s.report.quarantined.values())}"]
    lines += [f"  {code}: {n}" for code, n in sorted(s.report.quarantined.items())]
    lines += [f"quarantine files: {', '.join(s.report.quarantine_uris)}"] if s.report.quarantine_uris else []
    lines.append(f"windows: {s.windows}")
    for r in s.report.snapshots:
        zooms = ", ".join(f"z{z}={n}" for z, n in sorted(r.rows_per_zoom.items()))
        lines.append(f"  {r.prefix} rows={r.rows} events={r.total_events} ({zooms}) -> {r.manifest_uri}"
                     f"{' [unchanged, skipped]' if r.skipped else ''}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Streaming
# ---------------------------------------------------------------------------


def kinesis_stream(spark: SparkSession, stream_name: str, endpoint_url: str | None, region: str | None,
                   starting_position: str = FROM_OLDEST[0]) -> DataFrame:
    """Streaming ``value, source`` records of a Kinesis stream through the ``geo_kinesis`` Python source, read from
    ``starting_position`` on a fresh checkpoint (from the checkpoint's offsets otherwise).

    KPL aggregated records are split into their user records (:func:`glue_jobs.events.deaggregate_records`).
    """
    from glue_jobs.events import deaggregate_records
    from glue_jobs.kinesis_source import register

    register(spark)
    reader = (spark.readStream.format("geo_kinesis").option("stream_name", stream_name)
              .option("starting_position", starting_position))
    if endpoint_url:
        reader = reader.option("endpoint_url", endpoint_url)
    if region:
        reader = reader.option("region", region)
    return deaggregate_records(reader.load(), "data", "source")


def run_stream(spark: SparkSession, stream_name: str, cfg: JobConfig, *, endpoint_url: str | None = None,
               region: str | None = None, checkpoint: str | None = None, trigger: str = "5 seconds",
               stop: threading.Event | None = None, tick_s: float = 5.0) -> None:
    """Run the streaming aggregation from Kinesis until ``stop`` is set or a query fails.

    Parameters
    ----------
    spark : SparkSession
        Spark 4.0+ (the Python data source API).
    stream_name : str
        Ingest stream.
    cfg : JobConfig
        ``cfg.out`` may be ``s3://bucket`` (moto via ``AWS_ENDPOINT_URL``) or a directory.
    endpoint_url, region : str, optional
        Kinesis endpoint (moto) and region.
    checkpoint : str, optional
        Checkpoint directory; default a fresh temporary directory (no resume).
    trigger : str
        Micro-batch interval (Spark interval string).
    stop : threading.Event, optional
        Set it to stop the query and return.
    tick_s : float
        Seconds between progress lines.

    Raises
    ------
    pyspark.errors.StreamingQueryException
        If the query dies.
    """
    stop = stop or threading.Event()
    checkpoint = checkpoint or tempfile.mkdtemp(prefix="georebal-ckpt-")
    raw = kinesis_stream(spark, stream_name, endpoint_url, region, cfg.starting_position)
    query = start_streaming(raw, cfg, checkpoint, trigger)
    print(f"[aggregation] streaming from kinesis stream {stream_name!r} to {cfg.out!r} "
          f"(checkpoint {checkpoint!r}, trigger {trigger!r}, window {cfg.window.length!r}, "
          f"watermark {cfg.window.watermark!r})", flush=True)
    last = None
    try:
        while not stop.wait(tick_s):
            if not query.isActive:
                exc = query.exception()
                if exc is not None:
                    raise exc
                return
            line = progress_line(query)
            batch_id = query.lastProgress.get("batchId") if query.lastProgress is not None else None
            if line and last != batch_id:
                last = batch_id
                print(line, flush=True)
    finally:
        if query.isActive:
            query.stop()
        print("[aggregation] stopped", flush=True)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m glue_jobs.quadkey_counts", description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--events", help="JSON-lines events: file, directory or glob (batch mode)")
    src.add_argument("--kinesis-stream", help="Kinesis stream name (streaming mode, Spark 4)")
    p.add_argument("--out", required=True, help="snapshot root: directory or s3://bucket[/prefix]")
    p.add_argument("--zoom", type=int, default=18, help="finest zoom (default 18)")
    p.add_argument("--grid-zoom", type=int, default=12, help="grid zoom (default 12)")
    p.add_argument("--refine-events", type=int, default=500, help="refine cells with more events (default 500)")
    p.add_argument("--window", default="60s", help="window length (default 60s)")
    p.add_argument("--slide", default=None, help="slide for sliding windows (default: tumbling)")
    p.add_argument("--watermark", default="2m", help="allowed event-time lateness (default 2m)")
    p.add_argument("--costs", default=None, help="cost rates: report JSON / JSONL / CSV quadkey,rate, dir or s3://")
    p.add_argument("--quarantine", default=None, help="quarantine root (default: --out)")
    p.add_argument("--endpoint-url", default=None, help="AWS endpoint (moto server); also sets AWS_ENDPOINT_URL")
    p.add_argument("--region", default=None, help="AWS region (default AWS_DEFAULT_REGION or us-east-1)")
    p.add_argument("--trigger", default="5s", help="streaming micro-batch interval (default 5s)")
    p.add_argument("--checkpoint", default=None, help="streaming checkpoint dir (default: a temp dir)")
    p.add_argument("--starting-position", default=FROM_OLDEST[0], choices=(FROM_OLDEST[0], FROM_TIP),
                   help="streaming: where the stream is read from on a fresh checkpoint (default TRIM_HORIZON; "
                        "LATEST reads from its tip, as the EMR job does, and writes the windows begun before the "
                        "first micro-batch partial)")
    add_event_fields_argument(p)
    return p


def config_from_args(args: argparse.Namespace, *, out: str | None = None) -> JobConfig:
    """JobConfig from parsed CLI args; raises ValueError naming the bad flag and value (a ContractError for a bad
    ``--event-fields``).

    ``out`` is the snapshot root when the entry point names it another way (the EMR
    entry's ``--snapshots``); by default ``args.out``.
    """
    rollup = check_rollup(RollupSpec(args.grid_zoom, args.zoom, args.refine_events))
    window = WindowSpec(parse_duration(args.window, "--window"),
                        parse_duration(args.slide, "--slide") if args.slide else None,
                        parse_duration(args.watermark, "--watermark"))
    position = str(getattr(args, "starting_position", FROM_OLDEST[0])).upper()
    complete_from_ms(position, 0)  # names a bad --starting-position before Spark starts
    return JobConfig(out=out if out is not None else args.out, quarantine=args.quarantine, window=window, rollup=rollup,
                     costs=args.costs, event_fields=EventFields.from_json(args.event_fields, "--event-fields"),
                     starting_position=position)


def add_event_fields_argument(p: argparse.ArgumentParser) -> None:
    """``--event-fields JSON``: which key of an event holds each field (the value of ``EVENT_FIELDS``)."""
    p.add_argument("--event-fields", default="",
                   help='which JSON key of an event holds each field, as JSON {canonical: name}, e.g. '
                        '\'{"lat": "latitude", "lon": "longitude"}\' (default: the canonical names event_id, '
                        'entity_id, ts, lat, lon)')


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        trigger = parse_duration(args.trigger, "--trigger")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    if args.region:
        os.environ.setdefault("AWS_DEFAULT_REGION", args.region)
    spark = local_spark()
    try:
        if args.events:
            started = time.monotonic()
            try:
                summary = run_batch(spark, args.events, cfg)
            except (FileNotFoundError, ValueError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(format_summary(summary))
            print(f"done in {time.monotonic() - started:.1f}s")
            return 0
        stop = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            print(f"[aggregation] signal {signal.Signals(signum).name}: stopping", flush=True)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        run_stream(spark, args.kinesis_stream, cfg, endpoint_url=args.endpoint_url, region=args.region,
                   checkpoint=args.checkpoint, trigger=trigger, stop=stop,
                   tick_s=min(5.0, max(0.5, _seconds(trigger))))
        return 0
    finally:
        spark.stop()


def _seconds(interval: str) -> float:
    return interval_ms(interval, "--trigger") / 1000


if __name__ == "__main__":
    sys.exit(main())
