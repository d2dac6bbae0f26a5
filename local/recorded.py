"""A recorded event log as the loop's event source (``python -m local.run --events FILE``).

Reading
    The log is read by the reader of ``python -m partitioner counts``
    (:func:`partitioner.load.eventread.read_event_table`: CSV, JSON lines, Parquet; the same column options and
    time units) and every row is checked with its rules (:func:`partitioner.load.eventlog.check_rows`). A bad row
    (one the reader refused, or a bad value) is never sent: :func:`quarantine_bad_rows` writes it to the loop's
    quarantine as a :class:`~geokernel.contracts.quarantine.QuarantineRecord` whose ``source`` is ``file:line``
    and whose reason names the value. A row whose mapped entity or event id is empty is bad too
    (``missing_field``). The good rows are sorted by recorded time, stable (equal times keep file order).

Ids
    ``entity_id`` is the text of the entity column (``--entity``; ``entity_id`` when the file has one), else each
    event is its own entity. ``event_id`` is the text of the ``--event-id`` column, else ``<file name>:<line>``
    (Parquet: ``<file name>:row<N>``), unique within the log. Both are held as codes (:class:`Texts`), not a
    string per row: a 2M-row log read in 1.7 s and 506 MB (3.7 s and 830 MB with strings). An entity id may be at
    most :data:`MAX_ENTITY_ID` characters: a Kinesis partition key less the room a warm-up copy's suffix takes.

Clock
    Recorded time maps to wall time at ``speed`` recorded seconds per wall second, relative to the first event: an
    event recorded ``d`` seconds after the first is sent ``d / speed`` seconds after the replay clock starts. Its
    ``ts`` is that replay-clock time (epoch ms), not the recorded time: Spark's event-time windows, the utilisation
    per window and the report all run on the wall clock, as in the built-in replay, so a snapshot window of ``W``
    wall seconds holds ``W * speed`` recorded seconds. The recorded time rides along as ``recorded_utc``
    (:data:`RECORDED_TIME_FIELD`, ISO-8601 UTC with milliseconds): a transform that measures time (speed, dwell)
    takes it from there when it declares a ``time_setting`` (``transforms.geofence_state``: ``GEOFENCE_TIME_FIELD``),
    which the local run sets to that field (:func:`local.environment.transform_env`); from ``ts`` its speeds would
    be ``speed`` times the recorded ones and its dwell times ``1 / speed`` of them.

Speed and duration (:func:`plan_replay`)
    Without ``--speed`` the whole log plays in the run's duration (``--duration``; 180 s, ``--quick`` 80 s):
    ``speed = span / duration``. With ``--speed`` the replay lasts ``span / speed``, capped by ``--duration`` (or
    ``--quick``'s) when given; events recorded after the cap are not sent and the report says how many.

Warm-up
    Until the first spec is active and its backlog is out (:mod:`local.replay`), the replay sends the log's *first window* (the events recorded in its first
    ``window_s * speed`` seconds) over and over at their recorded pace, each pass starting on a window boundary,
    with event ids ``<event_id>#warmup<k>`` (pass ``k``) and entity ids ``<entity_id>#warmup<k>``: each pass's copies
    are entities of their own at the same places, so no state carries from a copy into the next pass or into the
    entity's first real point (it did: 9,548 m/s on ``builtin:nyharbor``). The first snapshots so hold the log's start
    load and the first spec is built for it. The replay clock starts when a spec is active and the backlog is out; from then on every good row is
    sent exactly once. Events in = recorded events sent + warm-up copies; every one must come out.
"""

from __future__ import annotations

import json
import math
import tempfile
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.contracts.events import MAX_PARTITION_KEY
from geokernel.contracts.quarantine import lambda_quarantine_key
from geokernel.contracts.timestamps import TsUnit
from geokernel.timestamps import encode_ts
from local.errors import LocalRunError
from local.texts import Texts
from local.traj import traj_to_csv
from partitioner.load.eventcols import EventColumns
from partitioner.load.eventlog import BadRow, check_rows
from partitioner.load.eventread import EventTable, read_event_table

