"""Worker-slot leases in DynamoDB: claim, heartbeat, ready, checkpoint, drain, release, takeover.

One item per worker slot of a spec version, key ``lease_key = v<version>#<worker_id>``
(:func:`geokernel.contracts.lease.lease_key`); an item reads back as the one record every reader uses,
:class:`geokernel.contracts.lease.LeaseRecord`. Every write is conditional:

* **claim** succeeds only if the item does not exist, or has no ``owner`` (released), or
  its ``expires_at`` is in the past (the owner died: takeover), or this owner already holds
  it (re-claim after a local expiry), and it is not ``drained``.
  A claim resets ``ready`` and keeps the ``checkpoint`` map, so a successor resumes
  where the previous owner stopped.
* **heartbeat**, **mark_ready**, **checkpoint**, **mark_drained** and **release** succeed
  only while ``owner`` is still this process; otherwise :class:`LeaseLost` is raised
  and the caller must stop working on the slot.

The clock is injectable (``clock() -> epoch seconds``) so tests can expire leases
without sleeping.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from geo_service.errors import GeoServiceError
from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord, read_lease_batches
from geokernel.contracts.slot import SlotId

Clock = Callable[[], float]


class LeaseError(GeoServiceError, RuntimeError):
    """Base class of lease failures."""


class LeaseLost(LeaseError):
    """This process no longer owns the lease it was working on (expired and taken over, or removed)."""


@dataclass(frozen=True)
class Lease:
    """A lease this process holds (a snapshot; the item in DynamoDB is the truth)."""

    version: int
    worker_id: str
    owner: str
    expires_at: float
    checkpoint: Mapping[str, str] = field(default_factory=dict)
    claims: int = 1

    @property
    def key(self) -> str:
        return str(SlotId(self.version, self.worker_id))


def _n(value: float) -> dict[str, str]:
    return {"N": str(Decimal(repr(round(value, 3))))}


def _is_conditional_failure(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def read_leases(dynamodb: Any, table: str, version: int, worker_ids: Iterable[str],
                consistent: bool = True) -> dict[str, LeaseRecord]:
    """Read the leases of ``worker_ids`` of ``version`` (100 keys per call); absent ones are left out.

    Strongly consistent by default (claims decide on it); ``consistent=False`` costs half the read units where a
    value a moment old only delays (the handover gate's caught-up times). The loop is the kernel's
    (:func:`geokernel.contracts.lease.read_lease_batches`), the one every lease reader uses.
    """
    read = read_lease_batches(dynamodb.batch_get_item, table, version, worker_ids, consistent=consistent)
    if read.unprocessed:
        raise LeaseError(f"leases table {table!r}: {read.unprocessed} keys of v{version} left unprocessed")
    return read.leases


class LeaseManager:
    """Holds at most one worker-slot lease of one spec version for one owner (this process).

    Parameters
    ----------
    dynamodb : botocore DynamoDB client
    table : str
        The leases table name.
    version : int
        The spec version whose slots this manager claims.
    owner : str
        A unique id of this process (host, pid and a random suffix).
    lease_s : float
        Lease duration; a heartbeat extends ``expires_at`` to ``now + lease_s``.
    clock : callable, optional
        Epoch seconds (``time.time`` by default).
    """

    def __init__(self, dynamodb: Any, table: str, version: int, owner: str, lease_s: float,
                 clock: Clock = time.time) -> None:
        if lease_s <= 0:
            raise LeaseError(f"lease_s must be positive, got {lease_s!r}")
        self._ddb = dynamodb
        self.table = table
        self.version = version
        self.owner = owner
        self.lease_s = lease_s
        self.clock = clock
        self._lock = threading.Lock()
        self._lease: Lease | None = None

    # -- queries ---------------------------------------------------------------
    @property
    def lease(self) -> Lease | None:
        """The lease held now (None when none is held)."""
        with self._lock:
            return self._lease

    def valid(self) -> bool:
        """True while a lease is held and its last known ``expires_at`` is in the future."""
        lease = self.lease
        return lease is not None and self.clock() < lease.expires_at

    def read(self, worker_id: str) -> LeaseRecord | None:
        """Read one slot's lease item (strongly consistent), None if it was never claimed."""
        item = self._ddb.get_item(TableName=self.table, Key={LEASE_KEY_ATTR: {"S": str(SlotId(self.version, worker_id))}},
                                  ConsistentRead=True).get("Item")
        return LeaseRecord.from_raw(item) if item else None

    # -- claiming --------------------------------------------------------------
    def claim(self, worker_id: str) -> Lease | None:
        """Try to claim slot ``worker_id``; return the lease, or None when someone else holds it.

        Raises
        ------
        LeaseError
            If this manager already holds a lease (one process owns at most one slot).
        """
        with self._lock:
            if self._lease is not None:
                raise LeaseError(f"owner {self.owner!r} already holds lease {self._lease.key!r}; "
                                 f"release it before claiming {str(SlotId(self.version, worker_id))!r}")
        now = self.clock()
        expires = now + self.lease_s
        try:
            resp = self._ddb.update_item(
                TableName=self.table,
                Key={LEASE_KEY_ATTR: {"S": str(SlotId(self.version, worker_id))}},
                UpdateExpression=("SET #o = :me, expires_at = :exp, heartbeat_at = :now, claimed_at = :now, "
                                  "ready = :f, released = :f, #v = :ver, worker_id = :wid, "
                                  "checkpoint = if_not_exists(checkpoint, :empty) ADD claims :one"),
                ConditionExpression=("attribute_not_exists(lease_key) OR "
                                     "((attribute_not_exists(#o) OR expires_at < :now OR #o = :me) AND "
                                     "(attribute_not_exists(drained) OR drained = :f))"),
                ExpressionAttributeNames={"#o": "owner", "#v": "version"},
                ExpressionAttributeValues={":me": {"S": self.owner}, ":exp": _n(expires), ":now": _n(now),
                                           ":f": {"BOOL": False}, ":ver": {"N": str(self.version)},
                                           ":wid": {"S": worker_id}, ":empty": {"M": {}}, ":one": {"N": "1"}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_conditional_failure(exc):
                return None
            raise
        item = resp["Attributes"]
        lease = Lease(version=self.version, worker_id=worker_id, owner=self.owner, expires_at=expires,
                      checkpoint=dict(LeaseRecord.from_raw(item).checkpoint), claims=int(item.get("claims", {}).get("N", "1")))
        with self._lock:
            self._lease = lease
        return lease

    def claim_any(self, worker_ids: Iterable[str]) -> Lease | None:
        """Claim the first free slot among ``worker_ids`` (spec order); None if all are held or drained."""
        for wid in worker_ids:
            lease = self.claim(wid)
            if lease is not None:
                return lease
        return None

    # -- while holding ------------------------------------------------------------
    def heartbeat(self) -> Lease:
        """Extend the lease to ``now + lease_s``; raise LeaseLost if another owner took it."""
        now = self.clock()
        expires = now + self.lease_s
        self._owned_update("SET expires_at = :exp, heartbeat_at = :now", {":exp": _n(expires), ":now": _n(now)})
        with self._lock:
            if self._lease is None:
                raise LeaseLost("lease released while heartbeating")
            self._lease = _replace(self._lease, expires_at=expires)
            return self._lease

    def mark_ready(self) -> None:
        """Set ``ready=true``: the worker has loaded its region and calibrated."""
        self._owned_update("SET ready = :t, ready_at = :now", {":t": {"BOOL": True}, ":now": _n(self.clock())})

    def mark_serving(self) -> None:
        """Set ``serving_at``: the worker processed its first record of the slot (past the handover gate)."""
        self._owned_update("SET serving_at = :now", {":now": _n(self.clock())})

    def publish_caught_up(self, at: float) -> None:
        """Set ``caught_up_at``: every record that arrived in the slot's shard before ``at`` is processed."""
        self._owned_update("SET caught_up_at = :at", {":at": _n(at)})

    def checkpoint(self, shard_id: str, sequence_number: str) -> None:
        """Record the last processed sequence number of ``shard_id`` (output already written)."""
        self.checkpoint_many({shard_id: sequence_number})

    def checkpoint_many(self, positions: Mapping[str, str]) -> None:
        """Record the last processed sequence number of each shard in ``positions`` in one write."""
        if not positions:
            return
        items = sorted(positions.items())
        self._owned_update("SET " + ", ".join(f"checkpoint.#s{i} = :seq{i}" for i in range(len(items))),
                           {f":seq{i}": {"S": seq} for i, (_shard, seq) in enumerate(items)},
                           names={f"#s{i}": shard for i, (shard, _seq) in enumerate(items)})
        with self._lock:
            if self._lease is not None:
                self._lease = _replace(self._lease, checkpoint={**self._lease.checkpoint, **positions})

    def mark_drained(self) -> None:
        """Set ``drained=true``: the worker read its retired stream to the end."""
        self._owned_update("SET drained = :t, drained_at = :now", {":t": {"BOOL": True}, ":now": _n(self.clock())})

    def release(self) -> bool:
        """Give the lease up gracefully (``released=true``, ``owner`` removed, ``ready=false``).

        Returns False (and forgets the lease) when it had already been lost; never raises LeaseLost.
        """
        if self.lease is None:
            return False
        now = self.clock()
        try:
            self._owned_update("REMOVE #o SET released = :t, ready = :f, released_at = :now, expires_at = :now",
                               {":t": {"BOOL": True}, ":f": {"BOOL": False}, ":now": _n(now)})
            return True
        except LeaseLost:
            return False
        finally:
            self.forget()

    def forget(self) -> None:
        """Drop the local lease without touching DynamoDB (after LeaseLost, or to simulate a crash)."""
        with self._lock:
            self._lease = None

    def _owned_update(self, expression: str, values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> None:
        lease = self.lease
        if lease is None:
            raise LeaseLost(f"owner {self.owner!r} holds no lease of version {self.version!r}")
        try:
            self._ddb.update_item(
                TableName=self.table,
                Key={LEASE_KEY_ATTR: {"S": lease.key}},
                UpdateExpression=expression,
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner", **(names or {})},
                ExpressionAttributeValues={":me": {"S": self.owner}, **values},
            )
        except ClientError as exc:
            if _is_conditional_failure(exc):
                self.forget()
                raise LeaseLost(f"lease {lease.key!r} is no longer owned by {self.owner!r}") from exc
            raise


def _replace(lease: Lease, **changes: Any) -> Lease:
    return dataclasses.replace(lease, **changes)
