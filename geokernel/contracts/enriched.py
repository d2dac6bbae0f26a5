"""The geo workers' output: enriched records, gzip'd JSON lines in Hive-style partitions by the events' hour.

Writer: the geo worker (``geo_service.pipeline.records.enriched_record``, flushed by ``geo_service.serving.batches``).
Each flush of a slot's buffer writes one object per **event hour** it holds, at :func:`enriched_key`::

    enriched/dt=<YYYY-MM-DD>/hour=<HH>/v<version>-<worker>-<written_ms>-<seq>.jsonl.gz

``dt`` and ``hour`` are the UTC date and hour of the events' own time (their ``ts``, read by the event rule:
``geokernel.events.event_time_ms``), not of the write: "every event of hour H" is one partition, whatever version
or worker processed it, and a late event (one that reaches a worker after its hour ended) lands in its own hour's
folder when the flush that holds it is written (docs/CONTRACTS.md "Geo worker details"). ``written_ms`` is when the
flush was written (epoch ms: the worker's processing time) and ``seq`` numbers the objects of one flush; the
routing ids stay in every record (``spec_version``, ``worker_id``, ...). The body is JSON lines, gzip-compressed
(:func:`encode_lines`, :func:`decode_lines`).

Readers: downstream consumers (the stack's Glue table over :data:`PARTITION_TEMPLATE` with partition projection,
``infra/catalog.py``; dedupe by ``event_id``: delivery is at-least-once) and the local loop (``local.output``:
delivery, order across swaps and per-worker utilisation from ``written_ms``; ``local.report.product`` queries a
run's kept copy with pyarrow).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from geokernel.contracts.errors import ContractError

#: Every enriched object is under this prefix (the bucket's lifecycle rule, the table's location).
ENRICHED_PREFIX = "enriched/"
#: The partition folders under the bucket as Athena's ``storage.location.template`` names them (``infra/catalog.py``).
PARTITION_TEMPLATE = ENRICHED_PREFIX + "dt=${dt}/hour=${hour}/"
#: ``dt``'s format as ``strftime`` writes it and as Java's DateTimeFormatter reads it (``projection.dt.format``).
DT_FORMAT = "%Y-%m-%d"
DT_JAVA_FORMAT = "yyyy-MM-dd"
#: Milliseconds in one partition (an hour).
HOUR_MS = 3_600_000

_ENRICHED_KEY = re.compile(r"^enriched/dt=(?P<dt>\d{4}-\d{2}-\d{2})/hour=(?P<hour>\d{2})/"
                           r"v(?P<version>\d+)-(?P<worker>[^/]+)-(?P<ms>\d+)-(?P<seq>\d+)\.jsonl\.gz$")
_SHAPE = "enriched/dt=<YYYY-MM-DD>/hour=<HH>/v<version>-<worker>-<written_ms>-<seq>.jsonl.gz"

#: Which of an event's copies is its first (delivery is at-least-once): the one processed first, then by version and
#: slot. Every copy has the event's time, so all are in one hour's folder. The stack's dedupe view (``infra/catalog.py``)
#: and the local run's query (``local.report.product``) keep it.
FIRST_COPY_ORDER: tuple[str, ...] = ("processed_at", "spec_version", "worker_id")
#: The fields the worker adds to every record; they win over an event or transform field of the same name.
ROUTING_FIELDS: tuple[str, ...] = ("event_id", "spec_version", "partition_id", "worker_id", "stray", "owner",
                                   "processed_at")


def event_hour(event_ms: int) -> int:
    """The start (epoch ms) of the UTC hour holding ``event_ms``: the partition an event of that time lands in."""
    return event_ms - event_ms % HOUR_MS


def hour_prefix(event_ms: int) -> str:
    """The folder of the events of ``event_ms``'s hour: ``enriched/dt=<YYYY-MM-DD>/hour=<HH>/``."""
    when = datetime.fromtimestamp(event_hour(event_ms) / 1000, UTC)
    return PARTITION_TEMPLATE.replace("${dt}", when.strftime(DT_FORMAT)).replace("${hour}", f"{when.hour:02d}")