IntArray = npt.NDArray[np.int64]
#: ``--events builtin:NAME`` prefix.
BUILTIN_PREFIX = "builtin:"
#: The writer name of the replay's quarantine objects (``quarantine/<writer>/<day>/<epoch_ms>-<id>.jsonl``).
QUARANTINE_WRITER = "replay"
#: Suffix of a warm-up copy's event id and entity id (``<event_id>#warmup<k>``, ``<entity_id>#warmup<k>``).
WARMUP_SUFFIX = "#warmup"
#: The longest entity id taken: a warm-up copy's, ``#warmup<k>`` added (k below a million), is still a partition key.
MAX_ENTITY_ID = MAX_PARTITION_KEY - len(WARMUP_SUFFIX) - 6
#: The field of every replayed event that holds its recorded time (``ts`` holds its replay time).
RECORDED_TIME_FIELD = "recorded_utc"
#: Mean events per wall second above which :func:`describe` warns that the loop may not keep up. Measured on a
#: 2-core machine (2026-11-29, ``run-local --events`` of 200,000 positions of 2,000 vehicles at 1,111 events/s, the
#: stateless transform): the router routed 600-800 events/s, fell behind and the tail timed out with 1,312 events
#: not out; the loop's phases then also say so as it happens (``local.phases.RouterLag``).
KEEPS_UP_RATE = 500.0


class RecordedLogError(LocalRunError, ValueError):
    """A recorded log cannot be replayed: unknown built-in, missing package, no valid event, bad option."""


@dataclass(frozen=True)
class BuiltinLog:
    """A real recorded log shipped in a package's wheel, and the columns it names."""

    package: str
    pip_name: str
    resource: str
    columns: EventColumns
    time_unit: str
    about: str


#: Real recorded logs shipped in packages (requirements-dev.txt), by ``builtin:NAME``.
BUILTIN_LOGS = {
    "nyharbor": BuiltinLog(
        "tracktable_data", "tracktable-data==1.7.3.1", "python_example_data/NYHarbor_2020_06_30_first_hour.csv",
        EventColumns(lat="LAT", lon="LON", time="BaseDateTime", entity="MMSI", entity_given=True), "iso",
        "AIS positions of 295 vessels in New York harbor, 2020-06-30 00:00-01:00 UTC (8,689 rows in the column layout "
        "of the US MarineCadastre AIS files, as shipped in tracktable-data)"),
    "uscoastal": BuiltinLog(
        "tracktable_data", "tracktable-data==1.7.3.1", "python_example_data/US_coastal_2020_06_30.traj",
        EventColumns(lat="LAT", lon="LON", time="BaseDateTime", entity="MMSI", entity_given=True), "iso",
        "AIS positions of 1,185 vessels along the US coasts, 2020-06-30 00:22-23:38 UTC (235,967 points, shipped in "
        "tracktable-data as a .traj file and turned into that CSV layout on first use: local/traj.py)"),
}


def builtin_log(spec: str) -> BuiltinLog | None:
    """The :class:`BuiltinLog` named by ``builtin:NAME``, None for a path; :class:`RecordedLogError` for a bad NAME."""
    if not spec.startswith(BUILTIN_PREFIX):
        return None
    name = spec[len(BUILTIN_PREFIX):]
    if name not in BUILTIN_LOGS:
        raise RecordedLogError(f"--events {spec!r}: no such built-in log; choose one of "
                               f"{', '.join(BUILTIN_PREFIX + n for n in BUILTIN_LOGS)}")
    return BUILTIN_LOGS[name]


