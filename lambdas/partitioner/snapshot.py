"""Read and verify a load snapshot (``docs/CONTRACTS.md``, "Load snapshot").

:func:`read_verified_snapshot` checks the manifest's format and fields, that every listed file
exists, each file's sha256 and row count, the total row count and the manifest checksum, then
returns the manifest and the rows' CSV text. Any failure raises :class:`SnapshotRejected` with a
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

from lambdas.common.aws import ObjectStore
from lambdas.common.errors import LambdaError

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


def read_rows(store: ObjectStore, manifest: Manifest) -> str:
    """Read every data file, verify sha256 and row counts, and return one CSV text (one header)."""
    parts: list[str] = [HEADER]
    base = manifest.key.rsplit("/", 1)[0] + "/"
    header: str | None = None
    for f in manifest.files:
        key = f.key if "/" in f.key else base + f.key
        body = store.read(key)
        if body is None:
            raise SnapshotRejected("missing_file", f"{manifest.key}: listed file s3://{store.bucket}/{key} is missing")
        digest = hashlib.sha256(body).hexdigest()
        if digest != f.sha256:
            raise SnapshotRejected("checksum_mismatch", f"s3://{store.bucket}/{key}: sha256 {digest} does not match "
                                                        f"the manifest's {f.sha256!r}")
        text = body.decode("utf-8", errors="replace")
        lines = text.splitlines()
        file_header = lines[0].strip() if lines else ""
        if not file_header.startswith("quadkey,events"):
            raise SnapshotRejected("bad_rows", f"s3://{store.bucket}/{key}: header must start 'quadkey,events', "
                                               f"got {file_header!r}")
        if header is not None and file_header != header:
            raise SnapshotRejected("bad_rows", f"s3://{store.bucket}/{key}: header {file_header!r} differs from "
                                               f"the first file's {header!r}")
        header = file_header
        rows = [ln for ln in lines[1:] if ln.strip()]
        if len(rows) != f.rows:
            raise SnapshotRejected("row_count_mismatch", f"s3://{store.bucket}/{key}: {len(rows)} rows, the "
                                                         f"manifest says {f.rows!r}")
        parts.extend(rows)
    if header is not None:
        parts[0] = header
    return "\n".join(parts) + "\n"
