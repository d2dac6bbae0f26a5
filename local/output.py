"""Reads what came out: enriched records, quarantine records, and derives the checks.

* Enriched output (CONTRACTS): ``s3://<output>/enriched/v<version>/<worker>/<epoch_ms>.jsonl``,
  each line a record with ``event_id``, ``spec_version``, ``partition_id``, ``worker_id``
  and the event's own fields (``ts`` among them). Delivery is at-least-once; consumers
  dedupe by ``event_id``.
* Quarantine: JSON lines ``{"reason": "<code>: <detail>", "raw", "source", "quarantined_at"}``
  anywhere in the quarantine bucket: the aggregation job writes under ``aggregation/`` (the
  local run's ``--quarantine`` root), Lambdas under ``quarantine/<source>/`` (the router).

:func:`delivery` compares the ids sent with the ids out after dedupe: lost, unexpected
(an id nobody sent) and duplicate counts. :func:`utilisation` buckets each worker's events
by their send time into windows and divides by the cap.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutRecord:
    """The fields of one enriched record the report needs."""

    event_id: str
    version: int
    worker: str
    partition: str
    ts_ms: int


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
        self.problems: list[str] = []

    def refresh(self) -> int:
        """Read objects not read yet; return how many records they held."""
        before = len(self.records)
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix="enriched/"):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key in self.keys:
                    continue
                self.keys.add(key)
                body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode("utf-8", "replace")
                for line in body.splitlines():
                    if line.strip():
                        self._parse(key, line)
        return len(self.records) - before

    def _parse(self, key: str, line: str) -> None:
        try:
            r = json.loads(line)
            rec = OutRecord(str(r["event_id"]), int(r["spec_version"]), str(r["worker_id"]),
                            str(r["partition_id"]), _ts_ms(r.get("ts")))
        except (ValueError, KeyError, TypeError) as exc:
            self.problems.append(f"{key}: enriched line unreadable ({type(exc).__name__}: {exc}): {line[:120]!r}")
            return
        self.records.append(rec)
        self.ids.add(rec.event_id)


def _ts_ms(ts: Any) -> int:
    if isinstance(ts, int | float):
        return int(ts)
    import datetime as dt

    return int(dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp() * 1000)


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
            reason = str(json.loads(line).get("reason", "?"))
        except ValueError:
            reason = "unreadable quarantine line"
        reasons[reason.split(":", 1)[0]] += 1
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


@dataclass(frozen=True)
class UtilSeries:
    """Per worker (``v<version>/<worker>``) events per window, windows starting at ``t0_s + i * window_s``."""

    t0_s: float
    window_s: float
    cap: float
    counts: dict[str, list[int]]

    def utilisation(self, key: str) -> list[float]:
        return [n / self.cap for n in self.counts[key]]

    def over_cap_spans(self) -> dict[str, float]:
        """Longest run of consecutive windows over the cap, in seconds, per worker."""
        spans = {}
        for key, series in self.counts.items():
            best = run = 0
            for n in series:
                run = run + 1 if n > self.cap else 0
                best = max(best, run)
            spans[key] = best * self.window_s
        return spans


def utilisation(records: list[OutRecord], window_s: float, cap: float) -> UtilSeries:
    """Count each worker's unique events per send-time window (first processing of an id wins)."""
    if window_s <= 0 or cap <= 0:
        raise ValueError(f"window_s and cap must be > 0, got {window_s!r}, {cap!r}")
    seen: set[str] = set()
    first: list[OutRecord] = []
    for r in sorted(records, key=lambda r: (r.ts_ms, r.version)):
        if r.event_id not in seen:
            seen.add(r.event_id)
            first.append(r)
    if not first:
        return UtilSeries(0.0, window_s, cap, {})
    t0 = min(r.ts_ms for r in first) / 1000.0
    n = int((max(r.ts_ms for r in first) / 1000.0 - t0) // window_s) + 1
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * n)
    for r in first:
        counts[f"v{r.version}/{r.worker}"][int((r.ts_ms / 1000.0 - t0) // window_s)] += 1
    return UtilSeries(t0, window_s, cap, dict(counts))
