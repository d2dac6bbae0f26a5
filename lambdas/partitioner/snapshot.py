"""Read and verify a load snapshot (:mod:`geokernel.contracts.snapshot`; ``docs/CONTRACTS.md``, "Load snapshot").

:func:`parse_manifest` decodes the manifest (its format and fields), :func:`require_complete` refuses a window the
Spark job saw only part of, :func:`verify_manifest` checks its sums (the total row count and the checksum), and
:func:`read_rows` that every listed file exists, each file's sha256 and row count, then returns the rows' CSV bytes. Any failure raises :class:`SnapshotRejected` with a
reason code and a message naming the bad value and the object it came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from geokernel.contracts.errors import ContractError
from geokernel.contracts.snapshot import SNAPSHOT_HEADER, SnapshotManifest, iso, manifest_checksum
from lambdas.runtime.errors import LambdaError
from lambdas.runtime.s3 import ObjectStore
from partitioner.load import csvscan

HEADER = ",".join(SNAPSHOT_HEADER).encode()
#: What every data file's header starts with (a file without costs may stop there).
HEADER_START = ",".join(SNAPSHOT_HEADER[:2]).encode()


class SnapshotRejected(LambdaError):
    """A snapshot that must not be used; ``code`` is the metric reason, the message names the bad value."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True, slots=True)
class Manifest:
    """A structurally checked manifest and where it was read from (``key``, named in every rejection)."""

    key: str
    record: SnapshotManifest


def parse_manifest(raw: bytes, key: str) -> Manifest:
    """Parse and structurally check a manifest; raise SnapshotRejected naming the bad field."""
    try:
        return Manifest(key, SnapshotManifest.from_json(raw, key))
    except ContractError as exc:
        raise SnapshotRejected("malformed_manifest", str(exc)) from None


def require_complete(manifest: Manifest) -> None:
    """Refuse a partial window (``complete: false``): its counts are only the events the job read after it started
    mid-window, a lower bound of the load that would undersize a spec (``partial_window``, naming the reason)."""
    m = manifest.record
    if not m.complete:
        raise SnapshotRejected("partial_window", f"{manifest.key}: window {iso(m.window_start)!r}..{iso(m.window_end)!r} "
                                                 f"is partial ({m.partial_reason!r}): its {float(m.total_events)!r} "
                                                 f"events are a lower bound of the load; no spec is built from it")


def verify_manifest(manifest: Manifest) -> None:
    """Check the manifest's own sums: file rows add up to ``rows``, the checksum matches the file hashes."""
    m = manifest.record
    expected = manifest_checksum([f.sha256 for f in m.files])
    if expected != m.checksum:
        raise SnapshotRejected("checksum_mismatch", f"{manifest.key}: checksum {m.checksum!r} does not match "
                                                    f"its files' sha256 list ({expected!r})")
    listed = sum(f.rows for f in m.files)
    if listed != m.rows:
        raise SnapshotRejected("row_count_mismatch", f"{manifest.key}: 'rows' is {m.rows!r} but its files "
                                                     f"list {listed!r} rows")
    if m.rows == 0 or m.total_events == 0 or not m.files:
        raise SnapshotRejected("empty_snapshot", f"{manifest.key}: no load (rows={m.rows!r}, "
                                                 f"total_events={float(m.total_events)!r})")


def read_rows(store: ObjectStore, manifest: Manifest) -> bytes:
    """Read every data file, verify sha256 and row counts, and return one CSV body (one header) as bytes.

    Rows are not touched one by one: a file's rows are counted and passed on as one slice of
    its bytes (:func:`partitioner.load.read.read_snapshot_rows` parses them, vectorised).
    Whitespace-only lines do not count as rows and are dropped.
    """
    parts: list[bytes] = []
    base = manifest.key.rsplit("/", 1)[0] + "/"
    header: bytes | None = None
    for f in manifest.record.files:
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
        if not file_header.startswith(HEADER_START):
            raise SnapshotRejected("bad_rows", f"{where}: header must start {HEADER_START.decode()!r}, "
                                               f"got {file_header.decode('utf-8', 'replace')!r}")
        if header is not None and file_header != header:
            raise SnapshotRejected("bad_rows", f"{where}: header {file_header.decode('utf-8', 'replace')!r} differs "
                                               f"from the first file's {header.decode('utf-8', 'replace')!r}")
        header = file_header
        if count != f.rows:
            raise SnapshotRejected("row_count_mismatch", f"{where}: {count} rows, the manifest says {f.rows!r}")
        parts.append(rows)
    return b"".join([header if header is not None else HEADER, b"\n", *parts])


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
