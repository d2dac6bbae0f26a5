"""Event-time windows kept across micro-batches of the single streaming query (one Kinesis read per batch).

The job reads each source with **one** streaming query whose foreachBatch writes the quarantine and the
snapshots (:func:`glue_jobs.batch.stream_batch_fn`). A stateful Spark aggregation would need a second query
on the same stream (its foreachBatch only sees aggregated rows, not the bad records), i.e. a second reader
per shard: twice the GetRecords calls against the 5 reads/s and 2 MB/s per shard shared by every consumer
(https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html), and two checkpoints. The
Kinesis connector the EMR job uses says to read once and cache the micro-batch instead ("If two jobs need
to read from the same Kinesis stream at the same time, the Spark application should cache the dataframe",
https://github.com/awslabs/spark-sql-kinesis-connector README "Avoid race conditions"; the EMR release guide
points to it: https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark-structured-streaming-kinesis.html),
and Glue's streaming entry point is one ``forEachBatch`` over the source frame
(https://docs.aws.amazon.com/glue/latest/dg/glue-streaming-concepts.html).

So the windowing of Spark's append mode is done here, per micro-batch, with the same rules:

* the **watermark** is ``max(event time seen) - delay`` (milliseconds, as Spark's), never moving back;
* a batch's (window, cell) count whose window ended at or before the watermark in effect before the batch
  is **late**: not counted, and reported (``late_events``);
* after the batch, every window that ended at or before the new watermark is **final**: handed to ``emit``
  once; the others stay open.

State layout under ``root`` (the job's checkpoint root + ``/windows``): two parquet slots ``slot=0``,
``slot=1`` holding the open windows' counts (``window_start, window_end, quadkey, events``), and
``_state.json`` naming the committed version (batch id, slot, rows, max event time, watermark) and the one
before it. Batch ``N`` starts from the newest version older than ``N``, writes its open windows into the
other slot, emits, then replaces ``_state.json`` (one atomic PUT / rename). A batch Spark re-runs after a
crash (same id, same records, from the offset log) therefore starts from the same version and emits the
same windows, which the snapshot writer skips as unchanged.

**Where the run started.** ``_state.json`` also holds ``complete_from_ms``: the time from which this checkpoint's
query reads every event of the stream (:func:`complete_from_ms`). The first batch on a fresh checkpoint (no
``_state.json``: a first deploy, a lost checkpoint, a new query shape) sets it, after its records were read; a
run resumed from the checkpoint keeps it. A window that started before it misses the events the stream held
before the run started reading, so the snapshot writer marks it partial (:func:`partial_reason`; CONTRACTS.md
"Load snapshot") and the partitioner builds no spec from it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from geokernel.contracts.snapshot import JOB_STARTED_MID_WINDOW
from glue_jobs.errors import AggregationError
from glue_jobs.snapshot import storage_for

STATE_FORMAT = "geo-rebalancer.window-state/1"
STATE_KEY = "_state.json"
FINE_SCHEMA = "window_start timestamp, window_end timestamp, quadkey string, events long"
_INTERVAL = re.compile(r"^\s*(\d+)\s+(millisecond|second|minute|hour|day)s?\s*$")
_UNIT_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
#: Starting positions of a Kinesis source on a fresh checkpoint that read the stream from its oldest record.
FROM_OLDEST = ("TRIM_HORIZON", "EARLIEST")
#: The starting position that reads from the stream's tip: the records already in the stream are never read.
FROM_TIP = "LATEST"


class WindowStateError(AggregationError):
    """The window state does not belong to this query's checkpoint."""


def interval_ms(text: str, where: str = "interval") -> int:
    """Milliseconds of a Spark interval string ``<n> <unit>`` (as :func:`parse_duration` makes them).

    Raises
    ------
    ValueError
        Naming ``where`` and ``text`` for any other form.
    """
    m = _INTERVAL.match(text)
    if not m:
        raise ValueError(f"{where}: expected '<n> milliseconds|seconds|minutes|hours|days', got {text!r}")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def complete_from_ms(starting_position: str, now_ms: int) -> int:
    """Epoch ms from which a query on a fresh checkpoint reads every event of the stream.

    0 for a source that starts at the stream's oldest record (:data:`FROM_OLDEST`: Glue's readers, the local
    source by default); ``now_ms`` for one that starts at its tip (:data:`FROM_TIP`, the EMR job's
    ``--starting-position``): the caller passes a time at or after the moment the source resolved its starting
    offsets (the first batch, once its records were read), so every window starting at or after it is complete.

    Raises
    ------
    ValueError
        Naming the starting position, when it is none of those.
    """
    position = starting_position.upper()
    if position in FROM_OLDEST:
        return 0
    if position == FROM_TIP:
        return now_ms
    raise ValueError(f"starting position must be one of {(*FROM_OLDEST, FROM_TIP)!r}, got {starting_position!r}")


def partial_reason(window_start_ms: int, complete_from: int) -> str | None:
    """:data:`~geokernel.contracts.snapshot.JOB_STARTED_MID_WINDOW` for a window that started before the run read
    every event (``complete_from``, :func:`complete_from_ms`), None for a complete one."""
    return JOB_STARTED_MID_WINDOW if window_start_ms < complete_from else None


class WindowMark(NamedTuple):
    """One committed version of the open windows."""

    batch: int
    slot: int
    rows: int
    max_event_ms: int | None
    watermark_ms: int

    def as_json(self) -> dict[str, Any]:
        return self._asdict()


#: The state before the first batch: no event seen, watermark at the epoch (Spark's initial value).
INITIAL = WindowMark(-1, 1, 0, None, 0)


