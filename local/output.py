"""Reads what came out: enriched records, quarantine records, and derives the checks.

* Enriched output (CONTRACTS): ``s3://<output>/enriched/dt=<YYYY-MM-DD>/hour=<HH>/v<version>-<worker>-<written_ms>-
  <seq>.jsonl.gz`` (:func:`geokernel.contracts.enriched.enriched_key`), gzip'd JSON lines, each a record with
  ``event_id``, ``spec_version``, ``partition_id``, ``worker_id`` and the event's own fields (``ts`` among them).
  Delivery is at-least-once; consumers dedupe by ``event_id``. A flush of a slot writes one object per event hour
  and names it by the write time (``written_ms``), so the key says *when* the worker did the work:
  :mod:`local.report.worker_load` counts utilisation from it. A record whose event time is not of its folder's hour
  is a problem (it fails delivery). Each line becomes an :class:`OutRecord` (what the report counts) and a
  :class:`Processed` (what the swap checks read: entity, process, zoom-12 cell).
* Quarantine: JSON lines ``{"reason": "<code>: <detail>", "raw", "source", "quarantined_at"}``
  anywhere in the quarantine bucket: the aggregation job writes under ``glue_jobs/`` (the
  local run's ``--quarantine`` root), Lambdas under ``quarantine/<source>/`` (the router).

:func:`delivery` compares the ids sent with the ids out after dedupe: lost, unexpected
(an id nobody sent) and duplicate counts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.enriched import (
    ENRICHED_PREFIX,
    EnrichedKey,
    EnrichedRecord,
    decode_lines,
    event_hour,
    hour_prefix,
    parse_enriched_key,
)
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.geo.tiles import quadkey, tile
from geokernel.timestamps import event_time_ms

CELL_ZOOM = 12  # the swap checks look at zoom-12 cells (:mod:`local.report.swap_checks`)


@dataclass(frozen=True)
class OutRecord:
    """The fields of one enriched record the report needs.

    ``ts_ms`` is the event's send time (its ``ts`` as the worker read it: the record's ``ts_ms``,
    :func:`geokernel.timestamps.event_time_ms`); ``written_ms`` is when the worker wrote the object holding it (from
    the object key), i.e. when the worker processed it.
    """

    event_id: str
    version: int
    worker: str
    partition: str
    ts_ms: int
    written_ms: int
    owner: str = ""  # the worker process (``<host>:<pid>:<random>``); one process may serve a slot across versions


@dataclass(frozen=True)
class Processed:
    """One enriched record as the checks need it (``processed_ms``: when its batch was processed, epoch ms)."""

    event_id: str
    entity: str
    version: int
    worker: str
    owner: str
    processed_ms: int
    cell: str
    sent_ms: int | None = None  # the event's time as the worker read it (``ts_ms``: the local loop's send time)
    lon: float = 0.0
    lat: float = 0.0

    @classmethod
    def from_record(cls, record: EnrichedRecord, processed_ms: int | None = None) -> Processed:
        """From a decoded enriched record; ``processed_ms`` defaults to its ``processed_at``.

        Raises ``KeyError``/``ValueError``/``TypeError`` on a record without the event's fields (``entity_id``,
        ``lon``, ``lat``), the owner or a processing time (the caller reports it).
        """
        when = processed_ms if processed_ms is not None else record.processed_at
        if when is None or record.owner is None:
            raise KeyError("processed_at" if when is None else "owner")
        lon, lat = float(record.fields["lon"]), float(record.fields["lat"])
        try:
            sent: int | None = event_time_ms(record.fields)
        except ValueError:
            sent = None
        return cls(record.event_id, str(record.fields["entity_id"]), record.spec_version, record.worker_id,
                   record.owner, when, quadkey(tile(lon, lat, CELL_ZOOM)), sent, lon, lat)


def read_jsonl_objects(s3: Any, bucket: str, prefix: str) -> Iterable[tuple[str, str]]:
    """Yield ``(key, line)`` for every non-empty line of every object under ``prefix``."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode("utf-8", "replace")
            for line in body.splitlines():
                if line.strip():
                    yield obj["Key"], line


