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

**Backlog.** With ``out_ids`` (the ids of the events that came out) the clock starts only once every event sent
before the first spec was active came out too, or ``backlog_timeout_s`` after it was active: the first fleet
works through the warm-up backlog in one burst, and a loaded machine took 44 s for it in a quick run, which
left a 80 s replay two whole measured windows (:func:`local.report.worker_load.measured_span`). The warm-up
load goes on meanwhile, so the measured replay keeps its whole ``duration_s`` on a slow machine.

:class:`RecordedReplayer` sends a recorded log instead (``--events``): on its recorded clock, its first window
over and over during the warm-up (:mod:`local.recorded`).

**KPL.** With ``kpl`` > 0 (``--kpl``) the events go KPL-aggregated, ``kpl`` per Kinesis record (encoded with
``aws_kinesis_agg``, partition key = the first event's ``entity_id``), as a Java producer using the KPL sends them;
the bad records go as one aggregated record too, plus one aggregated record whose MD5 is wrong (reason
``corrupt_kpl_record``), so the router and the Spark job de-aggregate and quarantine sub-records.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.events import ReasonCode
from geokernel.contracts.stream import ShardRange
from lambdas.runtime.kinesis import GeoStreams
from local.dataset import EventFactory, SurgeCrowd, bad_events
from local.kpl import corrupt_kpl_record, kpl_aggregate
from local.loops import FatalLoopError, LoopThread
from local.recorded import WARMUP_SUFFIX, RecordedLog, ReplayPlan, log_events, utc_text

#: Events per KPL aggregated record with ``--kpl``.
KPL_EVENTS_PER_RECORD = 25


class ReplayThread(LoopThread):
    """What both replayers share: the run's view of a replay and how events go on the stream.

    The run reads ``sent_ids`` (the events in), ``sent_events`` (the valid events in send order, canonical keys:
    :mod:`local.oracle` replays them), ``sent_seconds`` (how many were sent in each wall second), ``bad_sent``, ``began_at`` (first event sent: the warm-up starts),
    ``started_at`` (the scenario or replay clock starts: the system is live), ``ended_at``, ``fraction``,
    ``warming_up``, ``done``, ``duration_s`` and ``put_retries``; ``live_at`` (the first spec was seen active),
    ``backlog`` (events sent before it) and ``backlog_out`` (they all came out; False when the clock started on
    ``backlog_timeout_s``).
    """

    def __init__(self, kinesis: Any, stream: str, *, duration_s: float, tick_s: float, live: Callable[[], bool],
                 warmup_timeout_s: float, align_s: float, clock: Callable[[], float], fields: EventFields,
                 kpl: int = 0, out_ids: Callable[[], Container[str]] | None = None,
                 backlog_timeout_s: float = 0.0) -> None:
        super().__init__("replay", tick_s)
        self.kinesis, self.stream = kinesis, stream
        self.duration_s, self.tick_s, self.live, self.clock = duration_s, tick_s, live, clock
        self.warmup_timeout_s, self.align_s = warmup_timeout_s, align_s
        self.out_ids, self.backlog_timeout_s = out_ids, backlog_timeout_s
        self.live_at: float | None = None
        self.backlog = 0
        self.backlog_out = False
        self._backlog_next = 0  # sent_ids[:_backlog_next] came out (checked in send order, each once)
        self.fields = fields  # the keys the events are sent under (--event-fields)
        self.kpl = kpl  # user records per KPL aggregated record; 0 = one event per Kinesis record
        self._shards: tuple[ShardRange, ...] = ()  # the stream's shards (ListShards once), to aggregate per shard
        self.began_at: float | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.sent_ids: list[str] = []
        self.sent_events: list[dict[str, Any]] = []
        self.bad_sent: dict[str, int] = {}
        self.sent_seconds: Counter[int] = Counter()  # valid events sent per whole wall second (epoch)
        self.put_retries = 0
        self.done = False

    @property
    def fraction(self) -> float:
        """How far through the replay we are, in [0, 1]."""
        if self.started_at is None:
            return 0.0
        return min(1.0, (self.clock() - self.started_at) / self.duration_s)

    @property
    def warming_up(self) -> bool:
        return self.started_at is None

    def step(self) -> None:
        if self.done:
            return
        now = self.clock()
        if self._begin(now):
            self._tick(now)

    def _tick(self, now: float) -> None:
        """Send what is due at ``now`` (the window-aligned start is past; ``started_at`` is set once live)."""
        raise NotImplementedError

    def _begin(self, now: float) -> bool:
        """Begin on a window boundary (so the first snapshot holds a whole window) and start the clock once the
        system is live; False while still waiting for the boundary. Raises FatalLoopError after
        ``warmup_timeout_s`` of warm-up."""
        if self.began_at is None:
            if self.align_s > 0 and now % self.align_s > self.tick_s:
                return False
            self.began_at = now
        if self.live_at is None:
            if self.live():
                self.live_at, self.backlog = now, len(self.sent_ids)
            elif now - self.began_at > self.warmup_timeout_s:
                raise FatalLoopError(f"no spec became active within {self.warmup_timeout_s:g}s of warm-up: "
                                     "see the Spark, partitioner and worker logs")
        if self.started_at is None and self.live_at is not None:
            self.backlog_out = self._all_out()
            if self.backlog_out or now - self.live_at >= self.backlog_timeout_s:
                self.started_at = now
        return True

    def _all_out(self) -> bool:
        """Did every event of the warm-up backlog come out (always, without ``out_ids``)?"""
        if self.out_ids is None:
            return True
        out = self.out_ids()
        while self._backlog_next < self.backlog and self.sent_ids[self._backlog_next] in out:
            self._backlog_next += 1
        return self._backlog_next >= self.backlog

    def _finish(self, now: float) -> None:
        self.ended_at = now
        self.done = True
        self.stop()

    def _send(self, canonical: list[dict[str, Any]], wire: list[dict[str, Any]]) -> None:
        """Send ``wire`` (the events under :attr:`fields`' keys) and remember ``canonical`` (the same events under
        the canonical keys) as sent."""
        key = self.fields.entity_id
        self._put_raw([(json.dumps(w).encode(), str(w[key])) for w in wire])
        self.sent_ids.extend(str(e["event_id"]) for e in canonical)
        self.sent_events.extend(canonical)
        self.sent_seconds[int(time.time())] += len(canonical)

    def _put_raw(self, records: list[tuple[bytes, str]]) -> None:
        """Put ``(data, partition key)`` records as they are, or KPL-aggregated ``kpl`` per Kinesis record (records
        of one shard together, as the KPL packs them: :mod:`local.kpl`)."""
        if self.kpl:
            if not self._shards:
                self._shards = GeoStreams(self.kinesis).shards(self.stream)
            records = kpl_aggregate(records, self.kpl, self._shards)
        self.put_retries += put_all(self.kinesis, self.stream, records)


class Replayer(ReplayThread):
    """Sends ``rate`` events per second for ``duration_s`` seconds, then stops by itself; with ``crowd`` (``--surge``)
    the crowd's events too, on top, from when it arrives (``crowd_began_at``: its first event's wall time)."""

    def __init__(self, kinesis: Any, stream: str, factory: EventFactory, rate: float, duration_s: float,
                 tick_s: float = 0.5, bad_at: float = 0.3, live: Callable[[], bool] = lambda: True,
                 warmup_timeout_s: float = 240.0, align_s: float = 0.0, kpl: int = 0,
                 clock: Callable[[], float] = time.time, out_ids: Callable[[], Container[str]] | None = None,
                 backlog_timeout_s: float = 0.0, crowd: SurgeCrowd | None = None) -> None:
        if rate <= 0 or duration_s <= 0:
            raise ValueError(f"rate and duration must be > 0, got rate={rate!r} duration={duration_s!r}")
        super().__init__(kinesis, stream, duration_s=duration_s, tick_s=tick_s, live=live,
                         warmup_timeout_s=warmup_timeout_s, align_s=align_s, clock=clock, fields=factory.fields,
                         kpl=kpl, out_ids=out_ids, backlog_timeout_s=backlog_timeout_s)
        self.factory = factory
        self.rate = rate
        self.bad_at = bad_at
        self.sent_total = 0.0
        self.last_tick: float | None = None
        self.crowd = crowd
        self.crowd_sent = 0
        self.crowd_began_at: float | None = None

    def _tick(self, now: float) -> None:
        fraction = self.fraction
        self.sent_total += self.rate * (now - (self.last_tick or now))
        self.last_tick = now
        due = int(self.sent_total) - (len(self.sent_ids) - self.crowd_sent)
        self._send_crowd(now, fraction)
        if due > 0:
            wire = self.factory.events(due, fraction, int(now * 1000))  # under the factory's keys (--event-fields)
            f = self.fields
            self._send(wire if f.is_default else [f.canonical(e) for e in wire], wire)
        if fraction >= self.bad_at and not self.bad_sent:
            self._send_bad(now)
        if self.started_at is not None and now - self.started_at >= self.duration_s:
            self._finish(now)

    def _send_crowd(self, now: float, fraction: float) -> None:
        """The ``--surge`` crowd's events due by ``now`` (it arrives at ``crowd.at`` of the replay)."""
        c = self.crowd
        if c is None or self.started_at is None or fraction < c.at:
            return
        began = self.started_at + c.at * self.duration_s
        due = int(c.arrived(now - began)) - self.crowd_sent
        if due <= 0:
            return
        wire = self.factory.crowd_events(due, c, fraction, int(now * 1000))
        f = self.fields
        self._send(wire if f.is_default else [f.canonical(e) for e in wire], wire)
        self.crowd_sent += due
        if self.crowd_began_at is None:
            self.crowd_began_at = now

    def _send_bad(self, now: float) -> None:
        """The deliberately bad records (:func:`local.dataset.bad_events`), plus a corrupt KPL record with ``kpl``."""
        bads = bad_events(self.factory.seed, int(now * 1000), self.fields)
        self._put_raw([(b.raw.encode(), "ent-bad") for b in bads])
        for b in bads:
            self.bad_sent[b.reason] = self.bad_sent.get(b.reason, 0) + 1
        if self.kpl:
            self.put_retries += put_all(self.kinesis, self.stream, [(corrupt_kpl_record(self.factory.seed), "ent-bad")])
            self.bad_sent[ReasonCode.CORRUPT_KPL_RECORD.value] = 1


@dataclass(frozen=True)
class RecordedTimeline:
    """The recorded clock of a replay, shown in the progress line (the built-in replay's :class:`~local.dataset.Scenario`)."""

    start_ms: int
    speed: float
    duration_s: float

    @staticmethod
    def phase(fraction: float) -> str:
        """The replay has one phase: the log, as recorded."""
        return "recorded log"

    def sim_time(self, fraction: float) -> datetime:
        """The recorded time the replay has reached at ``fraction`` of it."""
        return datetime.fromtimestamp(self.start_ms / 1000.0 + fraction * self.duration_s * self.speed, UTC)


class RecordedReplayer(ReplayThread):
    """Sends a recorded log on its recorded clock (:mod:`local.recorded`), warm-up first; stops by itself.

    Beside what every :class:`ReplayThread` has: ``recorded_sent`` (rows of the log sent on the replay clock, each
    once) and ``warmup_sent`` (warm-up copies of the log's first window, ids ``<event_id>#warmup<k>``).
    ``bad_sent`` stays empty: nothing bad is injected (the log's own bad rows go straight to the quarantine,
    :func:`local.recorded.quarantine_bad_rows`).
    """

    def __init__(self, kinesis: Any, stream: str, log: RecordedLog, plan: ReplayPlan, tick_s: float = 0.5,
                 live: Callable[[], bool] = lambda: True, warmup_timeout_s: float = 240.0, align_s: float = 0.0,
                 clock: Callable[[], float] = time.time, fields: EventFields = DEFAULT_EVENT_FIELDS,
                 out_ids: Callable[[], Container[str]] | None = None, backlog_timeout_s: float = 0.0) -> None:
        super().__init__(kinesis, stream, duration_s=plan.duration_s, tick_s=tick_s, live=live,
                         warmup_timeout_s=warmup_timeout_s, align_s=align_s, clock=clock, fields=fields,
                         out_ids=out_ids, backlog_timeout_s=backlog_timeout_s)
        self.log, self.plan = log, plan
        self.recorded_sent = 0
        self.warmup_sent = 0
        self.warmup_passes = 0
        self._pass_start: float | None = None
        self._pass_next = 0

    def _tick(self, now: float) -> None:
        if self.started_at is None:
            self._warm_up(now)
        else:
            self._replay(now)

    def _warm_up(self, now: float) -> None:
        """Send the first window's events due in the current pass (passes start every ``window_s``)."""
        first, period = self.plan.first_window, self.plan.window_s
        assert self.began_at is not None
        if self._pass_start is None:
            self._pass_start, self.warmup_passes = self.began_at, 1
        while True:
            due = self._pass_start + self.plan.offsets_s[:first]
            end = first if now - self._pass_start >= period else int(np.searchsorted(due, now, side="right"))
            if end > self._pass_next:
                self._send_rows(self._pass_next, end, due[self._pass_next:end], f"{WARMUP_SUFFIX}{self.warmup_passes}")
                self.warmup_sent += end - self._pass_next
                self._pass_next = end
            if now - self._pass_start < period:
                return
            self._pass_start += period
            self.warmup_passes += 1
            self._pass_next = 0

    def _replay(self, now: float) -> None:
        """Send every event due on the replay clock; end after ``duration_s``."""
        assert self.started_at is not None
        elapsed = now - self.started_at
        plan = self.plan
        end = plan.send if elapsed >= plan.duration_s else min(
            plan.send, int(np.searchsorted(plan.offsets_s, elapsed, side="right")))
        if end > self.recorded_sent:
            lo = self.recorded_sent
            self._send_rows(lo, end, self.started_at + plan.offsets_s[lo:end], "")
            self.recorded_sent = end
        if elapsed >= plan.duration_s:
            self._finish(now)

    def _send_rows(self, lo: int, hi: int, due_s: npt.NDArray[np.float64], suffix: str) -> None:
        events = log_events(self.log, lo, hi, np.floor(due_s * 1000.0).astype(np.int64), suffix, self.fields.ts_unit)
        self._send(events, events if self.fields.is_default else [self.fields.mapped(e) for e in events])

    def summary(self) -> dict[str, object]:
        """What was sent, for the report (``report.json`` "recorded")."""
        log, plan = self.log, self.plan
        return {"source": log.source, "good_rows": len(log), "bad_rows": len(log.bad),
                "bad_by_reason": log.bad_by_reason(), "recorded_sent": self.recorded_sent,
                "not_sent_after_duration_cap": len(log) - plan.send, "warmup_copies": self.warmup_sent,
                "warmup_passes": self.warmup_passes, "speed": plan.speed, "duration_s": plan.duration_s,
                "span_s": log.span_s, "first_recorded_utc": utc_text(int(log.ms[0])),
                "last_recorded_utc": utc_text(int(log.ms[-1]))}


def put_all(kinesis: Any, stream: str, records: list[tuple[bytes, str]]) -> int:
    """PutRecords in batches of 500, retrying what Kinesis rejects (20 tries); return how many retries it took."""
    retries = 0
    for i in range(0, len(records), 500):
        batch = [{"Data": d, "PartitionKey": k} for d, k in records[i:i + 500]]
        for attempt in range(20):
            resp = kinesis.put_records(StreamName=stream, Records=batch)
            if not resp.get("FailedRecordCount"):
                break
            retries += 1
            batch = [r for r, res in zip(batch, resp["Records"], strict=True) if "ErrorCode" in res]
            time.sleep(min(2.0, 0.1 * 2 ** attempt))
        else:
            raise RuntimeError(f"PutRecords to {stream!r}: {len(batch)} records still rejected after 20 tries")
    return retries
