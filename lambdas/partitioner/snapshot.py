"""Read and verify a load snapshot (``docs/CONTRACTS.md``, "Load snapshot").

:func:`read_verified_snapshot` checks the manifest's format and fields, that every listed file
exists, each file's sha256 and row count, the total row count and the manifest checksum, then
returns the manifest and the rows' CSV bytes. Any failure raises :class:`SnapshotRejected` with a
reason code and a message naming the bad value and the object it came from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lambdas.common.errors import LambdaError
from lambdas.common.s3 import ObjectStore
from partitioner.load import csvscan

SNAPSHOT_FORMAT = "geo-rebalancer.snapshot/1"
HEADER = "quadkey,events,cost"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class SnapshotRejected(LambdaError):
    """A snapshot that must not be used; ``code`` is the metric reason, the message names the bad value."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True)
class SnapshotFile:
    key: str
    rows: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A parsed, structurally checked manifest."""

    key: str
    window_start: datetime
    window_end: datetime
    grid_zoom: int
    zoom: int
    rows: int
    total_events: float
    has_cost: bool
    files: tuple[SnapshotFile, ...]
    checksum: str

    @property
    def window_end_iso(self) -> str:
        """Canonical UTC ``YYYY-MM-DDTHH:MM:SSZ`` (sorts lexicographically)."""
        return self.window_end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso(v: Any, field: str, where: str) -> datetime:
    if not isinstance(v, str):
        raise SnapshotRejected("malformed_manifest", f"{where}: {field!r} must be an ISO-8601 string, got {v!r}")
    try:
        dt = datetime.fromisoformat(v)
    except ValueError:
        raise SnapshotRejected("malformed_manifest", f"{where}: {field!r} is not ISO-8601: {v!r}") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _int(doc: Mapping[str, Any], field: str, where: str) -> int:
    v = doc.get(field)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SnapshotRejected("malformed_manifest", f"{where}: {field!r} must be a non-negative integer, got {v!r}")
    return v


def parse_manifest(raw: bytes, key: str) -> Manifest:
    """Parse and structurally check a manifest; raise SnapshotRejected naming the bad field."""
    where = key
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotRejected("malformed_manifest", f"{where}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SnapshotRejected("malformed_manifest", f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotRejected("malformed_manifest",
                               f"{where}: 'format' must be {SNAPSHOT_FORMAT!r}, got {doc.get('format')!r}")
    start, end = _iso(doc.get("window_start"), "window_start", where), _iso(doc.get("window_end"), "window_end", where)
    if end < start:
        raise SnapshotRejected("malformed_manifest", f"{where}: window_end {doc['window_end']!r} is before "
                                                     f"window_start {doc['window_start']!r}")
    total = doc.get("total_events")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not total >= 0:
        raise SnapshotRejected("malformed_manifest", f"{where}: 'total_events' must be a number >= 0, got {total!r}")
    has_cost = doc.get("has_cost", False)
    if not isinstance(has_cost, bool):
        raise SnapshotRejected("malformed_manifest", f"{where}: 'has_cost' must be true or false, got {has_cost!r}")
    raw_files = doc.get("files")
    if not isinstance(raw_files, list):
        raise SnapshotRejected("malformed_manifest", f"{where}: 'files' must be a list, got {raw_files!r}")
    files = []
    for i, f in enumerate(raw_files):
        fw = f"{where} files[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("key"), str) or not f["key"]:
            raise SnapshotRejected("malformed_manifest", f"{fw}: needs a non-empty 'key', got {f!r}")
        sha = f.get("sha256")
        if not isinstance(sha, str) or not _HEX64.match(sha):
            raise SnapshotRejected("malformed_manifest", f"{fw}: 'sha256' must be 64 hex digits, got {sha!r}")
        files.append(SnapshotFile(f["key"], _int(f, "rows", fw), sha))
    checksum = doc.get("checksum")
    if not isinstance(checksum, str) or not _HEX64.match(checksum):
        raise SnapshotRejected("malformed_manifest", f"{where}: 'checksum' must be 64 hex digits, got {checksum!r}")
    return Manifest(key, start, end, _int(doc, "grid_zoom", where), _int(doc, "zoom", where), _int(doc, "rows", where),
                    float(total), has_cost, tuple(files), checksum)


def verify_manifest(manifest: Manifest) -> None:
    """Check the manifest's own sums: file rows add up to ``rows``, the checksum matches the file hashes."""
    expected = hashlib.sha256("".join(f.sha256 for f in manifest.files).encode()).hexdigest()
    if expected != manifest.checksum:
        raise SnapshotRejected("checksum_mismatch", f"{manifest.key}: checksum {manifest.checksum!r} does not match "
                                                    f"its files' sha256 list ({expected!r})")
    listed = sum(f.rows for f in manifest.files)
    if listed != manifest.rows:
        raise SnapshotRejected("row_count_mismatch", f"{manifest.key}: 'rows' is {manifest.rows!r} but its files "
                                                     f"list {listed!r} rows")
    if manifest.rows == 0 or manifest.total_events == 0 or not manifest.files:
        raise SnapshotRejected("empty_snapshot", f"{manifest.key}: no load (rows={manifest.rows!r}, "
                                                 f"total_events={manifest.total_events!r})")


