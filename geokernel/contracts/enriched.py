"""The geo workers' output: enriched records, JSON lines in one object per slot and flush.

Writer: the geo worker (``geo_service.pipeline.records.enriched_record``, flushed by ``geo_service.serving.batches``) at
:func:`enriched_key`. Readers: downstream consumers (dedupe by ``event_id``: delivery is at-least-once) and the
local loop (``local.output``: delivery, order across swaps and per-worker utilisation, from the key's time).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geokernel.contracts.errors import ContractError

_ENRICHED_KEY = re.compile(r"^enriched/v(?P<version>\d+)/(?P<worker>[^/]+)/(?P<ms>\d+)\.jsonl$")

#: The fields the worker adds to every record; they win over an event or transform field of the same name.
ROUTING_FIELDS: tuple[str, ...] = ("event_id", "spec_version", "partition_id", "worker_id", "stray", "owner",
                                   "processed_at")


def enriched_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """Return the key of one batch of worker output: ``enriched/v<version>/<worker>/<epoch_ms>.jsonl``."""
    return f"enriched/v{version}/{worker_id}/{epoch_ms}.jsonl"


def parse_enriched_key(key: str) -> tuple[int, str, int]:
    """Return ``(version, worker, epoch_ms)`` of an :func:`enriched_key`; :class:`ContractError` naming ``key``."""
    m = _ENRICHED_KEY.match(key)
    if m is None:
        raise ContractError(f"not an enriched output key (enriched/v<version>/<worker>/<epoch_ms>.jsonl): {key!r}")
    return int(m["version"]), m["worker"], int(m["ms"])


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
