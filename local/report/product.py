"""OUTPUT AS A DATA PRODUCT: a run keeps its enriched output and snapshots, and a real engine answers "every event
of hour H" from them.

**Kept.** Before moto stops (:func:`local.report.collect.collect_live`), :func:`keep` copies every object of the
output bucket under ``enriched/`` and of the snapshots bucket under ``snapshots/`` to ``<out>/s3/<role>/<key>``
(:data:`KEPT`): the layout a deployment writes, bucket by bucket (``<out>/s3/output/enriched/dt=<YYYY-MM-DD>/
hour=<HH>/v<version>-<worker>-<written_ms>-<seq>.jsonl.gz``, ``<out>/s3/snapshots/snapshots/window_end=.../``).
A quick run's ~20,000 events are a few hundred objects, a few MB: one GET each from the local moto.

**Queried.** :func:`read_hour` opens a pyarrow dataset (JSON format: pyarrow reads ``.gz`` as gzip) over the
folder of hour H only, with Hive partitioning (``dt``, ``hour`` come from the path, as Athena's projection computes
the location instead of listing), reads the stable columns it needs and keeps each event's first copy
(:func:`first_copies`, the order of ``geokernel.contracts.enriched.FIRST_COPY_ORDER``, as the stack's dedupe view
does). No version or worker is listed or named. :func:`answer` does it for every hour the oracle's events fall in
and compares the count with the oracle's (``local.oracle``: the events the single-process reference run expects,
by the hour of their ``ts``); the report prints one line per hour and :func:`check` is an invariant.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.json as pj

from geokernel.contracts.enriched import DT_FORMAT, ENRICHED_PREFIX, FIRST_COPY_ORDER, hour_prefix
from geokernel.contracts.snapshot import SNAPSHOTS_PREFIX

#: What a run keeps: ``<out>/s3/<role>/`` holds the bucket of that role's objects under the prefix.
KEPT: dict[str, str] = {"output": ENRICHED_PREFIX, "snapshots": SNAPSHOTS_PREFIX}
#: The folder of ``<out>`` the kept buckets are in.
KEPT_DIR = "s3"
#: The columns the query reads (the rest of a record is ignored), with the types the JSON reader gives them.
COLUMNS = pa.schema([("event_id", pa.string()), ("processed_at", pa.int64()), ("spec_version", pa.int64()),
                     ("worker_id", pa.string())])
PARTITIONS = pa.schema([("dt", pa.string()), ("hour", pa.string())])
#: The report lists at most this many hours (every hour is compared).
HOUR_LINES = 6
NAME = "every event of each hour once in the kept output, the oracle's count (pyarrow; local/report/product.py)"


@dataclass(frozen=True, slots=True)
class Kept:
    """What :func:`keep` copied of one bucket: its role, the objects and their bytes."""

    role: str
    bucket: str
    objects: int
    bytes: int


def keep(s3: Any, bucket: str, role: str, out: Path) -> Kept:
    """Copy every object of ``bucket`` under ``role``'s prefix (:data:`KEPT`) to ``<out>/s3/<role>/<key>``."""
    dest = out / KEPT_DIR / role
    objects = size = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=KEPT[role]):
        for obj in page.get("Contents", []):
            path = dest / obj["Key"]
            path.parent.mkdir(parents=True, exist_ok=True)
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            path.write_bytes(body)
            objects, size = objects + 1, size + len(body)
    return Kept(role, bucket, objects, size)


def hour_folder(root: Path, hour_ms: int) -> Path:
    """The folder of hour ``hour_ms``'s events under a kept output bucket ``root`` (``<out>/s3/output``)."""
    return root / hour_prefix(hour_ms)


def read_hour(root: Path, hour_ms: int) -> tuple[pa.Table, int]:
    """Every record of hour ``hour_ms`` under the kept output bucket ``root`` (the :data:`COLUMNS` and ``dt``,
    ``hour``), and how many objects held them; an hour without a folder has none."""
    folder = hour_folder(root, hour_ms)
    if not folder.is_dir():
        return pa.Table.from_batches([], COLUMNS), 0
    fmt = ds.JsonFileFormat(parse_options=pj.ParseOptions(explicit_schema=COLUMNS, unexpected_field_behavior="ignore"))
    data = ds.dataset(str(folder), format=fmt, partitioning=ds.partitioning(PARTITIONS, flavor="hive"),
                      partition_base_dir=str(root / ENRICHED_PREFIX), schema=pa.unify_schemas([COLUMNS, PARTITIONS]))
    when = datetime.fromtimestamp(hour_ms / 1000, UTC)
    wanted = (ds.field("dt") == when.strftime(DT_FORMAT)) & (ds.field("hour") == f"{when.hour:02d}")
    return data.to_table(filter=wanted), len(data.files)


def first_copies(table: pa.Table) -> pa.Table:
    """Each ``event_id``'s first copy: the rows sorted by ``event_id`` then ``FIRST_COPY_ORDER``, the first of each."""
    if table.num_rows == 0:
        return table
    rows = table.sort_by([("event_id", "ascending"), *((c, "ascending") for c in FIRST_COPY_ORDER)])
    ids = rows.column("event_id").combine_chunks()
    before = pa.concat_arrays([pa.nulls(1, pa.string()), ids.slice(0, len(ids) - 1)])
    return rows.filter(pc.fill_null(pc.not_equal(ids, before), True))


