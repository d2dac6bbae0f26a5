"""State handoff: a stateful transform's entity state follows the entity to whichever slot gets its events.

The router numbers each entity's events and stamps the slot of the entity's previous event; when the slot changes
it puts a marker behind that event in the old slot's shard (:mod:`geokernel.contracts.handoff`). A slot's
:class:`EntityGate` then decides per stamped event:

* the entity's last applied number here is ``n - 1`` (or it is new): apply it;
* ``n`` or less: a copy of an event already applied (a retried put, a re-read after a takeover): skip it;
* otherwise hold the entity's events (in ``n`` order; other entities go on) until its state after ``n - 1`` is
  here: from its own shard (a reordered put), or handed over by the previous slot (:class:`HandoffStore`).

A marker ``(entity, n, to)`` is answered once the entity's event ``n`` was applied here: the state is taken out of
the store and written as a handoff item; a slot that drains writes its whole store as its final state, which
answers every marker that never reached it. So the new slot applies the entity's event only after the previous
slot applied everything of the entity that was routed before it, with exactly the state that produced.

A held record is not checkpointed past (:meth:`EntityGate.holds`): a successor re-reads it; one that waits
longer than ``wait_s`` is applied without the state and counted (``lost``): that is a difference the oracle shows.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from geo_service.adapters.aws import get_object_or_none
from geo_service.entity.store import EntityStates
from geokernel.contracts.handoff import (
    HANDOFF_TTL_S,
    STATE_ATTR,
    Marker,
    Stamp,
    handoff_key,
    state_key,
)
from geokernel.contracts.slot import SlotId


def _same_version(a: str, b: str) -> bool:
    """Whether two slot labels name slots of one version (a handoff inside a version: a cell that moved)."""
    sa, sb = SlotId.match(a), SlotId.match(b)
    return sa is not None and sb is not None and sa.version == sb.version


class _Verdict(Enum):
    APPLY = 1
    SKIP = 2
    WAIT_LOCAL = 3
    FETCH = 4


@dataclass(frozen=True)
class Held:
    """A stamped event waiting for its entity's state, with the call that processes it."""

    stamp: Stamp
    shard_id: str
    run: Callable[[], None]


@dataclass
class Wanted:
    """What a held entity waits for: its state after event ``n``, from the slot ``prev``, since ``since``."""

    n: int
    prev: str | None
    since: float
    local: bool


@dataclass(frozen=True)
class Handoff:
    """An entity's state after its event ``n`` (JSON text, or None: it had none), to be written for its next slot."""

    entity_id: str
    n: int
    text: str | None
    #: When the router put the marker this answers (its Kinesis arrival time, epoch seconds); None if unknown.
    asked_at: float | None = None


@dataclass(frozen=True)
class Asked:
    """A marker read from ``shard_id`` that waits for its entity's event, and when the router put it (or None)."""

    marker: Marker
    shard_id: str
    put_at: float | None = None


