"""The foreachBatch body and the streaming wiring every entry point shares.

One streaming query reads each source once (CONTRACTS.md "Aggregation job details"); its foreachBatch
(:func:`stream_batch_fn`) takes the micro-batch's raw records and, from one cached classification:

* **quarantine**: records with a reason -> :func:`write_quarantine_batch` (JSON lines under
  ``quarantine/batch=<id>/``);
* **windows**: valid events -> quadkey at ``zoom`` -> event-time window counts, merged into the open
  windows kept across batches with Spark's append-mode watermark rules
  (:class:`~glue_jobs.window_state.WindowStore`: each window emitted once, when final) ->
  :func:`write_snapshot_batch` (cost join, quadtree rollup, data files, manifest last).

Checkpoint root: the query's offsets under ``<checkpoint>/events``, the open windows under
``<checkpoint>/windows``. The transforms hold no I/O; this module holds the driver-side I/O of one micro-batch.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from geokernel.contracts.cost import CostReportRecord, parse_rate
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.contracts.snapshot import SnapshotRow
from geokernel.geo.tiles import parse_quadkey
from glue_jobs.events import classify_events, quarantine_records, valid_events
from glue_jobs.snapshot import (
    SnapshotMeta,
    SnapshotResult,
    Storage,
    storage_for,
    write_quarantine,
    write_snapshot,
)
from glue_jobs.transform import RollupSpec, WindowSpec, aggregate_cells, rollup_quadtree, with_cost
from glue_jobs.window_state import FROM_OLDEST, WindowStore, partial_reason


@dataclass(frozen=True)
class JobConfig:
    """Everything a run needs besides its source.

    Attributes
    ----------
    out : str
        Snapshot root: local directory or ``s3://bucket[/prefix]``.
    quarantine : str or None
        Quarantine root (same forms); None = ``out``.
    window, rollup : WindowSpec, RollupSpec
        Windowing and quadtree shape.
    costs : str or None
        Cost rates: a file (cost report JSON, JSON lines of reports, or CSV ``quadkey,rate``),
        a directory or an ``s3://`` prefix of cost reports. None = cold start (events only).
    rows_per_file : int
        Rows per snapshot data file.
    event_fields : EventFields
        Which JSON key of an event holds each field (``--event-fields``; default the canonical names).
    starting_position : str
        Where the streaming source starts on a fresh checkpoint (``TRIM_HORIZON``: its oldest record, as Glue and
        the local source; ``LATEST``: its tip, as the EMR job): on ``LATEST`` the windows that started before the
        first micro-batch are written partial (:func:`glue_jobs.window_state.complete_from_ms`).
    """

    out: str
    quarantine: str | None = None
    window: WindowSpec = field(default_factory=WindowSpec)
    rollup: RollupSpec = field(default_factory=RollupSpec)
    costs: str | None = None
    rows_per_file: int = 500_000
    event_fields: EventFields = DEFAULT_EVENT_FIELDS
    starting_position: str = FROM_OLDEST[0]


class BatchReport(NamedTuple):
    """What one micro-batch (or one batch run) wrote."""

    batch_id: int
    snapshots: tuple[SnapshotResult, ...] = ()
    quarantined: Mapping[str, int] = {}
    quarantine_uris: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# Cost rates
# ---------------------------------------------------------------------------

_EPOCH_FILE = re.compile(r"(\d+)\.json$")


def parse_cost_rates(text: str, source: str) -> dict[str, float]:
    """Rates from one cost file: a cost report, JSON lines of reports, or CSV ``quadkey,rate``.

    A report is decoded by the contract's one decoder (:class:`~geokernel.contracts.cost.CostReportRecord`), so
    the Spark job reads exactly what the workers write; the CSV is for rates a user measured elsewhere.

    Raises
    ------
    ValueError
        Naming ``source`` (and line) and the bad value, for malformed content (a report with a field missing, a
        rate that is not a finite number >= 0, a quadkey that is not one).
    """
    if text.lstrip().startswith("{"):
        out: dict[str, float] = {}
        for where, raw in _json_documents(text, source):
            for qk, rate in CostReportRecord.from_json(raw, where).rates.items():
                out[_check_qk(qk, f"{where} rates")] = rate
        return out
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip() for c in rows[0][:2]] != ["quadkey", "rate"]:
        raise ValueError(f"{source} line 1: expected a cost report JSON or CSV header 'quadkey,rate', "
                         f"got {rows[0] if rows else ''!r}")
    out = {}
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < 2:
            raise ValueError(f"{source} line {i}: expected 'quadkey,rate', got {row!r}")
        try:
            value = float(row[1])
        except ValueError:
            raise ValueError(f"{source} line {i}: rate {row[1]!r} is not a number") from None
        out[_check_qk(row[0].strip(), f"{source} line {i}")] = parse_rate(value, f"{source} line {i}")
    return out


def _json_documents(text: str, source: str) -> list[tuple[str, str]]:
    """One JSON document (the whole text) or JSON lines, each with where it came from."""
    try:
        json.loads(text)
    except ValueError:
        return [(f"{source} line {i}", line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    return [(source, text)]


def _check_qk(qk: object, where: str) -> str:
    try:
        return parse_quadkey(qk, where)
    except Exception as exc:  # InvalidQuadkeyError: keep the message, make it a ValueError
        raise ValueError(str(exc)) from None


def read_cost_rates(location: str, *, strict: bool = True, log: TextIO = sys.stderr) -> dict[str, float]:
    """Merge the cost rates at ``location`` (file, directory or ``s3://`` prefix of reports).

    Reports are applied in order of the ``<epoch_s>.json`` in their name (then key), so the
    newest rate of a quadkey wins. With ``strict`` a malformed file raises ValueError;
    without it (streaming) the file is skipped with a line on ``log``.
    """
    if not location.startswith("s3://"):
        from pathlib import Path

        path = Path(location)
        if path.is_file():
            return parse_cost_rates(path.read_text(), str(path))
        if not path.is_dir():
            raise ValueError(f"cost rates location {location!r} is neither a file nor a directory")
    storage = storage_for(location)
    keys = [k for k in storage.list("") if k.endswith((".json", ".jsonl", ".csv"))]
    keys.sort(key=lambda k: (int(m.group(1)) if (m := _EPOCH_FILE.search(k)) else 0, k))
    merged: dict[str, float] = {}
    for key in keys:
        body = storage.get(key) or b""
        try:
            merged.update(parse_cost_rates(body.decode(), storage.uri(key)))
        except (ValueError, UnicodeDecodeError) as exc:
            if strict:
                raise
            print(f"[aggregation] skipping cost file {storage.uri(key)!r}: {exc}", file=log, flush=True)
    return merged


def rates_frame(spark: SparkSession, rates: Mapping[str, float]) -> tuple[DataFrame | None, tuple[int, ...]]:
    """A ``quadkey, rate`` DataFrame and the distinct quadkey lengths, or (None, ()) when empty."""
    if not rates:
        return None, ()
    df = spark.createDataFrame(sorted(rates.items()), "quadkey string, rate double")
    return df, tuple(sorted({len(q) for q in rates}))


# ---------------------------------------------------------------------------
# Micro-batch bodies
# ---------------------------------------------------------------------------


def write_snapshot_batch(fine: DataFrame, batch_id: int, storage: Storage, rollup: RollupSpec,
                         rates: DataFrame | None = None, rate_zooms: tuple[int, ...] = (),
                         rows_per_file: int = 500_000, *, complete_from_ms: int = 0) -> tuple[SnapshotResult, ...]:
    """Write one snapshot per window present in ``fine`` (windowed fine-cell counts).

    Parameters
    ----------
    fine : DataFrame
        ``window_start, window_end, quadkey, events`` at ``rollup.zoom`` (static).
    batch_id : int
        Micro-batch id (0 for a batch run); part of the data keys and the manifest.
    storage : Storage
        Snapshot root.
    rollup : RollupSpec
    rates, rate_zooms
        Cost rates (see :func:`rates_frame`); None = cold start.
    complete_from_ms : int
        Epoch ms from which the run read every event (:func:`glue_jobs.window_state.complete_from_ms`): a window
        starting before it is written partial. 0 (a batch run over whole files): every window is complete.

    Returns
    -------
    tuple of SnapshotResult
        One per window, in window order.
    """
    rows = rollup_quadtree(with_cost(fine, rates, rate_zooms), rollup)
    ordered = rows.orderBy("window_start", "window_end", "quadkey").select(
        F.expr("unix_micros(window_start)").alias("start_us"), F.expr("unix_micros(window_end)").alias("end_us"),
        "quadkey", "events", "cost")
    results = []
    for (start, end), group in itertools.groupby(ordered.toLocalIterator(), key=lambda r: (r[0], r[1])):
        meta = SnapshotMeta(_utc(start), _utc(end), rollup.grid_zoom, rollup.zoom, rollup.refine_events, batch_id,
                            partial_reason(start // 1000, complete_from_ms))
        snap_rows = (SnapshotRow(r[2], int(r[3]), None if r[4] is None else float(r[4])) for r in group)
        results.append(write_snapshot(storage, snap_rows, meta, rows_per_file))
    return tuple(results)


def _utc(micros: int) -> datetime:
    """UTC datetime of epoch microseconds (independent of the Python process's time zone)."""
    return datetime.fromtimestamp(micros / 1_000_000, UTC)


def write_quarantine_batch(classified: DataFrame, batch_id: int, storage: Storage) -> tuple[dict[str, int], tuple[str, ...]]:
    """Write the quarantined rows of ``classified`` (see classify_events); return counts per code and URIs."""
    bad = quarantine_records(classified).orderBy("source", "raw")
    counts: dict[str, int] = {}

    def records() -> Iterable[QuarantineRecord]:
        for r in bad.toLocalIterator():
            counts[r["code"]] = counts.get(r["code"], 0) + 1
            yield QuarantineRecord(r["reason"], r["raw"], r["source"], r["quarantined_at"])

    uris = write_quarantine(storage, records(), batch_id)
    return counts, tuple(uris)


# ---------------------------------------------------------------------------
# Streaming wiring
# ---------------------------------------------------------------------------


ProgressFn = Callable[[str], None]


def _print_progress(line: str) -> None:
    print(line, flush=True)


def stream_batch_fn(cfg: JobConfig, state_root: str, progress: ProgressFn = _print_progress, *,
                    clock: Callable[[], float] = time.time) -> Callable[[DataFrame, int], None]:
    """The foreachBatch body of the one streaming query: raw records -> quarantine + windows -> snapshots.

    Parameters
    ----------
    cfg : JobConfig
    state_root : str
        Where the open windows live between micro-batches (:class:`~glue_jobs.window_state.WindowStore`):
        under the query's checkpoint root, so both are kept or discarded together.
    progress : callable
        Receives the human lines (one per quarantine write, per snapshot, and one per batch).
    clock : callable
        Epoch seconds: what the first batch on a fresh checkpoint records as the time the run reads every event
        from (``cfg.starting_position`` ``LATEST``; :class:`~glue_jobs.window_state.WindowStore`).

    Notes
    -----
    The micro-batch (``value, source`` records) is classified once and cached, so the source is read once
    per batch however many writes follow (the Kinesis connector's advice, see :mod:`glue_jobs.window_state`).
    Cost rates are re-read from ``cfg.costs`` at every batch that closes a window (workers keep reporting).
    """
    snapshots = storage_for(cfg.out)
    quarantine = storage_for(cfg.quarantine or cfg.out)
    windows = WindowStore(state_root, cfg.window.watermark, starting_position=cfg.starting_position, clock=clock)

    def emit(final: DataFrame, batch_id: int) -> None:
        rates, zooms = _current_rates(final.sparkSession, cfg)
        complete_from = windows.complete_from_ms or 0
        for r in write_snapshot_batch(final, batch_id, snapshots, cfg.rollup, rates, zooms, cfg.rows_per_file,
                                      complete_from_ms=complete_from):
            progress(_snapshot_line(batch_id, r, complete_from))

    def on_batch(raw_batch: DataFrame, batch_id: int) -> None:
        classified = classify_events(raw_batch, fields=cfg.event_fields).persist()
        try:
            # one job counts the valid and the bad rows: the quarantine's sorted write (a job per partition) runs only
            # for a batch that has bad rows, most have none (write_quarantine writes nothing for none anyway)
            ok = F.col("reason").isNull()
            stats = classified.agg(F.count(F.when(ok, 1)), F.max(F.when(ok, F.unix_millis("ts"))),
                                   F.count(F.when(~ok, 1))).first()
            n_valid, max_ms, n_bad = (int(stats[0]), stats[1], int(stats[2])) if stats is not None else (0, None, 0)
            counts: dict[str, int] = {}
            if n_bad:
                counts, uris = write_quarantine_batch(classified, batch_id, quarantine)
                progress(f"[aggregation] batch={batch_id} quarantined={dict(sorted(counts.items()))} "
                         f"-> {', '.join(uris)}")
            valid = valid_events(classified)
            fine = aggregate_cells(valid, cfg.window, cfg.rollup.zoom)
            step = windows.advance(classified.sparkSession, fine, max_ms, batch_id,
                                   lambda final: emit(final, batch_id))
        finally:
            classified.unpersist()
        progress(f"[aggregation] batch={batch_id} valid={n_valid} quarantined={sum(counts.values())} "
                 f"late_dropped={step.late_events} watermark={_utc(step.watermark_ms * 1000).isoformat()} "
                 f"final_windows={step.final_windows} open_rows={step.open_rows}")

    return on_batch


def _snapshot_line(batch_id: int, r: SnapshotResult, complete_from_ms: int) -> str:
    """The job's line for one written snapshot (a partial one says why, and from when the run reads every event)."""
    partial = (f" partial={r.partial_reason} (the run reads every event from "
               f"{_utc(complete_from_ms * 1000).isoformat()})" if r.partial_reason else "")
    return (f"[aggregation] batch={batch_id} snapshot {r.manifest_uri} rows={r.rows} events={r.total_events} "
            f"rows_per_zoom={dict(sorted(r.rows_per_zoom.items()))}{partial}"
            f"{' (unchanged retry, skipped)' if r.skipped else ''}")


def start_streaming(raw: DataFrame, cfg: JobConfig, checkpoint: str, trigger: str | None = "5 seconds",
                    progress: ProgressFn = _print_progress, query_prefix: str = "georebal") -> StreamingQuery:
    """Start the one streaming query over a streaming ``value, source`` DataFrame (one read of the source).

    Parameters
    ----------
    raw : DataFrame
        Streaming DataFrame with string columns ``value`` (record text) and ``source``.
    cfg : JobConfig
    checkpoint : str
        Checkpoint root (local path or a URI the Spark runtime can write, e.g. ``s3://``): the query's
        offsets under ``<checkpoint>/events``, its open windows under ``<checkpoint>/windows``.
    trigger : str or None
        Processing-time trigger interval; None = ``availableNow`` (process what is there, then stop).
    progress : callable
        Receives one human line per written snapshot / quarantine batch and one per micro-batch.

    Returns
    -------
    StreamingQuery
        The caller awaits or stops it.
    """
    root = checkpoint.rstrip("/")
    writer = raw.writeStream.queryName(f"{query_prefix}-aggregation").option("checkpointLocation", f"{root}/events")
    writer = writer.trigger(availableNow=True) if trigger is None else writer.trigger(processingTime=trigger)
    return writer.foreachBatch(stream_batch_fn(cfg, f"{root}/windows", progress)).start()


def _current_rates(spark: SparkSession, cfg: JobConfig) -> tuple[DataFrame | None, tuple[int, ...]]:
    if not cfg.costs:
        return None, ()
    try:
        rates = read_cost_rates(cfg.costs, strict=False)
    except ValueError as exc:
        print(f"[aggregation] cost rates unavailable ({exc}); using events only", file=sys.stderr, flush=True)
        return None, ()
    return rates_frame(spark, rates)


def progress_line(query: StreamingQuery) -> str | None:
    """A one-line summary of the query's last progress (input rows, rate, batch duration), or None.

    Late drops and the watermark are in the per-batch line of :func:`stream_batch_fn` (the query holds no
    Spark state operator: the windows live in :class:`~glue_jobs.window_state.WindowStore`).
    """
    p = query.lastProgress
    if not p:
        return None
    took = p.get("durationMs", {}).get("triggerExecution", "-")
    return (f"[aggregation] {p.get('name')} batch={p.get('batchId')} input_rows={p.get('numInputRows')} "
            f"trigger_ms={took}")
