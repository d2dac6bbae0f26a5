"""The leases table: one item per worker slot of a spec version, and one handover summary per swap.

Writers: the geo workers (``geo_service.leases.lease``: conditional claims, heartbeats, flags and checkpoints; the
handover summary: ``geo_service.swap.handover_summary``). Readers: the workers themselves, the deploy controller (green
ready, blue drained: ``lambdas.runtime.dynamodb.LeaseTable``) and the local loop's observer (``local.observe``).
:class:`LeaseRecord` is the one decoder of a lease item (``docs/CONTRACTS.md``, "DynamoDB items").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
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


#: Keys in one ``BatchGetItem`` call, its limit (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/
#: API_BatchGetItem.html: up to 100 items, no duplicate keys in one call).
BATCH_GET_KEYS = 100
#: Calls per batch for the keys DynamoDB returned unprocessed (it may, under throttling or past 16 MB), with a growing
#: pause between them.
BATCH_GET_TRIES = 8

#: ``BatchGetItem`` of a DynamoDB client (``client.batch_get_item``): takes ``RequestItems=``, returns its response.
BatchGet = Callable[..., Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class LeaseBatchRead:
    """What :func:`read_lease_batches` found: the leases that exist, by worker id, and the keys still unprocessed."""

    leases: dict[str, LeaseRecord]
    unprocessed: int


def read_lease_batches(batch_get: BatchGet, table: str, version: int, worker_ids: Iterable[str], *,
                       consistent: bool = True, sleep: Callable[[float], None] = time.sleep) -> LeaseBatchRead:
    """Read the leases of ``worker_ids`` of ``version``: the one lease batch read of every reader.

    Parameters
    ----------
    batch_get : callable
        The DynamoDB client's ``batch_get_item`` (the caller's client: its retries, its errors).
    table : str
        The leases table.
    version : int
    worker_ids : iterable of str
        Read once each, in :data:`BATCH_GET_KEYS` per call.
    consistent : bool
        Strongly consistent reads (claims decide on them); False costs half the read units where a value a moment
        old only delays.
    sleep : callable
        The pause between tries of unprocessed keys.

    Returns
    -------
    LeaseBatchRead
        Absent leases are left out; ``unprocessed`` counts the keys still unread after :data:`BATCH_GET_TRIES` calls
        of a batch (the caller raises its own error).

    Notes
    -----
    One call per 100 slots (plus retries of unprocessed keys): linear in the fleet.
    """
    keys = [str(SlotId(version, w)) for w in dict.fromkeys(worker_ids)]
    out: dict[str, LeaseRecord] = {}
    left = 0
    for i in range(0, len(keys), BATCH_GET_KEYS):
        pending: list[dict[str, Any]] = [{LEASE_KEY_ATTR: {"S": k}} for k in keys[i:i + BATCH_GET_KEYS]]
        for attempt in range(BATCH_GET_TRIES):
            if not pending:
                break
            resp = batch_get(RequestItems={table: {"Keys": pending, "ConsistentRead": consistent}})
            for item in resp.get("Responses", {}).get(table, []):
                lease = LeaseRecord.from_raw(item)
                out[lease.worker_id] = lease
            pending = resp.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            if pending:
                sleep(0.05 * (attempt + 1))
        left += len(pending)
    return LeaseBatchRead(out, left)