@dataclass
class EntityGate:
    """Per-slot handoff logic over the slot's :class:`~geo_service.entity.store.EntityStates` (see the module docstring).

    Pure: the AWS side is :class:`HandoffStore`, driven by :mod:`geo_service.serving.batches`.
    """

    store: EntityStates
    #: This slot's label (``v<version>#<worker>``).
    label: str = ""
    clock: Callable[[], float] = time.monotonic
    wait_s: float = 60.0
    held: dict[str, list[Held]] = field(default_factory=dict)
    markers: dict[str, list[Asked]] = field(default_factory=dict)
    wanted: dict[str, Wanted] = field(default_factory=dict)
    outbox: list[Handoff] = field(default_factory=list)
    #: Seconds each handed-over entity waited (first held -> state here), for the p99 the report prints.
    waits: list[float] = field(default_factory=list)
    #: States received from a slot of this slot's own version (an entity that crossed a region border).
    crossings: int = 0
    duplicates: int = 0
    lost: int = 0
    _shards: Counter[str] = field(default_factory=Counter)

    @property
    def holding(self) -> int:
        """Records held (events and markers)."""
        return sum(self._shards.values())

    def holds(self, shard_id: str) -> bool:
        """True while a record of ``shard_id`` is held: its checkpoint must not pass it."""
        return self._shards[shard_id] > 0

    # ------------------------------------------------------------------ records
    def offer(self, entity_id: str, stamp: Stamp | None, shard_id: str, run: Callable[[], None]) -> None:
        """An event read from ``shard_id``: ``run`` it now, later (held), or never (a copy)."""
        if stamp is None:
            run()
            return
        queue = self.held.get(entity_id)
        if queue is not None:
            self._hold(entity_id, Held(stamp, shard_id, run))
            self._drain(entity_id)
            return
        verdict = self._verdict(entity_id, stamp)
        if verdict is _Verdict.SKIP:
            self.duplicates += 1
        elif verdict is _Verdict.APPLY:
            self._apply(entity_id, stamp.n, run)
        else:
            self._hold(entity_id, Held(stamp, shard_id, run))
            self.wanted[entity_id] = Wanted(stamp.n - 1, stamp.prev, self.clock(), verdict is _Verdict.WAIT_LOCAL)

    def mark(self, marker: Marker, shard_id: str, put_at: float | None = None) -> None:
        """A marker read from ``shard_id``: hand the entity over once its event ``marker.n`` was applied here.

        ``put_at``: when the router put the marker (its Kinesis arrival time), carried to the :class:`Handoff`."""
        e = marker.entity_id
        if marker.to in self.store.labels or self.store.gone.get(e) == marker.n:
            return  # the slot carried over from this one shares the store / a copy of a marker already answered
        last = self.store.n.get(e)
        if last is not None and last > marker.n:
            return  # the entity came back after that marker's event (its state moved on)
        if last == marker.n and e not in self.held:
            self._give(e, marker.n, put_at)
            return
        self.markers.setdefault(e, []).append(Asked(marker, shard_id, put_at))
        self._shards[shard_id] += 1

    # ------------------------------------------------------------------ states from elsewhere
    def fetches(self) -> list[tuple[str, Wanted]]:
        """The held entities whose state must come from another slot."""
        return [(e, w) for e, w in self.wanted.items() if not w.local]

    def receive(self, found: Mapping[str, tuple[int, str | None]]) -> None:
        """States handed over: ``entity -> (n, JSON text or None)``; each releases its entity's held events."""
        now = self.clock()
        for e, (n, text) in found.items():
            w = self.wanted.get(e)
            if w is None or w.local or w.n != n:
                continue
            self.store.adopt(e, n, text)
            self.waits.append(now - w.since)
            if w.prev is not None and self.label and _same_version(w.prev, self.label):
                self.crossings += 1
            self._drain(e)

    def recheck(self) -> None:
        """Re-try every held entity (the store may have its state now: a carried twin slot applied it)."""
        for e in list(self.wanted):
            self._drain(e)

    def describe(self, e: str) -> dict[str, object]:
        """What the gate knows of a held entity (for the log line of one it gives up on)."""
        w = self.wanted.get(e)
        return {"wanted_n": w.n if w else None, "prev": w.prev if w else None, "local": w.local if w else None,
                "held": [(h.stamp.n, h.stamp.prev) for h in self.held.get(e, [])][:5],
                "last": self.store.n.get(e), "gone": self.store.gone.get(e),
                "markers": [(a.marker.n, a.marker.to) for a in self.markers.get(e, [])][:5],
                "labels": sorted(self.store.labels)}

    def expire(self) -> list[str]:
        """Apply, without their state, the entities held longer than ``wait_s``; return them (to log)."""
        now = self.clock()
        late = [e for e, w in self.wanted.items() if now - w.since > self.wait_s]
        for e in late:
            w = self.wanted[e]
            self.lost += 1
            self.store.adopt(e, w.n, None)
            self._drain(e)
        return late

    # ------------------------------------------------------------------ internals
    def _verdict(self, e: str, stamp: Stamp) -> _Verdict:
        last = self.store.n.get(e)
        if last is not None and stamp.n <= last:
            return _Verdict.SKIP
        gone = self.store.gone.get(e)
        if last is None and gone is not None and stamp.n <= gone:
            return _Verdict.SKIP  # a copy of an event applied here before the entity was handed on
        if (last is not None and stamp.n == last + 1) or (last is None and stamp.prev is None):
            return _Verdict.APPLY
        if stamp.prev is not None and stamp.prev in self.store.labels and gone != stamp.n - 1:
            return _Verdict.WAIT_LOCAL  # its earlier events come here too (a reordered put)
        # from another slot, or from a slot of this store that handed the state on before this slot joined it (a
        # successor that took the old slot over answered its markers before it carried this one): the item is written
        return _Verdict.FETCH

    def _hold(self, e: str, h: Held) -> None:
        queue = self.held.setdefault(e, [])
        keys = [x.stamp.n for x in queue]
        queue.insert(bisect.bisect_right(keys, h.stamp.n), h)
        self._shards[h.shard_id] += 1

    def _drain(self, e: str) -> None:
        queue = self.held.get(e, [])
        while queue:
            h = queue[0]
            verdict = self._verdict(e, h.stamp)
            if verdict in (_Verdict.WAIT_LOCAL, _Verdict.FETCH):
                w, local = self.wanted.get(e), verdict is _Verdict.WAIT_LOCAL
                if w is None or w.n != h.stamp.n - 1:
                    self.wanted[e] = Wanted(h.stamp.n - 1, h.stamp.prev, self.clock(), local)
                elif w.local != local:  # the state it waited for here was handed on: fetch it (same wait)
                    w.local = local
                return
            queue.pop(0)
            self._shards[h.shard_id] -= 1
            if verdict is _Verdict.SKIP:
                self.duplicates += 1
            else:
                self._apply(e, h.stamp.n, h.run)
        self.held.pop(e, None)
        self.wanted.pop(e, None)

    def _apply(self, e: str, n: int, run: Callable[[], None]) -> None:
        run()
        self.store.n[e] = n
        self.store.gone.pop(e, None)
        waiting = self.markers.get(e)
        if not waiting:
            return
        keep: list[Asked] = []
        for a in waiting:
            if a.marker.n > n:
                keep.append(a)
                continue
            self._shards[a.shard_id] -= 1
            if a.marker.n == n and a.marker.to not in self.store.labels:  # (its slot may have joined the store)
                self._give(e, n, a.put_at)
        if keep:  # markers of later events: the entity comes back here before it leaves again
            self.markers[e] = keep
        else:
            self.markers.pop(e, None)

    def _give(self, e: str, n: int, asked_at: float | None) -> None:
        self.outbox.append(Handoff(e, n, self.store.take(e), asked_at))