class EnrichedReader:
    """Reads enriched output incrementally (objects are immutable: each key is read once)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.keys: set[str] = set()
        self.records: list[OutRecord] = []
        self.ids: set[str] = set()
        self.first_written: dict[str, float] = {}  # event_id -> epoch s its first copy was written (the object key's)
        self.problems: list[str] = []
        self.processed: list[Processed] = []  # what the swap checks read (local.report.swap_checks): entity, process, cell
        self.enriched: list[EnrichedRecord] = []  # every record as written (local.oracle compares the fields)

    def refresh(self) -> int:
        """Read objects not read yet; return how many records they held."""
        before = len(self.records)
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=ENRICHED_PREFIX)
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key in self.keys:
                    continue
                self.keys.add(key)
                try:
                    where = parse_enriched_key(key)
                    lines = decode_lines(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read(), key)
                except ValueError as exc:
                    self.problems.append(str(exc))
                    continue
                for line in lines:
                    self._parse(key, line, where)
        return len(self.records) - before

    def _parse(self, key: str, line: str, where: EnrichedKey) -> None:
        try:
            doc = json.loads(line)
            if not isinstance(doc, dict):
                raise TypeError(f"a line is a JSON object, got {type(doc).__name__}")
            r = EnrichedRecord.from_dict(doc, key)
            rec = OutRecord(r.event_id, r.spec_version, r.worker_id, r.partition_id, event_time_ms(r.fields),
                            where.written_ms, r.owner or "")
        except (ValueError, KeyError, TypeError) as exc:
            self.problems.append(f"{key}: enriched line unreadable ({type(exc).__name__}: {exc}): {line[:120]!r}")
            return
        if event_hour(rec.ts_ms) != where.hour_ms:
            self.problems.append(f"{key}: event {rec.event_id!r} of time {rec.ts_ms} belongs in "
                                 f"{hour_prefix(rec.ts_ms)!r}")
        try:
            self.processed.append(Processed.from_record(r, where.written_ms))
        except (ValueError, KeyError, TypeError) as exc:
            self.problems.append(f"{key}: enriched line lacks the swap fields ({type(exc).__name__}: {exc})")
        self.records.append(rec)
        self.enriched.append(r)
        self.ids.add(rec.event_id)
        self.first_written[rec.event_id] = min(where.written_ms / 1000,
                                               self.first_written.get(rec.event_id, float("inf")))


@dataclass(frozen=True)
class Quarantined:
    """Quarantine records grouped by reason code, and by the component (key prefix) that wrote them."""

    by_reason: dict[str, int]
    by_writer: dict[str, int]
    total: int
    samples: list[str]


def read_quarantine(s3: Any, bucket: str) -> Quarantined:
    """Count quarantine records by reason code (the text before ``:``) and by writer prefix."""
    reasons: Counter[str] = Counter()
    writers: Counter[str] = Counter()
    samples: list[str] = []
    for key, line in read_jsonl_objects(s3, bucket, ""):
        try:
            doc = json.loads(line)
            record = QuarantineRecord.from_dict(doc if isinstance(doc, dict) else {}, key)
            code, reason = record.code, record.reason
        except ValueError:  # not JSON, or no reason (ContractError)
            code = reason = "unreadable quarantine line"
        reasons[code] += 1
        parts = key.split("/")
        writers[parts[1] if parts[0] == "quarantine" and len(parts) > 2 else parts[0]] += 1
        if len(samples) < 12:
            samples.append(reason[:140])
    return Quarantined(dict(reasons), dict(writers), sum(reasons.values()), samples)


@dataclass(frozen=True)
class Delivery:
    """Events in vs events out after dedupe by ``event_id``."""

    sent: int
    out_records: int
    out_unique: int
    lost: int
    unexpected: int
    duplicates: int
    lost_sample: tuple[str, ...]
    unexpected_sample: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.unexpected == 0


def delivery(sent_ids: Iterable[str], records: list[OutRecord]) -> Delivery:
    """Compare what was sent with what came out (see :class:`Delivery`)."""
    sent = set(sent_ids)
    out = Counter(r.event_id for r in records)
    lost = sorted(sent - out.keys())
    unexpected = sorted(out.keys() - sent)
    return Delivery(sent=len(sent), out_records=len(records), out_unique=len(out), lost=len(lost),
                    unexpected=len(unexpected), duplicates=sum(n - 1 for n in out.values()),
                    lost_sample=tuple(lost[:5]), unexpected_sample=tuple(unexpected[:5]))
