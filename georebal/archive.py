"""An archive of events for ``replay``: a local file or folder, or the objects under ``s3://bucket/prefix``.

Each file or object holds JSON events, gzip'd or not (told by its first bytes, not its name): one per line, or back
to back without a separator, as Firehose's default S3 delivery writes the records it was given
(https://docs.aws.amazon.com/firehose/latest/dev/basic-deliver.html); whitespace between them is skipped. Files are
read in name order (Firehose's keys ``YYYY/MM/DD/HH/...`` sort by time), each as a stream (an object is never held
whole). Each event is put as it was archived (its bytes unchanged), with its entity id as partition key (the
deployment's ``event_fields``); an event without a string entity id the router would take is skipped and counted.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from geokernel.contracts.event_fields import EventFields
from georebal.deployment import client_error
from georebal.errors import InputError
from georebal.puts import MAX_KEY_CHARS, MAX_RECORD_BYTES, OutRecord

CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
_SPACE = re.compile(r"\s*")


class Readable(Protocol):
    """A binary stream to read (a file, an S3 object's body, a gunzipped stream)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ArchiveObject:
    """One file or object: its name (``s3://...`` or a path), its size in bytes and how to open it."""

    name: str
    size: int
    open: Callable[[], Readable]


def is_s3(location: str) -> bool:
    return location.startswith("s3://")


def local_objects(location: str) -> list[ArchiveObject]:
    """The file ``location``, or every file under the folder ``location`` (name order)."""
    path = Path(location)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    else:
        raise InputError(f"archive {location!r}: no such file or folder")
    if not files:
        raise InputError(f"archive {location!r}: the folder holds no file")
    return [ArchiveObject(str(p), p.stat().st_size, _opener(p)) for p in files]


def _opener(path: Path) -> Callable[[], Readable]:
    def open_file() -> Readable:
        try:
            return path.open("rb")
        except OSError as exc:
            raise InputError(f"archive {str(path)!r}: cannot read it ({exc.strerror})") from None
    return open_file


def s3_objects(s3: Any, location: str) -> list[ArchiveObject]:
    """The objects under ``s3://bucket/prefix`` (key order)."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    if not bucket:
        raise InputError(f"archive {location!r}: no bucket (s3://bucket/prefix)")
    found: list[tuple[str, int]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found += [(str(o["Key"]), int(o.get("Size", 0))) for o in page.get("Contents", [])
                      if not str(o["Key"]).endswith("/")]
    except ClientError as exc:
        raise InputError(f"archive {location!r}: cannot list it ({client_error(exc)})") from None
    if not found:
        raise InputError(f"archive {location!r}: no object under it")

    def opener(key: str) -> Callable[[], Readable]:
        def open_object() -> Readable:
            try:
                body: Readable = s3.get_object(Bucket=bucket, Key=key)["Body"]
            except ClientError as exc:
                raise InputError(f"archive s3://{bucket}/{key}: cannot read it ({client_error(exc)})") from None
            return body
        return open_object

    return [ArchiveObject(f"s3://{bucket}/{key}", size, opener(key)) for key, size in sorted(found)]


class Counting(io.RawIOBase):
    """A binary stream that counts the bytes read from ``inner`` (the compressed bytes, for progress)."""

    def __init__(self, inner: Readable) -> None:
        self.inner = inner
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[:len(data)] = data
        self.count += len(data)
        return len(data)


def decompressed(raw: Counting) -> Readable:
    """``raw`` itself, or its gunzipped bytes when it starts with the gzip magic number."""
    buffered = io.BufferedReader(raw, CHUNK)
    if buffered.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=buffered, mode="rb")
    return buffered


def json_values(stream: Readable, where: str, max_chars: int = 2 * MAX_RECORD_BYTES) -> Iterator[tuple[Any, str]]:
    """Each JSON value of ``stream`` (UTF-8; one per line or back to back): the value and its text.

    Raises :class:`InputError` naming ``where`` and the record number when a value does not parse."""
    decoder, utf8 = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8")()
    buf, pos, eof, n = "", 0, False, 0

    def more() -> tuple[str, int, bool]:
        try:
            chunk = stream.read(CHUNK)
            return buf[pos:] + utf8.decode(chunk, final=not chunk), 0, not chunk
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise InputError(f"{where}: cannot read record {n + 1} ({type(exc).__name__}: {exc})") from None

    while True:
        pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
        if pos == len(buf):
            if eof:
                return
            buf, pos, eof = more()
            continue
        try:
            value, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if eof or len(buf) - pos > max_chars:
                raise InputError(f"{where}: record {n + 1} is not JSON ({exc.msg}, character {exc.pos - pos + 1} "
                                 f"of the record; only plain or gzip'd JSON is read)") from None
            buf, pos, eof = more()
            continue
        if end == len(buf) and not eof:  # a value may be cut at the chunk's end: read on, then parse it again
            buf, pos, eof = more()
            continue
        n += 1
        yield value, buf[pos:end]
        pos = end


@dataclass(frozen=True)
class Skipped:
    """Events left out: how many, and the first one's place and reason."""

    count: int = 0
    first: str = ""


class Archive:
    """The events of ``objects`` as :class:`OutRecord` s (:meth:`records`); :meth:`fraction` of the bytes read."""

    def __init__(self, objects: list[ArchiveObject], fields: EventFields) -> None:
        self.objects, self.fields = objects, fields
        self.total = sum(o.size for o in objects)
        self._done = 0
        self._current: Counting | None = None
        self.skipped = Skipped()

    def fraction(self) -> float | None:
        if not self.total:
            return None
        return (self._done + (self._current.count if self._current is not None else 0)) / self.total

    def records(self) -> Iterator[OutRecord]:
        entity = self.fields.entity_id
        for obj in self.objects:
            self._current = Counting(obj.open())
            with closing(decompressed(self._current)) as stream:
                for n, (value, text) in enumerate(json_values(stream, obj.name), start=1):
                    key = value.get(entity) if isinstance(value, dict) else None
                    where = f"{obj.name} record {n}"
                    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
                        self._skip(where, f"no {entity!r} the router takes (a string of 1 to {MAX_KEY_CHARS} "
                                          f"characters), got {str(key)[:40]!r}" if isinstance(value, dict)
                                   else f"not a JSON object: {text[:40]!r}")
                        continue
                    yield OutRecord(text.encode(), key, where)
            self._done += obj.size
            self._current = None

    def _skip(self, where: str, why: str) -> None:
        self.skipped = Skipped(self.skipped.count + 1, self.skipped.first or f"{where}: {why}")