def read_rows(store: ObjectStore, manifest: Manifest) -> bytes:
    """Read every data file, verify sha256 and row counts, and return one CSV body (one header) as bytes.

    Rows are not touched one by one: a file's rows are counted and passed on as one slice of
    its bytes (:func:`partitioner.load.read.read_snapshot_rows` parses them, vectorised).
    Whitespace-only lines do not count as rows and are dropped.
    """
    parts: list[bytes] = []
    base = manifest.key.rsplit("/", 1)[0] + "/"
    header: bytes | None = None
    for f in manifest.files:
        key = f.key if "/" in f.key else base + f.key
        where = f"s3://{store.bucket}/{key}"
        body = store.read(key)
        if body is None:
            raise SnapshotRejected("missing_file", f"{manifest.key}: listed file {where} is missing")
        digest = hashlib.sha256(body).hexdigest()
        if digest != f.sha256:
            raise SnapshotRejected("checksum_mismatch", f"{where}: sha256 {digest} does not match "
                                                        f"the manifest's {f.sha256!r}")
        file_header, rows, count = _file_rows(body)
        if not file_header.startswith(b"quadkey,events"):
            raise SnapshotRejected("bad_rows", f"{where}: header must start 'quadkey,events', "
                                               f"got {file_header.decode('utf-8', 'replace')!r}")
        if header is not None and file_header != header:
            raise SnapshotRejected("bad_rows", f"{where}: header {file_header.decode('utf-8', 'replace')!r} differs "
                                               f"from the first file's {header.decode('utf-8', 'replace')!r}")
        header = file_header
        if count != f.rows:
            raise SnapshotRejected("row_count_mismatch", f"{where}: {count} rows, the manifest says {f.rows!r}")
        parts.append(rows)
    return b"".join([header if header is not None else HEADER.encode(), b"\n", *parts])


def _file_rows(body: bytes) -> tuple[bytes, bytes, int]:
    """A data file's header line (stripped), its rows (newline-terminated) and how many non-blank rows it has."""
    if not csvscan.is_plain(body):
        return _text_rows(body)
    buf = csvscan.buffer(body)
    lines = csvscan.split_lines(buf)
    if len(lines.start) == 0:
        return b"", b"", 0
    head = body[int(lines.start[0]):int(lines.end[0])].strip()
    data = lines.take(slice(1, None))
    s, e = csvscan.strip(buf, data.start, data.end)
    blank = s == e
    count = int(len(blank) - np.count_nonzero(blank))
    if not len(data.start):
        return head, b"", 0
    if np.any(blank & (data.end > data.start)):  # whitespace-only lines: drop them (rare)
        keep = np.flatnonzero(~blank)
        return head, b"".join(body[int(data.start[i]):int(data.end[i])] + b"\n" for i in keep), count
    rows = body[int(data.start[0]):]
    return head, rows if rows.endswith(b"\n") else rows + b"\n", count


def _text_rows(body: bytes) -> tuple[bytes, bytes, int]:
    """:func:`_file_rows` for a file that is not plain ASCII CSV: line by line, as text."""
    lines = body.decode("utf-8", errors="replace").splitlines()
    rows = [ln for ln in lines[1:] if ln.strip()]
    text = "".join(ln + "\n" for ln in rows)
    return (lines[0].strip() if lines else "").encode(), text.encode(), len(rows)