def enriched_key(event_ms: int, version: int, worker_id: str, written_ms: int, seq: int = 0) -> str:
    """The key of the ``seq``-th object a flush of slot ``worker_id`` of ``version`` wrote at ``written_ms``, holding
    the events of ``event_ms``'s hour (see the module docstring); :class:`ContractError` naming a bad worker id."""
    if not worker_id or "/" in worker_id:
        raise ContractError(f"a worker id is not empty and has no '/': {worker_id!r}")
    return f"{hour_prefix(event_ms)}v{version}-{worker_id}-{written_ms}-{seq}.jsonl.gz"


@dataclass(frozen=True, slots=True)
class EnrichedKey:
    """What an :func:`enriched_key` says: the events' hour (``hour_ms``, its start in epoch ms), the slot, when the
    flush was written (``written_ms``) and the object's number in that flush (``seq``)."""

    hour_ms: int
    version: int
    worker_id: str
    written_ms: int
    seq: int


def parse_enriched_key(key: str) -> EnrichedKey:
    """The :class:`EnrichedKey` of an :func:`enriched_key`; :class:`ContractError` naming ``key``."""
    m = _ENRICHED_KEY.match(key)
    try:
        if m is None or not 0 <= int(m["hour"]) <= 23:
            raise ValueError
        day = datetime.strptime(m["dt"], DT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ContractError(f"not an enriched output key ({_SHAPE}): {key!r}") from None
    hour_ms = int(day.timestamp()) * 1000 + int(m["hour"]) * HOUR_MS
    return EnrichedKey(hour_ms, int(m["version"]), m["worker"], int(m["ms"]), int(m["seq"]))


#: The gzip level of an object's body. Level 9 (``gzip.compress``'s default, used before issue #60) took ~12 us per
#: line of the reverse geocoder's records on a shared 2-core machine, more than the rest of the worker's path per
#: event; level 3 takes ~2.3 us for 48 bytes per line instead of 40 (+20 %: at 100,000 events/s, ~0.5 vCPU less for
#: ~3 TB a month more of output, a few USD either way: docs/COST.md). Readers see the same lines.
GZIP_LEVEL = 3


def encode_lines(lines: Sequence[str]) -> bytes:
    """An object's body: the JSON lines, newline-terminated, gzip-compressed at :data:`GZIP_LEVEL` (no file name or
    time in the header, so the same lines give the same bytes)."""
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)


def decode_lines(body: bytes, where: str) -> list[str]:
    """The non-empty lines of an object written by :func:`encode_lines`; :class:`ContractError` naming ``where``."""
    try:
        text = gzip.decompress(body).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ContractError(f"{where}: not gzip'd UTF-8 JSON lines ({type(exc).__name__}: {exc})") from None
    return [line for line in text.splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class EnrichedRecord:
    """One output record: the event's own fields and the transform's (``fields``), then the routing ids.

    ``spec_version`` is the version of the geo stream the event was read from and ``worker_id`` the slot;
    ``partition_id`` the owner of its place in that spec (even for a ``stray``: a place not of this worker's
    partitions); ``owner`` the worker process (``<host>:<pid>:<random>``: one process serves several versions of a
    slot in ``carry`` mode) and ``processed_at`` when its batch was processed (epoch ms).
    """

    event_id: str
    spec_version: int
    partition_id: str
    worker_id: str
    stray: bool
    owner: str | None = None
    processed_at: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: ``fields`` first, then the routing ids (``owner``, ``processed_at`` only when set)."""
        out = {**self.fields, "event_id": self.event_id, "spec_version": self.spec_version,
               "partition_id": self.partition_id, "worker_id": self.worker_id, "stray": self.stray}
        if self.owner is not None:
            out["owner"] = self.owner
        if self.processed_at is not None:
            out["processed_at"] = self.processed_at
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str) -> EnrichedRecord:
        """Decode one line's object; :class:`ContractError` naming ``where`` and the bad value."""
        try:
            owner, processed = doc.get("owner"), doc.get("processed_at")
            return cls(event_id=str(doc["event_id"]), spec_version=int(doc["spec_version"]),
                       partition_id=str(doc["partition_id"]), worker_id=str(doc["worker_id"]),
                       stray=bool(doc.get("stray", False)), owner=None if owner is None else str(owner),
                       processed_at=None if processed is None else int(processed),
                       fields={k: v for k, v in doc.items() if k not in ROUTING_FIELDS})
        except (KeyError, TypeError, ValueError) as exc:
            raise ContractError(f"{where}: not an enriched record ({type(exc).__name__}: {exc})") from None
