"""The producer: replays the location stream into the ingest stream at a chosen speed.

:class:`Replayer` runs in a thread. Every ``tick_s`` it sends the events due so far
(``rate * elapsed``) with PutRecords (partition key ``entity_id``, CONTRACTS), retrying
records Kinesis rejects, and it remembers every valid ``event_id`` it got accepted: the
"events in" of the report. At ``bad_at`` of the run it injects the deliberately bad
records of :func:`local.dataset.bad_events` (they are *not* counted as events in).

**Warm-up.** Until ``live()`` is true (the local run: a spec is active, i.e. the first
snapshot was aggregated, partitioned and deployed) it sends the scenario's *start* state at
the same rate (starting on a window boundary, ``align_s``); the scenario clock (day/night, hotspot) and ``duration_s`` start when the
system is live, so a slow Spark start on a busy machine does not eat the part of the replay
where the load moves. ``warmup_timeout_s`` bounds the wait.

**KPL.** With ``kpl`` > 0 (``--kpl``) the events go KPL-aggregated, ``kpl`` per Kinesis record (encoded with
``aws_kinesis_agg``, partition key = the first event's ``entity_id``), as a Java producer using the KPL sends them;
the bad records go as one aggregated record too, plus one aggregated record whose MD5 is wrong (reason
``corrupt_kpl_record``), so the router and the Spark job de-aggregate and quarantine sub-records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from local.dataset import EventFactory, bad_events
from local.loops import FatalLoopError, LoopThread
from partitioner.contracts.events import ReasonCode

#: Events per KPL aggregated record with ``--kpl``.
KPL_EVENTS_PER_RECORD = 25


class Replayer(LoopThread):
    """Sends ``rate`` events per second for ``duration_s`` seconds, then stops by itself."""

    def __init__(self, kinesis: Any, stream: str, factory: EventFactory, rate: float, duration_s: float,
                 tick_s: float = 0.5, bad_at: float = 0.3, live: Callable[[], bool] = lambda: True,
                 warmup_timeout_s: float = 240.0, align_s: float = 0.0, kpl: int = 0) -> None:
        super().__init__("replay", tick_s)
        self.tick_s = tick_s
        if rate <= 0 or duration_s <= 0:
            raise ValueError(f"rate and duration must be > 0, got rate={rate!r} duration={duration_s!r}")
        self.kinesis = kinesis
        self.stream = stream
        self.factory = factory
        self.rate = rate
        self.duration_s = duration_s
        self.bad_at = bad_at
        self.live = live
        self.align_s = align_s
        self.warmup_timeout_s = warmup_timeout_s
        self.began_at: float | None = None    # first event sent (warm-up starts)
        self.started_at: float | None = None  # scenario clock starts (system live)
        self.ended_at: float | None = None    # the last events were sent
        self.sent_total = 0.0
        self.last_tick: float | None = None
        self.sent_ids: list[str] = []
        self.bad_sent: dict[str, int] = {}
        self.put_retries = 0
        self.done = False
        self.kpl = kpl  # user records per KPL aggregated record; 0 = one event per Kinesis record

    @property
    def fraction(self) -> float:
        """How far through the replay we are, in [0, 1]."""
        if self.started_at is None:
            return 0.0
        return min(1.0, (time.time() - self.started_at) / self.duration_s)

    @property
    def warming_up(self) -> bool:
        return self.started_at is None

    def step(self) -> None:
        if self.done:
            return
        now = time.time()
        if self.began_at is None:
            if self.align_s > 0 and now % self.align_s > self.tick_s:
                return  # start on a window boundary, so the first snapshot holds a whole window
            self.began_at = self.last_tick = now
        if self.started_at is None:
            if self.live():
                self.started_at = now
            elif now - self.began_at > self.warmup_timeout_s:
                raise FatalLoopError(f"no spec became active within {self.warmup_timeout_s:g}s of warm-up: "
                                     "see the Spark, partitioner and worker logs")
        fraction = self.fraction
        assert self.last_tick is not None
        self.sent_total += self.rate * (now - self.last_tick)
        self.last_tick = now
        due = int(self.sent_total) - len(self.sent_ids)
        if due > 0:
            events = self.factory.events(due, fraction, int(now * 1000))
            self._put(self._packed([(json.dumps(e).encode(), str(e["entity_id"])) for e in events]))
            self.sent_ids.extend(str(e["event_id"]) for e in events)
        if fraction >= self.bad_at and not self.bad_sent:
            bads = bad_events(self.factory.seed, int(now * 1000))
            self._put(self._packed([(b.raw.encode(), "ent-bad") for b in bads]))
            for b in bads:
                self.bad_sent[b.reason] = self.bad_sent.get(b.reason, 0) + 1
            if self.kpl:
                self._put([(corrupt_kpl_record(self.factory.seed), "ent-bad")])
                self.bad_sent[ReasonCode.CORRUPT_KPL_RECORD.value] = 1
        if self.started_at is not None and now - self.started_at >= self.duration_s:
            self.ended_at = now
            self.done = True
            self.stop()

    def _packed(self, records: list[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
        """``records`` as they go on the stream: unchanged, or KPL-aggregated ``kpl`` per record."""
        return kpl_aggregate(records, self.kpl) if self.kpl else records

    def _put(self, records: list[tuple[bytes, str]]) -> None:
        for i in range(0, len(records), 500):
            batch = [{"Data": d, "PartitionKey": k} for d, k in records[i:i + 500]]
            for attempt in range(20):
                resp = self.kinesis.put_records(StreamName=self.stream, Records=batch)
                if not resp.get("FailedRecordCount"):
                    break
                self.put_retries += 1
                batch = [r for r, res in zip(batch, resp["Records"], strict=True) if "ErrorCode" in res]
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
            else:
                raise RuntimeError(f"PutRecords to {self.stream!r}: {len(batch)} records still rejected after 20 tries")


def kpl_aggregate(records: list[tuple[bytes, str]], per_record: int) -> list[tuple[bytes, str]]:
    """``(data, partition key)`` records packed ``per_record`` to a KPL aggregated record by ``aws_kinesis_agg``.

    Each aggregated record's partition key is its first user record's (what the encoder and the KPL use); a chunk
    larger than the encoder's 1 MB limit comes out as more records.
    """
    from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]

    out: list[tuple[bytes, str]] = []
    for start in range(0, len(records), per_record):
        agg = RecordAggregator()
        for data, key in records[start:start + per_record]:
            full = agg.add_user_record(key, data)
            if full is not None:
                pk, _, blob = full.get_contents()
                out.append((bytes(blob), str(pk)))
        rest = agg.clear_and_get()
        if rest is not None:
            pk, _, blob = rest.get_contents()
            out.append((bytes(blob), str(pk)))
    return out


def corrupt_kpl_record(seed: int) -> bytes:
    """A KPL aggregated record (two events) with its last MD5 byte flipped: quarantined whole, never routed."""
    events = [json.dumps({"event_id": f"kpl-corrupt{seed}-{i}", "entity_id": "ent-bad"}).encode() for i in range(2)]
    ((blob, _),) = kpl_aggregate([(e, "ent-bad") for e in events], 2)
    return blob[:-1] + bytes([blob[-1] ^ 0x01])