@dataclass(frozen=True, slots=True)
class HourAnswer:
    """Hour ``hour_ms`` as the query saw it: unique events, the records and objects read, the query's seconds, and
    the oracle's count."""

    hour_ms: int
    events: int
    records: int
    objects: int
    seconds: float
    oracle: int

    @property
    def label(self) -> str:
        return datetime.fromtimestamp(self.hour_ms / 1000, UTC).strftime("%Y-%m-%dT%H:00Z")

    @property
    def ok(self) -> bool:
        return self.events == self.oracle and self.records >= self.events

    def line(self) -> str:
        return (f"hour {self.label}: {self.events:,} events (pyarrow, {self.seconds:.2f} s); the oracle's count "
                f"{self.oracle:,}{'' if self.ok else '  <- DIFFERS'} ({self.records:,} records in {self.objects} "
                f"objects: {self.records - self.events:,} copies removed)")


def answer(root: Path, oracle_hours: Mapping[int, int]) -> list[HourAnswer]:
    """Query every hour of ``oracle_hours`` (hour start, epoch ms -> the oracle's count) under the kept output
    bucket ``root``, timing each query (read, dedupe and count)."""
    out: list[HourAnswer] = []
    for hour_ms, expected in sorted(oracle_hours.items()):
        started = time.perf_counter()
        table, objects = read_hour(root, hour_ms)
        events = first_copies(table).num_rows
        out.append(HourAnswer(hour_ms, events, table.num_rows, objects, time.perf_counter() - started, expected))
    return out


@dataclass(frozen=True, slots=True)
class Product:
    """The section's data: what was kept, each hour's answer, and why there is none (``error``)."""

    kept: tuple[Kept, ...]
    hours: tuple[HourAnswer, ...]
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Queried, and every hour matched (a run whose oracle expects no event has no hour to query)."""
        return self.error is None and all(h.ok for h in self.hours)


def product_of(out: Path, kept: Sequence[Kept], oracle_hours: Mapping[int, int] | None) -> Product:
    """Query the run's kept output (``<out>/s3/output``) for the oracle's hours (None: the oracle failed)."""
    if oracle_hours is None:
        return Product(tuple(kept), (), "no oracle to compare with (the reference run failed)")
    if not any(k.role == "output" for k in kept):
        return Product(tuple(kept), (), "the output was not kept (collecting from moto failed: see the timeline)")
    try:
        return Product(tuple(kept), tuple(answer(out / KEPT_DIR / "output", oracle_hours)))
    except (OSError, pa.ArrowException) as exc:
        return Product(tuple(kept), (), f"the query failed: {type(exc).__name__}: {exc}")


def section(p: Product, out: Path) -> list[str]:
    """The report's OUTPUT AS A DATA PRODUCT section."""
    where = {k.role: f"{k.role} {k.objects:,} objects ({k.bytes / 1e6:.1f} MB) in {KEPT_DIR}/{k.role}/{KEPT[k.role]}"
             for k in p.kept}
    lines = [f"OUTPUT AS A DATA PRODUCT (kept in {out / KEPT_DIR} as a deployment's buckets; each hour read by "
             f"pyarrow from its dt=/hour= folder alone, every event once: local/report/product.py)",
             f"  kept: {', '.join(where.values()) or 'nothing'}"]
    if p.error is not None:
        return [*lines, f"  not queried: {p.error}"]
    lines += [f"  {h.line()}" for h in p.hours[:HOUR_LINES]]
    rest = p.hours[HOUR_LINES:]
    if rest:
        lines.append(f"  ... {len(rest)} more hours, {sum(not h.ok for h in rest)} of them differing")
    return lines


def summary_line(p: Product) -> str:
    """The closing line: the busiest hour's answer (and how the others went)."""
    if p.error is not None:
        return f"OUTPUT AS A DATA PRODUCT: not queried: {p.error}"
    if not p.hours:
        return "OUTPUT AS A DATA PRODUCT: the oracle expects no event, no hour to query"
    top = max(p.hours, key=lambda h: h.oracle)
    others = len(p.hours) - 1
    more = f" (+{others} more hour{'s' if others > 1 else ''}, {sum(not h.ok for h in p.hours if h is not top)} " \
           f"differing)" if others else ""
    return (f"OUTPUT AS A DATA PRODUCT: hour {top.label}: {top.events:,} events (pyarrow, {top.seconds:.2f} s); "
            f"the oracle's count {top.oracle:,}{more}")


def check(p: Product) -> tuple[str, bool, str]:
    """The invariant: every hour's unique events are the oracle's count."""
    if p.error is not None:
        return NAME, False, p.error
    bad = [h for h in p.hours if not h.ok]
    detail = "; ".join(h.line() for h in (bad or list(p.hours))[:3]) or "no hour to query"
    return NAME, p.ok, detail


def to_json(p: Product) -> dict[str, Any]:
    """``report.json`` ``data_product``."""
    return {"kept": [asdict(k) for k in p.kept], "error": p.error, "ok": p.ok,
            "hours": [{**asdict(h), "hour": h.label, "ok": h.ok} for h in p.hours]}
