"""The handover summary: one item per swap that the new slots' gates read, instead of every old slot's lease.

The handover gate (:mod:`geo_service.swap.handover`) of a new version's slot needs two things of the version before
it: the smallest caught-up time over its slots, and which of them are drained. Read from the old leases, that is
every old lease per new slot per refresh: N x N items a refresh, a million read units a second at 1,000 workers
against DynamoDB's 3,000 per partition and 40,000 per table
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html). Instead:

* every old slot publishes its caught-up time in its own lease (N writes a period, one item each);
* **one** process aggregates: the holder of the new version's first slot (``spec.workers[0]``; if it dies, the
  process that takes its lease over carries on) reads the N old leases (``BatchGetItem``, 100 keys a call,
  eventually consistent) once a period and writes one :class:`HandoverSummary` item (key
  :func:`~geokernel.contracts.handover_key` in the leases table);
* every new slot's gate reads that one small item (``GetItem``, eventually consistent, half a read unit) when it
  holds records: N reads a period.

Everything is linear in N. A summary a moment old only holds a record a little longer: caught-up times only grow
and a drained slot stays drained, so an older summary gives a lower limit and fewer drained slots, never a wrong
pass. The aggregator writes with a condition on ``at`` so a summary never goes back in time.

The drained slots are a bitmap over the old spec's worker order (125 bytes at 1,000 workers). The summary keeps the
lowest caught-up time, its slot and the second lowest, so the process that carries the lowest old slot itself can
use its own fresher caught-up time for it (:meth:`HandoverSummary.low_for`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from geo_service.leases.lease import read_leases
from geokernel.contracts.lease import LEASE_KEY_ATTR, handover_key

#: Caught-up time of a drained slot (everything it will ever hold was processed).
OPEN = math.inf


def encode_bits(flags: Sequence[bool]) -> str:
    """A bitmap of ``flags`` (bit ``i`` of byte ``i // 8``, most significant first), base64."""
    out = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            out[i // 8] |= 0x80 >> (i % 8)
    return base64.b64encode(bytes(out)).decode("ascii")


def decode_bits(text: str, n: int) -> list[bool]:
    """The first ``n`` flags of an :func:`encode_bits` bitmap (missing bytes read as unset)."""
    raw = base64.b64decode(text.encode("ascii")) if text else b""
    return [i // 8 < len(raw) and bool(raw[i // 8] & (0x80 >> (i % 8))) for i in range(n)]


@dataclass(frozen=True)
class HandoverSummary:
    """The old version's progress as the new version's gates need it (see the module docstring).

    ``low`` is the smallest caught-up time of the old slots that are not drained (:data:`OPEN` once all are),
    ``low_slot`` that slot, ``next_low`` the second smallest; ``at`` when it was aggregated, ``by`` by whom.
    """

    version: int
    from_version: int
    low: float
    low_slot: str
    next_low: float
    drained: frozenset[str]
    at: float
    by: str

    @property
    def open(self) -> bool:
        """True once every old slot is drained: the gate opens for good."""
        return self.low == OPEN

    def low_for(self, own_old: str | None, own_caught_up: float) -> float:
        """The smallest caught-up time, using ``own_caught_up`` for the old slot ``own_old`` this process carries.

        A carrying process knows its own old slot's caught-up time before its lease says it; when that slot is the
        lowest, the limit is the lower of its own time and the second lowest published one.
        """
        if own_old is None or own_old != self.low_slot or self.open:
            return self.low
        return min(self.next_low, max(self.low, own_caught_up))

    def to_raw(self, old_ids: Sequence[str]) -> dict[str, Any]:
        """The leases-table item (DynamoDB attribute-value form)."""
        def n(v: float) -> dict[str, str]:
            return {"N": str(Decimal(repr(round(v, 3))))}

        item: dict[str, Any] = {LEASE_KEY_ATTR: {"S": handover_key(self.version)}, "from_version": n(self.from_version),
                                "low_slot": {"S": self.low_slot}, "at": n(self.at), "by": {"S": self.by},
                                "drained": {"S": encode_bits([w in self.drained for w in old_ids])},
                                "open": {"BOOL": self.open}}
        if not self.open:
            item["low"] = n(self.low)
        if self.next_low != OPEN:
            item["next_low"] = n(self.next_low)
        return item

    @classmethod
    def from_raw(cls, version: int, item: Mapping[str, Any], old_ids: Sequence[str]) -> HandoverSummary:
        """Decode the item :meth:`to_raw` wrote."""
        is_open = bool(item.get("open", {}).get("BOOL", False))
        flags = decode_bits(item.get("drained", {}).get("S", ""), len(old_ids))
        return cls(version=version, from_version=int(item["from_version"]["N"]),
                   low=OPEN if is_open else float(item.get("low", {}).get("N", "0")),
                   low_slot=item.get("low_slot", {}).get("S", ""),
                   next_low=float(item["next_low"]["N"]) if "next_low" in item else OPEN,
                   drained=frozenset(w for w, f in zip(old_ids, flags, strict=True) if f),
                   at=float(item.get("at", {}).get("N", "0")), by=item.get("by", {}).get("S", ""))


def summarise(version: int, from_version: int, caught_up: Mapping[str, float], old_ids: Sequence[str], at: float,
              by: str) -> HandoverSummary:
    """Summarise each old slot's caught-up time (:data:`OPEN` when drained; a slot missing counts as 0)."""
    values = sorted((caught_up.get(w, 0.0), w) for w in old_ids)
    live = [(v, w) for v, w in values if v != OPEN]
    low, low_slot = live[0] if live else (OPEN, "")
    next_low = live[1][0] if len(live) > 1 else OPEN
    return HandoverSummary(version=version, from_version=from_version, low=low, low_slot=low_slot,
                           next_low=next_low, drained=frozenset(w for v, w in values if v == OPEN), at=at, by=by)


class SummaryStore:
    """Reads and writes the summary item of one swap (``version`` from ``from_version``) in the leases table."""

    def __init__(self, dynamodb: Any, table: str, version: int, from_version: int, old_ids: Sequence[str]) -> None:
        self._ddb = dynamodb
        self.table = table
        self.version = version
        self.from_version = from_version
        self.old_ids = tuple(old_ids)

    def read(self) -> HandoverSummary | None:
        """The latest summary (eventually consistent: half a read unit), None before the first aggregation."""
        item = self._ddb.get_item(TableName=self.table, Key={LEASE_KEY_ATTR: {"S": handover_key(self.version)}},
                                  ConsistentRead=False).get("Item")
        return None if item is None else HandoverSummary.from_raw(self.version, item, self.old_ids)

    def aggregate(self, owner: str, now: float) -> HandoverSummary:
        """Read every old slot's lease (eventually consistent, 100 a call) and summarise them."""
        states = read_leases(self._ddb, self.table, self.from_version, self.old_ids, consistent=False)
        caught_up = {w: OPEN if s.drained else s.caught_up_at for w, s in states.items()}
        return summarise(self.version, self.from_version, caught_up, self.old_ids, now, owner)

    def write(self, summary: HandoverSummary) -> bool:
        """Write ``summary`` unless a newer one is stored; True if written."""
        try:
            self._ddb.put_item(TableName=self.table, Item=summary.to_raw(self.old_ids),
                               ConditionExpression="attribute_not_exists(#k) OR #at < :at",
                               ExpressionAttributeNames={"#k": LEASE_KEY_ATTR, "#at": "at"},
                               ExpressionAttributeValues={":at": {"N": str(Decimal(repr(round(summary.at, 3))))}})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True


class Aggregator:
    """The designated process's duty: aggregate and write the summary at most once per ``period_s``.

    Parameters
    ----------
    store : SummaryStore
    owner : str
    period_s : float
    clock : callable
        Epoch seconds.
    monotonic : callable
        Monotonic seconds (the period).
    """

    def __init__(self, store: SummaryStore, owner: str, period_s: float, clock: Callable[[], float],
                 monotonic: Callable[[], float]) -> None:
        self.store = store
        self.owner = owner
        self.period_s = period_s
        self._clock = clock
        self._monotonic = monotonic
        self._last = -math.inf
        self.latest: HandoverSummary | None = None

    @property
    def done(self) -> bool:
        """True once a summary said every old slot is drained (nothing more to aggregate)."""
        return self.latest is not None and self.latest.open

    def step(self) -> HandoverSummary | None:
        """Aggregate and write when a period has passed (and not done); return the newest summary it made."""
        if self.done:
            return self.latest
        now = self._monotonic()
        if now - self._last < self.period_s:
            return self.latest
        self._last = now
        summary = self.store.aggregate(self.owner, self._clock())
        self.store.write(summary)
        self.latest = summary
        return summary