def builtin_path(log: BuiltinLog) -> Path:
    """The file of a built-in log inside its installed package (:class:`RecordedLogError` when not installed); a
    ``.traj`` one as CSV, converted once into the system's temporary directory (``geo-rebalancer-logs/``)."""
    try:
        root = resources.files(log.package)
    except ModuleNotFoundError:
        raise RecordedLogError(f"the built-in log needs the package {log.pip_name!r} (requirements-dev.txt): "
                               f"pip install {log.pip_name}") from None
    path = Path(str(root.joinpath(log.resource)))
    if path.suffix != ".traj":
        return path
    csv = Path(tempfile.gettempdir()) / "geo-rebalancer-logs" / f"{path.stem}.csv"
    if not csv.exists() or csv.stat().st_mtime < path.stat().st_mtime:
        traj_to_csv(path, csv)
    return csv


@dataclass(frozen=True, eq=False)
class RecordedLog:
    """The good rows of a log sorted by recorded time (stable), and its bad rows (file order)."""

    source: str
    ms: IntArray
    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    entity_id: Texts
    event_id: Texts
    bad: tuple[BadRow, ...]
    unit: str

    def __len__(self) -> int:
        return len(self.ms)

    @property
    def span_s(self) -> float:
        """Recorded seconds from the first event to the last."""
        return float(self.ms[-1] - self.ms[0]) / 1000.0

    def bad_by_reason(self) -> dict[str, int]:
        """Bad rows per reason code."""
        out: dict[str, int] = {}
        for b in self.bad:
            code = b.reason.split(":", 1)[0]
            out[code] = out.get(code, 0) + 1
        return out


def read_recorded(path: str | Path, columns: EventColumns, event_id_column: str | None = None,
                  time_unit: str = "auto") -> RecordedLog:
    """Read, check and sort a recorded log (module docstring).

    Raises
    ------
    EventLogError
        The file cannot be read, its format is unknown, or a mapped column is missing (naming it).
    RecordedLogError
        No good row at all.
    """
    table = read_event_table(path, columns)
    checked = check_rows(table, columns, time_unit)
    ok, bad = checked.ok.copy(), list(checked.bad)
    entity: Texts | None = None
    if table.entity is not None:
        entity = _texts(table.entity)
        bad += _ids_bad(table, ok, entity, columns.entity, "entity", MAX_ENTITY_ID,
                        f" (a {MAX_PARTITION_KEY}-character partition key less room for {WARMUP_SUFFIX}<k>)")
    if event_id_column is not None:
        # the reader reads one optional column besides lat, lon and time: the same reader reads the file again
        # with the event id column in that place (same rows, same order)
        id_table = read_event_table(path, replace(columns, entity=event_id_column, entity_given=True))
        if len(id_table) != len(table):
            raise RecordedLogError(f"{table.source}: read {len(id_table)} rows with the event id column "
                                   f"{event_id_column!r} but {len(table)} without it")
        ids = _texts(id_table.entity)
        bad += _ids_bad(table, ok, ids, event_id_column, "event id", None)
    else:
        name, row = Path(table.source).name, "" if table.unit == "line" else "row"
        ids = Texts(table.line_of(np.arange(len(table), dtype=np.int64)), prefix=f"{name}:{row}")
    rows = np.flatnonzero(ok)
    if not len(rows):
        raise RecordedLogError(f"no valid event in {table.source!r} ({len(bad)} bad rows)")
    order = rows[np.argsort(checked.ms[rows], kind="stable")]
    ids_out = ids.take(order)
    entity_out = ids_out if entity is None else entity.take(order)
    return RecordedLog(table.source, checked.ms[order], checked.lat[order], checked.lon[order], entity_out, ids_out,
                       tuple(sorted(bad, key=lambda b: b.line)), table.unit)


