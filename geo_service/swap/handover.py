"""The handover across a swap, per record: a new version's record waits only for what arrived before it.

Per-entity order across a flip (an entity's records are processed in the order the router put them, also when
a new version's stream takes its cell over) needs: every record of the old version ``n`` that the router put
before a record ``R`` of the new version ``m`` is processed before ``R``. The router puts an entity's records
in order, so those old records reached their streams no later than ``R`` reached its own (Kinesis stamps
each record with ``ApproximateArrivalTimestamp``). It is therefore enough that every slot of ``n`` has
processed everything that arrived in its shard before ``R`` did.

Never two readers of one cell at once (a cell belongs to one lease holder at a time, as a shard does in
lease-based consumer rebalancing) adds one rule for a cell that **changes worker**: a record
whose place belonged to another slot in ``n`` also waits until that slot is **drained**. A cell
that stays with its slot needs only the caught-up rule: its old records are read by the same process. Both rules
rely on the router flipping each ingest shard once and for good (:mod:`lambdas.router.routing` reads ``active`` on
every invocation): an entity's records on ``n``, put by invocations before its first record of ``m``, arrived
before it.

Each serving slot keeps a **caught-up time** (:class:`CaughtUp`): after a GetRecords call that reached the tip
of its shard (``MillisBehindLatest == 0``) and once that batch's output is written, every record that arrived
before the call started has been processed. While a plan swaps from its version, a slot publishes this time
in its lease (``caught_up_at``; ``drained=true`` means "everything"). A slot of ``m`` reads its shard at once
and processes the prefix of records that arrived at least ``HANDOVER_MARGIN_S`` before the smallest caught-up
time of the slots of ``n`` (:class:`HandoverGate`, :class:`GatedReader`); the rest waits. The margin covers the
time a put record takes to become readable and the clock difference between the worker and Kinesis.

So a cell that stays with its worker (the carrying process reads its old and its new shard side by side)
resumes within about one publish period plus the margin of the flip instead of after every old slot drained;
a cell that moves resumes when its old worker drained. Later records of an entity whose record is held wait
behind it (per-entity order inside the new shard), and the checkpoint stops before the first held record. A wait for the drain is what remains when an old slot stops publishing (its process died
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

from geo_service.pipeline.consumer import Batch, KinesisRecord, ShardConsumer

#: A source's caught-up time when it is drained (everything it will ever hold was processed).
OPEN = math.inf
#: A gated reader reads on while it holds records, up to this many (a few seconds of a shard's 1,000 records/s).
MAX_HELD = 10_000


class CaughtUp:
    """A shard's caught-up time (epoch s): every record that arrived in it before that time was processed.

    :class:`GatedReader` moves it once a batch's output is written: to the wall time its GetRecords call started
    when that call reached the tip (``MillisBehindLatest == 0``), else to just before the first record not yet
    processed (a later record may share the last one's millisecond).
    """

    def __init__(self) -> None:
        self.at = 0.0

    def advance(self, at: float) -> None:
        self.at = max(self.at, at)


@dataclass(frozen=True)
class GateReading:
    """What the gate reads of the old version: the smallest caught-up time (:data:`OPEN` once every slot is
    drained) and the drained slots (:class:`geo_service.swap.handover_summary.HandoverSummary` supplies it)."""

    low: float
    drained: frozenset[str] = frozenset()

    @classmethod
    def of(cls, caught_up: Mapping[str, float]) -> GateReading:
        """From each old slot's caught-up time (:data:`OPEN` when drained); no slots reads as :data:`OPEN`."""
        return cls(low=min(caught_up.values(), default=OPEN),
                   drained=frozenset(w for w, v in caught_up.items() if v == OPEN))


@dataclass(frozen=True)
class GateState:
    """What the gate let through so far: the arrival limit now, and whether it is open for good."""

    limit: float
    open: bool
    timed_out: bool = False
    drained: frozenset[str] = frozenset()  # the old slots that are drained (a moved cell of theirs may pass)


class HandoverGate:
    """The arrival-time limit below which a new version's records may be processed.

    Parameters
    ----------
    sources : callable
        Returns a :class:`GateReading` of the previous version (one read of its handover summary per call).
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
    Nothing passes until the reading's ``low`` is above a record's arrival plus the margin (a slot that has not
    published counts as caught up to 0). Once the reading is :data:`OPEN` the gate stays open without reading
    anything more.
    """

    def __init__(self, sources: Callable[[], GateReading], *, margin_s: float, refresh_s: float,
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
        gate = cls(lambda: GateReading(OPEN), margin_s=0.0, refresh_s=1.0, timeout_s=1.0)
        gate._state = GateState(limit=OPEN, open=True)
        return gate

    @property
    def is_open(self) -> bool:
        return self._state.open

    @property
    def timed_out(self) -> bool:
        """True when the gate opened because ``timeout_s`` passed, not because the sources caught up."""
        return self._state.timed_out

    def state(self, need: float | None = None, refresh: bool = False) -> GateState:
        """The current limit and drained sources.

        Re-reads the sources when the last read is older than ``refresh_s`` and either ``refresh`` (records are
        held) or ``need`` (an arrival time) is above the limit.
        """
        if self._state.open:
            return self._state
        now = self._clock()
        if now - self._created > self.timeout_s:
            self._state = GateState(limit=OPEN, open=True, timed_out=True)
            return self._state
        wanted = refresh or (need is not None and need > self._state.limit)
        if wanted and now - self._read_at >= self.refresh_s:
            self._read_at = now
            reading = self._sources()
            self._state = GateState(limit=OPEN, open=True, drained=reading.drained) if reading.low == OPEN else \
                GateState(limit=reading.low - self.margin_s, open=False, drained=reading.drained)
        return self._state


@dataclass(frozen=True)
class Place:
    """What the gate needs to know of a record: its entity, and which old slot owned its place (None: unknown)."""

    entity: str
    old_owner: str | None


class GatedReader:
    """A :class:`~geo_service.pipeline.consumer.ShardConsumer` whose batches hold back what the gate does not pass yet.

    Parameters
    ----------
    consumer : ShardConsumer
    gate : HandoverGate
    classify : callable, optional
        ``records -> [Place, ...]`` (the worker decodes and locates them in the old spec); only called while the
        gate is closed. Without it every record is treated as a kept cell (the caught-up rule alone).
    own : str
        The slot id: a record whose old owner is ``own`` is a kept cell.

    Notes
    -----
    A batch holds the records that passed, in shard order; a record is held when it arrived after the gate's
    limit, when its place moved from another slot that is not drained yet, or when an earlier record of its
    entity is held. While records are held the consumer is read on (up to :data:`MAX_HELD` records of the same
    shard), so a kept cell's records behind a moved cell's pass as soon as the caught-up rule lets them.
    :attr:`Batch.checkpoint_sequence` stops before the first held record (a successor re-reads the held ones),
    ``millis_behind_latest`` is at least 1 while anything is held (a held record is never mistaken for a
    drained shard), and :attr:`caught_up` counts only what was processed.
    """

    def __init__(self, consumer: ShardConsumer, gate: HandoverGate,
                 classify: Callable[[tuple[KinesisRecord, ...]], list[Place]] | None = None, own: str = "",
                 wall: Callable[[], float] = time.time) -> None:
        self.consumer = consumer
        self.gate = gate
        self.own = own
        self._classify = classify
        self._wall = wall
        self._held: tuple[KinesisRecord, ...] = ()
        self._places: list[Place] = []
        self._held_shard = ""
        self._behind = 0
        self._pending: float | None = None  # the caught-up time reached once what was returned is written
        self.caught_up = CaughtUp()
        self.released = 0
        self.called_at = 0.0  # wall time of the last GetRecords call (what a caught-up time may claim)

    @property
    def holding(self) -> int:
        return len(self._held)

    def poll(self) -> Batch:
        """The next batch to process; call :meth:`processed` once its output (and all before it) is written.

        A batch the consumer answered without a call (``spaced``) is returned as it is and changes nothing.
        """
        if not self._held:
            called_at = self._wall()
            batch = self.consumer.poll()
            if batch.spaced:
                return batch
            self.called_at = called_at
            if self.gate.is_open or not batch.records:
                self.released += len(batch.records)
                self._note(_caught_up_after(called_at, batch))
                return batch
            self._held, self._held_shard, self._behind = batch.records, batch.shard_id, batch.millis_behind_latest
            self._places = self._places_of(batch.records)
        elif (not self.gate.is_open and len(self._held) < MAX_HELD and not self.consumer.at_end
              and self.consumer.shard_id == self._held_shard):
            self._read_behind()
        state = self.gate.state(need=self._held[0].arrival_s, refresh=True)
        out, keep, places, checkpoint = self._split(state)
        self._held, self._places = keep, places
        self.released += len(out)
        if self._held:
            self._note(self._held[0].arrival_s - 0.001)
            behind = max(self._behind, 1)
        else:
            self._note(self.called_at if self._behind == 0 else (out[-1].arrival_s - 0.001 if out else None))
            behind = self._behind
        return Batch(shard_id=self._held_shard, records=out, millis_behind_latest=behind,
                     at_end=self.consumer.at_end and not self._held, gated=True, checkpoint_sequence=checkpoint)

    def _note(self, at: float | None) -> None:
        """A caught-up time this reader reaches once everything it returned so far is written."""
        if at is not None:
            self._pending = at if self._pending is None else max(self._pending, at)

    def _read_behind(self) -> None:
        """Read on while records are held: a kept cell's records behind a moved cell's must not wait for its drain."""
        called_at = self._wall()
        batch = self.consumer.poll()
        if batch.spaced:
            return
        self.called_at, self._behind = called_at, batch.millis_behind_latest
        if batch.records:
            self._held += batch.records
            self._places += self._places_of(batch.records)

    def _places_of(self, records: tuple[KinesisRecord, ...]) -> list[Place]:
        return self._classify(records) if self._classify else [Place("", self.own)] * len(records)

    def processed(self) -> None:
        """Everything returned so far is written: move the caught-up time."""
        if self._pending is not None:
            self.caught_up.advance(self._pending)
            self._pending = None

    def _split(self, state: GateState) -> tuple[tuple[KinesisRecord, ...], tuple[KinesisRecord, ...], list[Place],
                                               str | None]:
        if state.open:
            return self._held, (), [], self._held[-1].sequence_number
        out: list[KinesisRecord] = []
        keep: list[KinesisRecord] = []
        kept_places: list[Place] = []
        blocked: set[str] = set()
        checkpoint: str | None = None
        for rec, place in zip(self._held, self._places, strict=True):
            moved_ok = place.old_owner is None or place.old_owner == self.own or place.old_owner in state.drained
            if rec.arrival_s <= state.limit and moved_ok and place.entity not in blocked:
                out.append(rec)
                if not keep:
                    checkpoint = rec.sequence_number
            else:
                keep.append(rec)
                kept_places.append(place)
                blocked.add(place.entity)
        return tuple(out), tuple(keep), kept_places, checkpoint


def _caught_up_after(called_at: float, batch: Batch) -> float | None:
    if batch.millis_behind_latest == 0:
        return called_at
    return batch.records[-1].arrival_s - 0.001 if batch.records else None


class SlotReader:
    """A slot's gated readers, one per shard it owns (one for a one-shard worker), polled in turn.

    :meth:`poll` returns the first batch with records, starting after the reader that gave the last one; an
    empty batch of another reader whose output is all written moves that reader's caught-up time at once. The
    caller then says what became of the returned batch: :meth:`buffered` (its records went to the slot's output
    buffer), or :meth:`processed` (nothing to write); once the buffer is written, :meth:`flushed` moves every
    reader's caught-up time. When every reader came back empty the batch says ``at_end`` only if all are at
    their end and ``millis_behind_latest`` is the largest of the round, so a slot is drained only when all its
    shards are. The slot's caught-up time is the smallest of its readers'. With one reader, :meth:`poll` returns
    exactly that reader's batch.
    """

    def __init__(self, readers: list[GatedReader]) -> None:
        if not readers:
            raise ValueError("a slot reader needs at least one shard reader, got none")
        self.readers = readers
        self.gate = readers[0].gate
        self.last = 0
        self._next = 0
        self._unflushed: set[int] = set()  # readers whose returned records are buffered, not yet written

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

    @property
    def caught_up_at(self) -> float:
        """Every record that arrived in any of its shards before this time is processed."""
        return min(r.caught_up.at for r in self.readers)

    def poll(self) -> Batch:
        n = len(self.readers)
        behind, at_end, batch, spaced = 0, True, None, True
        for _ in range(n):
            i, self._next = self._next, (self._next + 1) % n
            batch = self.readers[i].poll()
            self.last = i
            if n == 1:
                return batch
            if batch.records:  # the slot is at its end only when every shard is
                return dataclasses.replace(batch, at_end=batch.at_end and all(r.consumer.at_end for r in self.readers))
            if i not in self._unflushed:
                self.readers[i].processed()  # nothing of it waits to be written: its caught-up time moves now
            behind, at_end, spaced = max(behind, batch.millis_behind_latest), at_end and batch.at_end, \
                spaced and batch.spaced
        assert batch is not None
        return Batch(shard_id=batch.shard_id, records=(), millis_behind_latest=behind, at_end=at_end, spaced=spaced)

    def ready_in(self) -> float:
        """Seconds until one of its shards may be read again (the call spacing: :meth:`ShardConsumer.ready_in`)."""
        return min(r.consumer.ready_in() for r in self.readers)

    def buffered(self) -> None:
        """The last returned batch went to the output buffer: its reader's caught-up time waits for the flush."""
        self._unflushed.add(self.last)

    def processed(self) -> None:
        """The last returned batch left nothing to write."""
        if self.last not in self._unflushed:
            self.readers[self.last].processed()

    def flushed(self) -> None:
        """The slot's output buffer was written: every reader's caught-up time moves."""
        for reader in self.readers:
            reader.processed()
        self._unflushed.clear()
