"""The handover across a swap, per record: a new version's record waits only for what arrived before it.

Per-entity order across a flip (seed 002) needs: every record of the old version ``n`` that the router put
before a record ``R`` of the new version ``m`` is processed before ``R``. The router puts an entity's records
in order, so those old records reached their streams no later than ``R`` reached its own (Kinesis stamps
each record with ``ApproximateArrivalTimestamp``). It is therefore enough that every slot of ``n`` has
processed everything that arrived in its shard before ``R`` did.

Each serving slot keeps a **caught-up time** (:class:`CaughtUp`): after a GetRecords call that reached the tip
of its shard (``MillisBehindLatest == 0``) and once that batch's output is written, every record that arrived
before the call started has been processed. While a plan swaps from its version, a slot publishes this time
in its lease (``caught_up_at``; ``drained=true`` means "everything"). A slot of ``m`` reads its shard at once
and processes the prefix of records that arrived at least ``HANDOVER_MARGIN_S`` before the smallest caught-up
time of the slots of ``n`` (:class:`HandoverGate`, :class:`GatedReader`); the rest waits. The margin covers the
time a put record takes to become readable and the clock difference between the worker and Kinesis.

So a cell that stays with its worker (the carrying process reads its old and its new shard side by side) and
a cell that moves both resume within about one publish period plus the margin of the flip, instead of after
every old slot drained. A wait for the drain is what remains when an old slot stops publishing (its process died
and nobody took the lease over): the gate then holds until that slot is drained or ``DRAIN_TIMEOUT_S`` passed.

Kinesis facts relied on: records of a shard are returned in sequence-number order with their
``ApproximateArrivalTimestamp``, and ``MillisBehindLatest`` is 0 when a GetRecords response reached the tip
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html; the field "indicates 0 that
record processing is caught up").
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from geo_service.consumer import Batch, KinesisRecord, ShardConsumer

#: A source's caught-up time when it is drained (everything it will ever hold was processed).
OPEN = math.inf


class CaughtUp:
    """A slot's caught-up time (epoch s): every record that arrived in its shard(s) before it was processed.

    Call :meth:`polled` with the wall time the GetRecords call that read ``batch`` started
    (:attr:`GatedReader.called_at`), after that batch's output was written. A slot owning ``parts`` shards
    (one gated reader each, :class:`SlotReader`) keeps one time per shard; :attr:`at` is their minimum.
    """

    def __init__(self, parts: int = 1) -> None:
        self._at = [0.0] * max(1, parts)

    @property
    def parts(self) -> int:
        return len(self._at)

    @property
    def at(self) -> float:
        return min(self._at)

    def polled(self, started_at: float, batch: Batch, part: int = 0) -> None:
        if batch.millis_behind_latest == 0:
            self._at[part] = max(self._at[part], started_at)
        elif batch.records:  # a later record may share its millisecond
            self._at[part] = max(self._at[part], batch.records[-1].arrival_s - 0.001)


@dataclass(frozen=True)
class GateState:
    """What the gate let through so far: the arrival limit now, and whether it is open for good."""

    limit: float
    open: bool
    timed_out: bool = False


class HandoverGate:
    """The arrival-time limit below which a new version's records may be processed.

    Parameters
    ----------
    sources : callable
        Returns each slot of the previous version's caught-up time (:data:`OPEN` once drained); one read of
        the leases table per call.
    margin_s : float
        Subtracted from the smallest caught-up time (``HANDOVER_MARGIN_S``).
    refresh_s : float
        Re-read ``sources`` at most this often.
    timeout_s : float
        After this long the gate opens whatever the sources say (``DRAIN_TIMEOUT_S``).
    clock : callable, optional
        Monotonic seconds for ``refresh_s`` and ``timeout_s``.

    Notes
    -----
    A source missing from the mapping counts as caught up to 0 (it has not published yet), so nothing passes
    until it does. Once every source is :data:`OPEN` the gate stays open without reading anything more.
    """

    def __init__(self, sources: Callable[[], Mapping[str, float]], *, margin_s: float, refresh_s: float,
                 timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._sources = sources
        self.margin_s = margin_s
        self.refresh_s = refresh_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._created = clock()
        self._read_at = -math.inf
        self._state = GateState(limit=-math.inf, open=False)

    @classmethod
    def opened(cls) -> HandoverGate:
        """A gate that holds nothing (no swap into this version, or a first deploy)."""
        gate = cls(dict, margin_s=0.0, refresh_s=1.0, timeout_s=1.0)
        gate._state = GateState(limit=OPEN, open=True)
        return gate

    @property
    def is_open(self) -> bool:
        return self._state.open

    @property
    def timed_out(self) -> bool:
        """True when the gate opened because ``timeout_s`` passed, not because the sources caught up."""
        return self._state.timed_out

    def state(self, need: float | None = None) -> GateState:
        """The current limit; re-reads the sources when it is stale and ``need`` (an arrival time) is above it."""
        if self._state.open:
            return self._state
        now = self._clock()
        if now - self._created > self.timeout_s:
            self._state = GateState(limit=OPEN, open=True, timed_out=True)
            return self._state
        if need is not None and need > self._state.limit and now - self._read_at >= self.refresh_s:
            self._read_at = now
            values = list(self._sources().values())
            low = min(values, default=OPEN)
            self._state = GateState(limit=OPEN, open=True) if low == OPEN else GateState(limit=low - self.margin_s,
                                                                                         open=False)
        return self._state


class GatedReader:
    """A :class:`~geo_service.consumer.ShardConsumer` whose batches hold back what the gate does not pass yet.

    A batch is the longest prefix of the unread records whose arrival is at or below the gate's limit; the
    consumer is polled again only once everything it returned has passed, so the checkpoint never moves past a
    held record. ``millis_behind_latest`` is at least 1 while anything is held, so a held record is never
    mistaken for a drained shard.
    """

    def __init__(self, consumer: ShardConsumer, gate: HandoverGate) -> None:
        self.consumer = consumer
        self.gate = gate
        self._held: tuple[KinesisRecord, ...] = ()
        self._held_shard = ""
        self._behind = 0
        self.released = 0
        self.called_at = 0.0  # wall time of the last GetRecords call (what a caught-up time may claim)

    @property
    def holding(self) -> int:
        return len(self._held)

    def poll(self) -> Batch:
        if not self._held:
            self.called_at = time.time()
            batch = self.consumer.poll()
            if self.gate.is_open or not batch.records:
                self.released += len(batch.records)
                return batch
            self._held, self._held_shard, self._behind = batch.records, batch.shard_id, batch.millis_behind_latest
        state = self.gate.state(need=self._held[0].arrival_s)
        n = len(self._held) if state.open else sum(1 for _ in _prefix(self._held, state.limit))
        out, self._held = self._held[:n], self._held[n:]
        self.released += n
        behind = max(self._behind, 1) if self._held else self._behind
        return Batch(shard_id=self._held_shard, records=out, millis_behind_latest=behind,
                     at_end=self.consumer.at_end and not self._held)


def _prefix(records: tuple[KinesisRecord, ...], limit: float) -> list[KinesisRecord]:
    out: list[KinesisRecord] = []
    for r in records:
        if r.arrival_s > limit:
            break
        out.append(r)
    return out


class SlotReader:
    """A slot's gated readers, one per shard it owns (one for a one-shard worker), polled in turn.

    :meth:`poll` returns the first batch with records, starting after the reader that gave the last one;
    an empty batch of another reader (nothing to write) moves that shard's part of ``caught_up`` at once.
    The returned batch is from reader :attr:`last` (the caller moves ``caught_up`` part ``last`` once its
    output is written); when every reader came back empty it says ``at_end`` only if all are at their end
    and ``millis_behind_latest`` is the largest of the round, so a slot is drained only when all its shards are.
    With one reader, :meth:`poll` returns exactly that reader's batch.
    """

    def __init__(self, readers: list[GatedReader], caught_up: CaughtUp) -> None:
        if not readers or len(readers) != caught_up.parts:
            raise ValueError(f"a slot reader needs one reader per caught-up part, got {len(readers)} readers "
                             f"for {caught_up.parts} parts")
        self.readers = readers
        self.gate = readers[0].gate
        self.caught_up = caught_up
        self.last = 0
        self._next = 0

    @property
    def holding(self) -> int:
        return sum(r.holding for r in self.readers)

    @property
    def released(self) -> int:
        return sum(r.released for r in self.readers)

    @property
    def called_at(self) -> float:
        """Wall time of the GetRecords call that gave the last returned batch."""
        return self.readers[self.last].called_at

    def poll(self) -> Batch:
        n = len(self.readers)
        behind, at_end, batch = 0, True, None
        for _ in range(n):
            i, self._next = self._next, (self._next + 1) % n
            batch = self.readers[i].poll()
            self.last = i
            if n == 1:
                return batch
            if batch.records:  # the slot is at its end only when every shard is
                return dataclasses.replace(batch, at_end=batch.at_end and all(r.consumer.at_end for r in self.readers))
            self.caught_up.polled(self.readers[i].called_at, batch, i)
            behind, at_end = max(behind, batch.millis_behind_latest), at_end and batch.at_end
        assert batch is not None
        return Batch(shard_id=batch.shard_id, records=(), millis_behind_latest=behind, at_end=at_end)