def _texts(col: Any) -> Texts:
    """A column's values as text, coded (nulls are the text ``""``: their rows are bad, :func:`_ids_bad`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.fill_null(pc.cast(col, pa.string()), "")
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks() if text.num_chunks else pa.array([], pa.string())
    coded = pc.dictionary_encode(text)
    return Texts(np.asarray(coded.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
                 tuple(coded.dictionary.to_pylist()))


def _ids_bad(table: EventTable, ok: npt.NDArray[np.bool_], text: Texts, name: str, what: str,
             longest: int | None, why: str = "") -> list[BadRow]:
    """Mark rows whose id is empty (or longer than ``longest``) as bad, in ``ok``; return them described.

    Lengths are measured once per distinct id (:attr:`Texts.values`), stripped; a null is the empty text.
    """
    values = text.values or ()
    length = np.array([len(v.strip()) for v in values], dtype=np.int64)[text.codes] if values else \
        np.zeros(len(text), dtype=np.int64)
    rows = np.flatnonzero(ok & ((length <= 0) | ((length > longest) if longest is not None else False)))
    if not len(rows):
        return []
    ok[rows] = False
    lines = table.line_of(rows).tolist()
    raw = table.raw_of(lines)
    out = []
    for i, line in zip(rows.tolist(), lines, strict=True):
        reason = (f"missing_field: {what} {name} is missing (empty or null)" if length[i] <= 0 else
                  f"bad_type: {what} {name} {text[i][:40]!r}... is longer than {longest} characters{why}")
        out.append(BadRow(table.source, line, reason, raw.get(line)))
    return out


@dataclass(frozen=True, eq=False)
class ReplayPlan:
    """When each event of a :class:`RecordedLog` is sent (:func:`plan_replay`).

    Attributes
    ----------
    speed
        Recorded seconds per wall second.
    duration_s
        Wall seconds of the replay once the system is live.
    offsets_s
        Wall seconds after the replay clock starts at which each event (sorted) is due.
    send
        How many events (the first ones) the replay sends: all, or those due within a capped duration.
    first_window
        How many events the log's first window holds (what one warm-up pass sends, at least one).
    window_s
        The snapshot window (a warm-up pass lasts one).
    capped
        ``--duration`` cut the log short.
    """

    speed: float
    duration_s: float
    offsets_s: npt.NDArray[np.float64]
    send: int
    first_window: int
    window_s: float
    capped: bool

    @property
    def rate(self) -> float:
        """Mean events per wall second of the replay."""
        return self.send / self.duration_s


def plan_replay(log: RecordedLog, speed: float | None, max_duration_s: float | None, default_duration_s: float,
                window_s: float) -> ReplayPlan:
    """The replay's speed, duration and schedule (module docstring, "Speed and duration").

    Parameters
    ----------
    log
        The sorted log.
    speed
        ``--speed`` as given (recorded seconds per wall second), or None: the whole log in the duration.
    max_duration_s
        ``--duration`` as given (or ``--quick``'s), or None.
    default_duration_s
        The duration without ``--duration`` (used when ``speed`` is None).
    window_s
        The snapshot window in seconds.
    """
    span = log.span_s
    capped = False
    if speed is None:
        duration = max_duration_s if max_duration_s is not None else default_duration_s
        speed = span / duration if span > 0 else 1.0
    else:
        duration = span / speed if span > 0 else window_s
        if max_duration_s is not None and duration > max_duration_s:
            duration, capped = max_duration_s, True
    offsets = (log.ms - log.ms[0]).astype(np.float64) / 1000.0 / speed
    send = int(np.searchsorted(offsets, duration, side="right")) if capped else len(log)
    first = max(1, int(np.searchsorted(offsets, window_s, side="left")))
    return ReplayPlan(speed, duration, offsets, max(send, 1), first, window_s, capped)


def utc_text(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds and ``Z``."""
    return datetime.fromtimestamp(ms / 1000.0, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log_events(log: RecordedLog, lo: int, hi: int, ts_ms: npt.NDArray[np.int64], suffix: str = "",
               unit: TsUnit = TsUnit.AUTO) -> list[dict[str, object]]:
    """Events ``lo..hi-1`` of the log as ingest events stamped ``ts_ms`` (one per event, the replay clock; written in
    ``unit``, the loop's ``ts_unit``: :func:`geokernel.timestamps.encode_ts`) with their recorded time in
    :data:`RECORDED_TIME_FIELD`; event and entity ids + ``suffix`` (a warm-up copy's)."""
    out: list[dict[str, object]] = []
    for i, ts in zip(range(lo, hi), ts_ms.tolist(), strict=True):
        out.append({"event_id": log.event_id[i] + suffix, "entity_id": log.entity_id[i] + suffix,
                    "ts": encode_ts(int(ts), unit), "lat": float(log.lat[i]), "lon": float(log.lon[i]),
                    RECORDED_TIME_FIELD: utc_text(int(log.ms[i]))})
    return out


def quarantine_bad_rows(s3: Any, bucket: str, log: RecordedLog, now_ms: int) -> str | None:
    """Write the log's bad rows to the loop's quarantine (one object); return its key, None when there are none.

    The key follows the other writers' layout ``quarantine/<writer>/<YYYY-MM-DD>/<epoch_ms>-<id>.jsonl``
    (:func:`~geokernel.contracts.quarantine.lambda_quarantine_key`) with the writer ``replay``, so the report
    counts these records by reason and by writer like the router's and the Spark job's.
    """
    if not log.bad:
        return None
    now = datetime.fromtimestamp(now_ms / 1000.0, UTC)
    at = utc_text(now_ms)
    key = lambda_quarantine_key(QUARANTINE_WRITER, f"{now:%Y-%m-%d}", now_ms, uuid.uuid4().hex[:12])
    body = "".join(json.dumps(b.quarantine(at).to_dict()) + "\n" for b in log.bad)
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return key


def describe(log: RecordedLog, plan: ReplayPlan) -> str:
    """One line on what the replay sends, at what speed, for how long (printed when it starts)."""
    sent = f"{plan.send:,} of {len(log):,} good rows (--duration cut the rest)" if plan.capped else f"{len(log):,} good rows"
    bad = f"; {len(log.bad):,} bad rows to the quarantine {log.bad_by_reason()}" if log.bad else "; no bad row"
    first_s = plan.window_s * plan.speed
    entities = log.entity_id.distinct()
    return (f"replaying recorded log {log.source!r}: {sent}, {entities:,} entities, recorded "
            f"{utc_text(int(log.ms[0]))} .. {utc_text(int(log.ms[-1]))} ({log.span_s / 60:.1f} recorded minutes) at "
            f"{plan.speed:.4g}x: {plan.duration_s:.4g}s of replay, mean {plan.rate:.4g} events/s{bad}; warm-up: the "
            f"log's first window ({plan.first_window:,} events, {first_s:.4g} recorded s) over and over until the first "
            f"spec is active{_one_event_entities(len(log), entities)}{_too_fast(plan)}")


def _one_event_entities(events: int, entities: int) -> str:
    """A note when every event has an entity of its own (no entity column mapped): no state carries over."""
    if events < 2 or entities < events:
        return ""
    return (". NOTE: every event is its own entity (the log has no entity column under the name given: --entity "
            "COL names it), so a stateful transform keeps no state from one event to the next")


def _too_fast(plan: ReplayPlan) -> str:
    """A warning when the mean rate is above :data:`KEEPS_UP_RATE`, with the ``--speed`` that brings it there."""
    if plan.rate <= 1.01 * KEEPS_UP_RATE:  # the speed suggested below, rounded down, plays at up to 1 % above it
        return ""
    return (f". WARNING: above {KEEPS_UP_RATE:.0f} events/s the loop on a 2-core machine falls behind (its router "
            f"routed 600-800 events/s there); --speed {suggested_speed(plan):g} replays this log at about "
            f"{KEEPS_UP_RATE:.0f} events/s")


def suggested_speed(plan: ReplayPlan) -> float:
    """The ``--speed`` (three significant digits, rounded down) at which the plan's log plays at :data:`KEEPS_UP_RATE`."""
    exact = plan.speed * KEEPS_UP_RATE / plan.rate
    step = 10.0 ** (math.floor(math.log10(exact)) - 2)
    return round(math.floor(exact / step) * step, 10)

