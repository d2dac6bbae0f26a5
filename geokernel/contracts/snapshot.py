"""The load snapshot: the Spark job's rolled-up event counts of one window, read by the partitioner.

Layout under the snapshots root (``docs/CONTRACTS.md``, "Load snapshot")::

    snapshots/window_end=<YYYY-MM-DDTHH-MM-SSZ>/data/part-b<batch:08d>-<n:05d>.csv   (data_file_key)
    snapshots/window_end=<YYYY-MM-DDTHH-MM-SSZ>/_manifest.json                       (written last)

Writer: ``glue_jobs.snapshot.write_snapshot`` (data files with :func:`data_file_bytes`, then
:meth:`SnapshotManifest.to_json`). Readers: the partitioner Lambda (``lambdas.partitioner.snapshot``: the S3 event
filter :func:`is_manifest_key`, then :meth:`SnapshotManifest.from_json` and the files it lists) and the Spark job's
own check (``glue_jobs.snapshot.read_snapshot``). A reader reads exactly the files the manifest lists, never a glob.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from geokernel.contracts.errors import ContractError

SNAPSHOT_FORMAT = "geo-rebalancer.snapshot/1"
SNAPSHOTS_PREFIX = "snapshots/"
MANIFEST_NAME = "_manifest.json"
#: The header of every data file (``cost`` empty when unknown).
SNAPSHOT_HEADER: tuple[str, ...] = ("quadkey", "events", "cost")
#: ``partial_reason`` of a window that began before the job run could read every event of it: the run started on a
#: fresh checkpoint (a first deploy, a lost checkpoint, a new query shape) at the stream's tip, mid-window.
JOB_STARTED_MID_WINDOW = "job_started_mid_window"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def snapshot_prefix(window_end: datetime) -> str:
    """``snapshots/window_end=<YYYY-MM-DDTHH-MM-SSZ>/`` for a window end (a naive datetime is UTC)."""
    ts = window_end.replace(tzinfo=UTC) if window_end.tzinfo is None else window_end.astimezone(UTC)
    return f"{SNAPSHOTS_PREFIX}window_end={ts.strftime('%Y-%m-%dT%H-%M-%SZ')}/"


def data_file_key(prefix: str, batch_id: int, n: int) -> str:
    """The ``n``-th data file a micro-batch writes under a snapshot ``prefix``: ``data/part-b<batch>-<n>.csv``."""
    return f"{prefix}data/part-b{batch_id:08d}-{n:05d}.csv"


def manifest_key(prefix: str) -> str:
    """The manifest of the snapshot under ``prefix`` (with or without its final ``/``)."""
    return prefix.rstrip("/") + "/" + MANIFEST_NAME


def is_manifest_key(key: str) -> bool:
    """True for a snapshot manifest's key (``snapshots/.../_manifest.json``): what the partitioner is invoked on."""
    return key.startswith(SNAPSHOTS_PREFIX) and key.endswith("/" + MANIFEST_NAME)


def iso(ts: datetime) -> str:
    """A manifest's time: ISO-8601 UTC with a ``Z``, milliseconds only when present (naive datetimes are UTC)."""
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ts.microsecond // 1000:03d}" if ts.microsecond else "") + "Z"


@dataclass(frozen=True, slots=True, order=True)
class SnapshotRow:
    """One data-file row: a quadkey, its event count and its cost (None when unknown); rows sort by quadkey."""

    quadkey: str
    events: int
    cost: float | None


def format_cost(cost: float | None) -> str:
    """CSV text of a cost: empty when unknown, else a round-trippable float."""
    if cost is None or (isinstance(cost, float) and math.isnan(cost)):
        return ""
    return repr(float(cost))