class WindowStep(NamedTuple):
    """What one micro-batch did to the windows."""

    batch: int
    late_events: int
    final_windows: int
    open_rows: int
    watermark_ms: int
    complete_from_ms: int = 0


class WindowStore:
    """The open windows of one streaming query (see the module docstring).

    Parameters
    ----------
    root : str
        Local directory or ``s3://`` URI the Spark runtime and boto3 can both write.
    delay : str
        The watermark delay, a Spark interval string (``WindowSpec.watermark``).
    starting_position : str
        Where the query's source starts on a fresh checkpoint (:func:`complete_from_ms`).
    clock : callable
        Epoch seconds (the time a fresh checkpoint's first batch records).

    Attributes
    ----------
    complete_from_ms : int or None
        The checkpoint's :func:`complete_from_ms`, known from the first :meth:`advance` of this store on.
    """

    def __init__(self, root: str, delay: str, *, starting_position: str = FROM_OLDEST[0],
                 clock: Callable[[], float] = time.time) -> None:
        self.root = root.rstrip("/")
        self.delay_ms = interval_ms(delay, "watermark")
        complete_from_ms(starting_position, 0)  # a bad position fails here, before any batch
        self.starting_position = starting_position
        self.complete_from_ms: int | None = None
        self._clock = clock
        self._meta = storage_for(self.root)

    def base(self, batch_id: int) -> WindowMark:
        """The version batch ``batch_id`` starts from: the newest committed one older than it."""
        return self._base(self._state(), batch_id)

    def _state(self) -> dict[str, Any] | None:
        """The committed ``_state.json``, or None on a fresh checkpoint."""
        body = self._meta.get(STATE_KEY)
        if body is None:
            return None
        doc: dict[str, Any] = json.loads(body)
        if doc.get("format") != STATE_FORMAT:
            raise WindowStateError(f"{self._meta.uri(STATE_KEY)}: format {doc.get('format')!r}, "
                                   f"expected {STATE_FORMAT!r}")
        return doc

    def _base(self, doc: dict[str, Any] | None, batch_id: int) -> WindowMark:
        if doc is None:
            return INITIAL
        for mark in (doc["current"], doc["previous"]):
            if mark["batch"] < batch_id:
                return WindowMark(**mark)
        raise WindowStateError(f"{self._meta.uri(STATE_KEY)}: window state of batch {doc['current']['batch']} "
                               f"is newer than batch {batch_id}: the state belongs to another checkpoint")

    def advance(self, spark: SparkSession, fine: DataFrame, batch_max_ms: int | None, batch_id: int,
                emit: Callable[[DataFrame], object]) -> WindowStep:
        """Merge one batch's counts, hand the windows it closes to ``emit``, commit the rest.

        Parameters
        ----------
        fine : DataFrame
            The batch's ``window_start, window_end, quadkey, events`` (static).
        batch_max_ms : int or None
            Latest event time in the batch (epoch ms), None when it has no valid event.
        emit : callable
            Receives the final windows' rows (same columns); called once, before the commit. It may read
            :attr:`complete_from_ms` (set by then) to mark the windows that started before it.
        """
        doc = self._state()
        base = self._base(doc, batch_id)
        # a fresh checkpoint's first batch: its records were read (the caller counted them), so the source has
        # resolved its starting offsets by now; a state written before the field: complete, as it was then
        self.complete_from_ms = (complete_from_ms(self.starting_position, int(self._clock() * 1000)) if doc is None
                                 else int(doc.get("complete_from_ms", 0)))
        end_ms = F.unix_millis("window_end")
        # the committed rows hold only windows that ended after the base's watermark, so the merged rows that ended
        # at or before it are this batch's late counts: counted by the same job as the sizes, never written or
        # emitted (one Spark job and one cached frame fewer per micro-batch than filtering the batch first)
        merged = (self._read(spark, base).unionByName(fine.select("window_start", "window_end", "quadkey", "events"))
                  .groupBy("window_start", "window_end", "quadkey").agg(F.sum("events").alias("events"))
                  .persist())
        try:
            seen = [m for m in (base.max_event_ms, batch_max_ms) if m is not None]
            max_ms = max(seen) if seen else None
            watermark = base.watermark_ms if max_ms is None else max(base.watermark_ms, max_ms - self.delay_ms)
            slot = 1 - base.slot
            merged.where(end_ms > watermark).write.mode("overwrite").parquet(f"{self.root}/slot={slot}")
            on_time = end_ms > base.watermark_ms
            sizes = merged.agg(F.count(F.when(end_ms > watermark, 1)),
                               F.count_distinct(F.when(on_time & (end_ms <= watermark), F.col("window_end"))),
                               F.sum(F.when(~on_time, F.col("events")))).first()
            rows, windows, late_events = ((int(sizes[0]), int(sizes[1]), int(sizes[2] or 0)) if sizes is not None
                                          else (0, 0, 0))
            if windows:
                emit(merged.where(on_time & (end_ms <= watermark)))
            self._commit(base, WindowMark(batch_id, slot, rows, max_ms, watermark))
        finally:
            merged.unpersist()
        return WindowStep(batch_id, late_events, windows, rows, watermark, self.complete_from_ms)

    def _read(self, spark: SparkSession, mark: WindowMark) -> DataFrame:
        if mark.rows == 0:
            return spark.createDataFrame([], FINE_SCHEMA)
        return spark.read.schema(FINE_SCHEMA).parquet(f"{self.root}/slot={mark.slot}")

    def _commit(self, previous: WindowMark, current: WindowMark) -> None:
        doc = {"format": STATE_FORMAT, "current": current.as_json(), "previous": previous.as_json(),
               "complete_from_ms": self.complete_from_ms}
        self._meta.put(STATE_KEY, json.dumps(doc, sort_keys=True).encode(), "application/json")