class HandoffStore:
    """Handoff items in the control table and slot state objects in the output bucket (AWS side of the gate).

    Calls: one ``BatchWriteItem`` per 25 handed-over entities, one ``BatchGetItem`` per 100 wanted ones and fetch
    round, one ``GetObject`` per previous slot's final state until it exists (then cached), one ``PutObject`` per
    slot flush (its latest states) and one at drain (final).
    """

    def __init__(self, dynamodb: Any, control_table: str, s3: Any, bucket: str,
                 wall: Callable[[], float] = time.time, clock: Callable[[], float] = time.monotonic) -> None:
        self._ddb = dynamodb
        self.table = control_table
        self._s3 = s3
        self.bucket = bucket
        self.wall = wall
        self.clock = clock
        #: Calls made, per API (the report's extra AWS calls per event).
        self.calls: Counter[str] = Counter()
        self._finals: dict[str, dict[str, Any]] = {}
        self._final_checked: dict[str, float] = {}

    def put(self, items: Sequence[Handoff]) -> None:
        """Write handoff items (retries what DynamoDB left unprocessed; raises if it cannot)."""
        expires = int(self.wall()) + HANDOFF_TTL_S
        for i in range(0, len(items), 25):
            reqs = [{"PutRequest": {"Item": _item(h, expires)}} for h in items[i:i + 25]]
            for attempt in range(8):
                self.calls["BatchWriteItem"] += 1
                out = self._ddb.batch_write_item(RequestItems={self.table: reqs})
                reqs = out.get("UnprocessedItems", {}).get(self.table, [])
                if not reqs:
                    break
                time.sleep(0.05 * 2 ** attempt)
            else:
                raise RuntimeError(f"{len(reqs)} handoff items stayed unprocessed in {self.table!r}")

    def get(self, wants: Iterable[tuple[str, Any]]) -> dict[str, tuple[int, str | None]]:
        """Handed-over states of ``(entity, Wanted)``: from handoff items, else from the previous slot's final
        state when it drained; entities not there yet are left out."""
        wants = list(wants)
        found: dict[str, tuple[int, str | None]] = {}
        for i in range(0, len(wants), 100):
            chunk = wants[i:i + 100]
            keys = [{"pk": {"S": handoff_key(e, w.n)}} for e, w in chunk]
            self.calls["BatchGetItem"] += 1
            out = self._ddb.batch_get_item(RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}})
            for it in out.get("Responses", {}).get(self.table, []):
                n = int(it["n"]["N"])
                found[it["entity"]["S"]] = (n, it[STATE_ATTR]["S"] if STATE_ATTR in it else None)
        for e, w in wants:
            if e in found or w.prev is None:
                continue
            final = self.final(w.prev)
            if final is not None and final["n"].get(e) == w.n:
                found[e] = (w.n, final["states"].get(e))
        return found

    def final(self, label: str) -> dict[str, Any] | None:
        """The final states of slot ``label`` once it drained (cached), else None (checked at most once a second)."""
        if label in self._finals:
            return self._finals[label]
        now = self.clock()
        if now - self._final_checked.get(label, -1e9) < 1.0:
            return None
        self._final_checked[label] = now
        slot = SlotId.parse(label, "a stamp's previous slot")
        snap = self._read(state_key(slot.version, slot.worker_id, final=True))
        if snap is not None:
            self._finals[label] = snap
        return snap

    def latest(self, version: int, worker_id: str) -> dict[str, Any] | None:
        """The states a slot wrote with its last flush (a successor's start), or None."""
        return self._read(state_key(version, worker_id, final=False))

    def save(self, version: int, worker_id: str, snap: Mapping[str, Any], *, final: bool) -> None:
        body = json.dumps(snap, separators=(",", ":")).encode()
        self.calls["PutObject"] += 1
        self._s3.put_object(Bucket=self.bucket, Key=state_key(version, worker_id, final=final), Body=body,
                            ContentType="application/json")

    def _read(self, key: str) -> dict[str, Any] | None:
        self.calls["GetObject"] += 1
        body = get_object_or_none(self._s3, self.bucket, key, "slot states")
        if body is None:
            return None
        snap: dict[str, Any] = json.loads(body)
        return snap


def _item(h: Handoff, expires: int) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": handoff_key(h.entity_id, h.n)}, "entity": {"S": h.entity_id},
                            "n": {"N": str(h.n)}, "expires_at": {"N": str(expires)}}
    if h.text is not None:
        item[STATE_ATTR] = {"S": h.text}
    return item