def data_file_bytes(rows: Sequence[SnapshotRow]) -> bytes:
    """One data file: the :data:`SNAPSHOT_HEADER` line, then one ``quadkey,events,cost`` line per row."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SNAPSHOT_HEADER)
    for r in rows:
        w.writerow((r.quadkey, int(r.events), format_cost(r.cost)))
    return buf.getvalue().encode()


def manifest_checksum(file_hashes: Sequence[str]) -> str:
    """sha256 hex of the concatenated file sha256 hex strings, in manifest order."""
    return hashlib.sha256("".join(file_hashes).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """One listed data file: its full object key (storage prefix included), row count and sha256 hex."""

    key: str
    rows: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "rows": self.rows, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class SnapshotManifest:
    """``_manifest.json``: the window, the zooms, the totals and every data file with its sha256.

    ``total_events`` is the sum of ``events`` over the rows at ``grid_zoom``; ``checksum`` is
    :func:`manifest_checksum` of the files' sha256 in order. ``refine_events`` and ``batch_id`` are None only in a
    manifest that lacks them (the partitioner does not need them).

    ``partial_reason`` is None for a complete window (stored without the field, as every manifest written before
    it existed: byte for byte the same); for a window the job saw only part of, a code such as
    :data:`JOB_STARTED_MID_WINDOW`, stored as ``"complete": false, "partial_reason": <code>``. Its counts are a
    lower bound of the window's load: the partitioner never builds a spec from it.
    """

    window_start: datetime
    window_end: datetime
    grid_zoom: int
    zoom: int
    refine_events: int | None
    rows: int
    total_events: float
    has_cost: bool
    batch_id: int | None
    files: tuple[SnapshotFile, ...]
    checksum: str
    partial_reason: str | None = None

    @property
    def complete(self) -> bool:
        """True unless the job saw only part of the window (``partial_reason`` says why)."""
        return self.partial_reason is None

    @property
    def window_end_iso(self) -> str:
        """Canonical UTC ``YYYY-MM-DDTHH:MM:SSZ`` of the window end (sorts lexicographically)."""
        return self.window_end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON object, in the field order of the stored file (``complete`` and ``partial_reason``
        only for a partial window)."""
        partial = {} if self.complete else {"complete": False, "partial_reason": self.partial_reason}
        return {"format": SNAPSHOT_FORMAT, "window_start": iso(self.window_start), "window_end": iso(self.window_end),
                "grid_zoom": self.grid_zoom, "zoom": self.zoom, "refine_events": self.refine_events,
                "rows": self.rows, "total_events": self.total_events, "has_cost": self.has_cost,
                "batch_id": self.batch_id, **partial, "files": [f.to_dict() for f in self.files],
                "checksum": self.checksum}

    def to_json(self) -> bytes:
        """The stored bytes: two-space indented JSON and a final newline."""
        return (json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n").encode()

    @classmethod
    def from_json(cls, raw: bytes | str, where: str) -> SnapshotManifest:
        """Parse and structurally check a manifest read from ``where``.

        Raises
        ------
        ContractError
            Naming ``where``, the field and the bad value (the sums are checked by the reader, against the files).
        """
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ContractError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ContractError(f"{where}: expected a JSON object, got {type(doc).__name__}")
        return cls.from_dict(doc, where)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str) -> SnapshotManifest:
        """:meth:`from_json` of an already parsed JSON object."""
        if doc.get("format") != SNAPSHOT_FORMAT:
            raise ContractError(f"{where}: 'format' must be {SNAPSHOT_FORMAT!r}, got {doc.get('format')!r}")
        start, end = _time(doc.get("window_start"), "window_start", where), _time(doc.get("window_end"), "window_end",
                                                                                  where)
        if end < start:
            raise ContractError(f"{where}: window_end {doc['window_end']!r} is before window_start "
                                f"{doc['window_start']!r}")
        total = doc.get("total_events")
        if isinstance(total, bool) or not isinstance(total, int | float) or not total >= 0:
            raise ContractError(f"{where}: 'total_events' must be a number >= 0, got {total!r}")
        has_cost = doc.get("has_cost", False)
        if not isinstance(has_cost, bool):
            raise ContractError(f"{where}: 'has_cost' must be true or false, got {has_cost!r}")
        files = _files(doc.get("files"), where)
        checksum = doc.get("checksum")
        if not isinstance(checksum, str) or not _HEX64.match(checksum):
            raise ContractError(f"{where}: 'checksum' must be 64 hex digits, got {checksum!r}")
        return cls(start, end, _count(doc, "grid_zoom", where), _count(doc, "zoom", where),
                   _optional_count(doc, "refine_events"), _count(doc, "rows", where), total, has_cost,
                   _optional_count(doc, "batch_id"), files, checksum, _partial_reason(doc, where))


def _partial_reason(doc: Mapping[str, Any], where: str) -> str | None:
    """``partial_reason`` of a manifest: None when ``complete`` is absent or true (a manifest without the field is
    a complete window), the non-empty code when ``complete`` is false."""
    complete, reason = doc.get("complete", True), doc.get("partial_reason")
    if not isinstance(complete, bool):
        raise ContractError(f"{where}: 'complete' must be true or false, got {complete!r}")
    if complete:
        if reason is not None:
            raise ContractError(f"{where}: a complete window has no 'partial_reason', got {reason!r}")
        return None
    if not isinstance(reason, str) or not reason:
        raise ContractError(f"{where}: a window with complete=false needs a non-empty 'partial_reason', got {reason!r}")
    return reason


def _time(v: Any, field: str, where: str) -> datetime:
    if not isinstance(v, str):
        raise ContractError(f"{where}: {field!r} must be an ISO-8601 string, got {v!r}")
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        raise ContractError(f"{where}: {field!r} is not ISO-8601: {v!r}") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _count(doc: Mapping[str, Any], field: str, where: str) -> int:
    v = doc.get(field)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ContractError(f"{where}: {field!r} must be a non-negative integer, got {v!r}")
    return v


def _optional_count(doc: Mapping[str, Any], field: str) -> int | None:
    v = doc.get(field)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _files(raw_files: Any, where: str) -> tuple[SnapshotFile, ...]:
    if not isinstance(raw_files, list):
        raise ContractError(f"{where}: 'files' must be a list, got {raw_files!r}")
    files = []
    for i, f in enumerate(raw_files):
        fw = f"{where} files[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("key"), str) or not f["key"]:
            raise ContractError(f"{fw}: needs a non-empty 'key', got {f!r}")
        sha = f.get("sha256")
        if not isinstance(sha, str) or not _HEX64.match(sha):
            raise ContractError(f"{fw}: 'sha256' must be 64 hex digits, got {sha!r}")
        files.append(SnapshotFile(f["key"], _count(f, "rows", fw), sha))
    return tuple(files)
