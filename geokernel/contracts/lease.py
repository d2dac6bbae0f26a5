"""The leases table: one item per worker slot of a spec version, and one handover summary per swap.

Writers: the geo workers (``geo_service.leases.lease``: conditional claims, heartbeats, flags and checkpoints; the
handover summary: ``geo_service.swap.handover_summary``). Readers: the workers themselves, the deploy controller (green
ready, blue drained: ``lambdas.runtime.dynamodb.LeaseTable``) and the local loop's observer (``local.observe``).
:class:`LeaseRecord` is the one decoder of a lease item (``docs/CONTRACTS.md``, "DynamoDB items").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geokernel.contracts.dynamo import plain_item
from geokernel.contracts.slot import SlotId

#: The key attribute of the leases table.
LEASE_KEY_ATTR = "lease_key"

def handover_key(version: int) -> str:
    """Return the leases-table key of the handover summary of a swap into ``version``: ``handover#v<version>``.

    It never parses as a :class:`~geokernel.contracts.slot.SlotId` (those start with ``v``), so lease readers and
    scans skip it.
    """
    return f"handover#v{version}"


def _time(item: Mapping[str, Any], name: str) -> float | None:
    value = item.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A lease item as the workers write it and the control plane and the local observer read it.

    ``version`` is None only for a key that is not a slot's (:class:`~geokernel.contracts.slot.SlotId`; then
    ``worker_id`` is the whole key). The
    ``*_at`` times (epoch s) are None until the worker wrote them; ``caught_up_at`` is 0 until published.
    """

    worker_id: str
    owner: str | None
    expires_at: float
    ready: bool
    released: bool
    drained: bool
    checkpoint: Mapping[str, str] = field(default_factory=dict)
    #: Epoch s: every record that arrived in the slot's shard before it was processed (``geo_service.swap.handover``).
    caught_up_at: float = 0.0
    version: int | None = None
    claimed_at: float | None = None
    ready_at: float | None = None
    serving_at: float | None = None
    drained_at: float | None = None
    released_at: float | None = None

    def held_by_other(self, owner: str, now: float) -> bool:
        """True while another owner holds it (owner set, not expired): a claim would fail."""
        return self.owner is not None and self.owner != owner and self.expires_at >= now

    def live_and_ready(self, now: float) -> bool:
        """True while its owner holds it unexpired and marked it ready."""
        return bool(self.owner) and self.expires_at > now and self.ready

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LeaseRecord:
        """Decode a lease item of plain values (``KeyError`` when it has no :data:`LEASE_KEY_ATTR`)."""
        key = str(item[LEASE_KEY_ATTR])
        parsed = SlotId.match(key)
        checkpoint = item.get("checkpoint")
        owner = item.get("owner")
        return cls(
            worker_id=parsed.worker_id if parsed else key,
            owner=None if owner is None else str(owner),
            expires_at=float(item.get("expires_at") or 0),
            ready=bool(item.get("ready", False)),
            released=bool(item.get("released", False)),
            drained=bool(item.get("drained", False)),
            checkpoint={str(k): v for k, v in checkpoint.items() if isinstance(v, str)}
            if isinstance(checkpoint, Mapping) else {},
            caught_up_at=float(item.get("caught_up_at") or 0),
            version=parsed.version if parsed else None,
            claimed_at=_time(item, "claimed_at"), ready_at=_time(item, "ready_at"),
            serving_at=_time(item, "serving_at"), drained_at=_time(item, "drained_at"),
            released_at=_time(item, "released_at"),
        )

    @classmethod
    def from_raw(cls, item: Mapping[str, Mapping[str, Any]]) -> LeaseRecord:
        """Decode a lease item in attribute-value form (as ``GetItem`` / ``BatchGetItem`` return it)."""
        return cls.from_item(plain_item(item))
