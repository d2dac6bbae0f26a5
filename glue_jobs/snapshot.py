"""Snapshot and quarantine writers over a small storage adapter (local directory or S3).

The layout and the records are the contracts :mod:`geokernel.contracts.snapshot` (data files, manifest) and
:mod:`geokernel.contracts.quarantine` (quarantine records) define; under the storage root::

    snapshots/window_end=<YYYY-MM-DDTHH-MM-SSZ>/data/part-b<batch:08d>-<n:05d>.csv
    snapshots/window_end=<YYYY-MM-DDTHH-MM-SSZ>/_manifest.json      (written last)
    quarantine/batch=<batch:08d>/part-<n:05d>.jsonl

Atomicity and idempotence
-------------------------
* Data files are written first, then the manifest, which lists every data file with its
  row count and sha256, plus a checksum over them. A reader starts from the manifest and
  reads only the files it lists, so it never sees a half-written snapshot: before the
  manifest exists there is no snapshot; a snapshot rewritten by a later batch keeps its old
  manifest (and old files, whose keys differ by batch id) until the new manifest replaces
  it in one PUT / rename.
* Content is deterministic (rows sorted by quadkey, fixed part size, fixed key names), so a
  retried batch writes the same keys with the same bytes. When the manifest already holds
  the same checksum and batch id the write is skipped.
* Local writes go to a temporary file in the same directory and are renamed into place
  (``os.replace``), so a local reader also never sees a partial file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from geokernel.contracts.errors import ContractError
from geokernel.contracts.quarantine import QuarantineRecord, batch_quarantine_key
from geokernel.contracts.snapshot import (
    SNAPSHOT_HEADER,
    SnapshotFile,
    SnapshotManifest,
    SnapshotRow,
    data_file_bytes,
    data_file_key,
    format_cost,
    manifest_checksum,
    manifest_key,
    snapshot_prefix,
)
from glue_jobs.errors import AggregationError

DEFAULT_ROWS_PER_FILE = 500_000
T = TypeVar("T")


class SnapshotError(AggregationError):
    """A snapshot is malformed or does not match its manifest."""


class Storage(Protocol):
    """Where snapshots go: keys are ``/``-separated paths under a root."""

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None: ...

    def get(self, key: str) -> bytes | None: ...

    def list(self, prefix: str) -> list[str]: ...

    def uri(self, key: str) -> str: ...


@dataclass(frozen=True)
class LocalStorage:
    """A local directory; writes are atomic renames."""

    root: Path

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"storage key {key!r} must be relative and stay under {str(self.root)!r}")
        return self.root / key

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        """Write ``body`` at ``key`` atomically (temporary file + rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes | None:
        """Bytes at ``key``, or None when absent."""
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (sorted; temporary files excluded)."""
        base = self.root
        if not base.exists():
            return []
        keys = (p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        return sorted(k for k in keys if k.startswith(prefix) and not k.rsplit("/", 1)[-1].startswith(".tmp-"))

    def uri(self, key: str) -> str:
        """Filesystem path of ``key``."""
        return str(self._path(key))


@dataclass(frozen=True)
class S3Storage:
    """An S3 bucket and key prefix (boto3; endpoint from ``AWS_ENDPOINT_URL`` for moto)."""

    bucket: str
    prefix: str = ""
    client: Any = None

    def full_key(self, key: str) -> str:
        """The object key of storage key ``key`` (storage prefix included)."""
        return f"{self.prefix.rstrip('/')}/{key}" if self.prefix else key

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        """PUT ``body`` at ``key`` (a single PUT is atomic in S3)."""
        self.client.put_object(Bucket=self.bucket, Key=self.full_key(key), Body=body, ContentType=content_type)

    def get(self, key: str) -> bytes | None:
        """Bytes at ``key``, or None when absent."""
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self.full_key(key))
        except self.client.exceptions.NoSuchKey:
            return None
        return bytes(obj["Body"].read())

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``, relative to the storage prefix, sorted."""
        full = self.full_key(prefix)
        strip = len(self.full_key(""))
        out: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            out.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        return sorted(out)

    def uri(self, key: str) -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{self.full_key(key)}"


def storage_for(location: str, *, s3_client: Any = None) -> Storage:
    """Storage for ``s3://bucket[/prefix]`` or a local directory path.

    Parameters
    ----------
    location : str
        Where to write. ``s3://`` URIs use boto3 (``AWS_ENDPOINT_URL`` picks moto locally).
    s3_client : optional
        A boto3 S3 client to use instead of creating one.
    """
    if location.startswith("s3://"):
        rest = location[len("s3://"):]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ValueError(f"S3 location {location!r} has no bucket name")
        if s3_client is None:
            import boto3  # entry points only; the transforms never import boto3

            s3_client = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
        return S3Storage(bucket, prefix.strip("/"), s3_client)
    if "://" in location:
        raise ValueError(f"unsupported output location {location!r}: use a local directory or s3://bucket/prefix")
    return LocalStorage(Path(location))


# ---------------------------------------------------------------------------
# Snapshots
# ---------------------------------------------------------------------------


class SnapshotMeta(NamedTuple):
    """What the manifest says about a snapshot besides its files."""

    window_start: datetime
    window_end: datetime
    grid_zoom: int
    zoom: int
    refine_events: int
    batch_id: int
    partial_reason: str | None = None  # None: a complete window (CONTRACTS.md "Load snapshot", partial windows)


class SnapshotResult(NamedTuple):
    """What :func:`write_snapshot` did."""

    prefix: str
    manifest_key: str
    manifest_uri: str
    rows: int
    total_events: int
    rows_per_zoom: dict[int, int]
    skipped: bool
    partial_reason: str | None = None


def _chunks(rows: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for r in rows:
        chunk.append(r)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Tally:
    """Running sums over a snapshot's rows, checking that they come sorted by unique quadkey."""

    def __init__(self, prefix: str, grid_zoom: int) -> None:
        self.prefix = prefix
        self.grid_zoom = grid_zoom
        self.rows = 0
        self.total_events = 0
        self.has_cost = False
        self.per_zoom: dict[int, int] = {}
        self._last: str | None = None

    def add(self, chunk: Sequence[SnapshotRow]) -> None:
        for r in chunk:
            if self._last is not None and r.quadkey <= self._last:
                raise SnapshotError(f"{self.prefix}: rows must be sorted by unique quadkey, got {r.quadkey!r} "
                                    f"after {self._last!r}")
            self._last = r.quadkey
            self.has_cost = self.has_cost or format_cost(r.cost) != ""
            z = len(r.quadkey)
            self.per_zoom[z] = self.per_zoom.get(z, 0) + 1
            if z == self.grid_zoom:
                self.total_events += int(r.events)
        self.rows += len(chunk)


def write_snapshot(storage: Storage, rows: Iterable[SnapshotRow], meta: SnapshotMeta,
                   rows_per_file: int = DEFAULT_ROWS_PER_FILE) -> SnapshotResult:
    """Write one window's snapshot: data files first, ``_manifest.json`` last.

    Parameters
    ----------
    storage : Storage
        Where to write (see :func:`storage_for`).
    rows : iterable of SnapshotRow
        The window's rows, **sorted by quadkey** (the caller sorts; keeps retries byte-identical).
    meta : SnapshotMeta
        Window bounds, zooms, refine threshold and the micro-batch id.
    rows_per_file : int
        Rows per data file.

    Returns
    -------
    SnapshotResult

    Raises
    ------
    SnapshotError
        If ``rows`` is not sorted or holds a duplicate quadkey (the caller's bug, never data).
    """
    prefix = snapshot_prefix(meta.window_end)
    tally = _Tally(prefix, meta.grid_zoom)
    files: list[SnapshotFile] = []
    bodies: list[tuple[str, bytes]] = []
    for i, chunk in enumerate(_chunks(rows, rows_per_file)):
        tally.add(chunk)
        key = data_file_key(prefix, meta.batch_id, i)
        body = data_file_bytes(chunk)
        bodies.append((key, body))
        files.append(SnapshotFile(_full_key(storage, key), len(chunk), hashlib.sha256(body).hexdigest()))
    manifest = SnapshotManifest(meta.window_start, meta.window_end, meta.grid_zoom, meta.zoom, meta.refine_events,
                                tally.rows, tally.total_events, tally.has_cost, meta.batch_id, tuple(files),
                                manifest_checksum([f.sha256 for f in files]), meta.partial_reason)
    return _commit(storage, prefix, bodies, manifest, tally)


def _full_key(storage: Storage, key: str) -> str:
    """The key as a reader of the bucket sees it (storage prefix included)."""
    return storage.full_key(key) if isinstance(storage, S3Storage) else key


def _commit(storage: Storage, prefix: str, bodies: list[tuple[str, bytes]], manifest: SnapshotManifest,
            tally: _Tally) -> SnapshotResult:
    """Put the data files, then the manifest, unless the same batch already wrote this same snapshot."""
    key = manifest_key(prefix)
    skipped = _written_before(storage, key, manifest)
    if not skipped:
        for data_key, body in bodies:
            storage.put(data_key, body, "text/csv")
        storage.put(key, manifest.to_json(), "application/json")
    return SnapshotResult(prefix, key, storage.uri(key), tally.rows, tally.total_events, tally.per_zoom, skipped,
                          manifest.partial_reason)


def _written_before(storage: Storage, key: str, manifest: SnapshotManifest) -> bool:
    """True when the manifest at ``key`` has ``manifest``'s checksum and batch id (a retried batch)."""
    existing = storage.get(key)
    if existing is None:
        return False
    try:
        old = SnapshotManifest.from_json(existing, storage.uri(key))
    except ContractError:
        return False
    return old.checksum == manifest.checksum and old.batch_id == manifest.batch_id


def read_snapshot(storage: Storage, prefix: str) -> tuple[dict[str, Any], str]:
    """Read and verify a snapshot: return its manifest (as a JSON object) and the CSV text of all its rows.

    Raises
    ------
    SnapshotError
        If the manifest is missing or malformed, a listed file is missing, or a sha256,
        row count or the checksum does not match.
    """
    key = manifest_key(prefix)
    raw = storage.get(key)
    if raw is None:
        raise SnapshotError(f"{storage.uri(key)!r}: no manifest (snapshot absent or not yet complete)")
    try:
        manifest = SnapshotManifest.from_json(raw, repr(storage.uri(key)))
    except ContractError as exc:
        raise SnapshotError(str(exc)) from None
    lines = [",".join(SNAPSHOT_HEADER)]
    hashes = []
    for f in manifest.files:
        body = storage.get(_relative_key(storage, f.key))
        if body is None:
            raise SnapshotError(f"{storage.uri(key)!r}: listed file {f.key!r} is missing")
        digest = hashlib.sha256(body).hexdigest()
        if digest != f.sha256:
            raise SnapshotError(f"{f.key!r}: sha256 {digest} does not match the manifest's {f.sha256!r}")
        rows = body.decode().splitlines()[1:]
        if len(rows) != f.rows:
            raise SnapshotError(f"{f.key!r}: {len(rows)} rows, the manifest says {f.rows!r}")
        lines.extend(rows)
        hashes.append(digest)
    if manifest_checksum(hashes) != manifest.checksum:
        raise SnapshotError(f"{storage.uri(key)!r}: checksum {manifest.checksum!r} does not match its files")
    return manifest.to_dict(), "\n".join(lines) + "\n"


def _relative_key(storage: Storage, key: str) -> str:
    if isinstance(storage, S3Storage) and storage.prefix:
        return key[len(storage.prefix.rstrip("/")) + 1:]
    return key


# ---------------------------------------------------------------------------
# Quarantine
# ---------------------------------------------------------------------------


def write_quarantine(storage: Storage, records: Iterable[QuarantineRecord], batch_id: int,
                     rows_per_file: int = DEFAULT_ROWS_PER_FILE) -> list[str]:
    """Write quarantine records as JSON lines under ``quarantine/batch=<id>/``; return the URIs.

    Records should come sorted (by source) so a retried batch writes the same bytes to the
    same keys. Nothing is written for an empty batch.
    """
    uris = []
    for i, chunk in enumerate(_chunks(records, rows_per_file)):
        body = "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in chunk).encode()
        key = batch_quarantine_key(batch_id, i)
        storage.put(key, body, "application/x-ndjson")
        uris.append(storage.uri(key))
    return uris
