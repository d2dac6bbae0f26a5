"""Pace the router's geo-stream puts while it catches up on a backlog, so no shard gets more than it may take.

Why: records wait in the ingest stream whenever the router cannot route them (no active spec yet at the first
deploy, an outage, a retried failure); when it can again, the event source mapping invokes it back to back with
full batches, and the router put them as fast as it read them. A local run measured a warm-up backlog of ~2,500
events sent in 3.6 s, 513 records/s into one geo shard: the shard's quota is 1,000 records/s and 1 MiB/s
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html), and the AWS budget asks for a 2x
margin (:data:`geokernel.aws_budget.report.MIN_MARGIN`). In AWS the excess is throttled and re-delivered: correct,
but slower than pacing and over the budget.

How:

* **Only a batch that is behind is paced.** A batch whose oldest record arrived more than :data:`CATCHUP_AGE_S`
  ago (the record's ``approximateArrivalTimestamp``: epoch seconds with a fraction, e.g. ``1545084650.987`` in the
  example event of https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html) comes from a backlog; a fresh
  batch holds about one batching window of arrivals, which the producers' rate and the partitioner's cap already
  bound, and goes out at once.
* **The shard's share is split between the routers.** Lambda runs one invocation per ingest shard at a time (times
  the parallelization factor), https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html; the ingest stream's
  partition key is the entity, so each router sees its share of every geo shard's load. Each one may put
  :data:`PACED_SHARE` of a shard's quota divided by their number (:meth:`PaceBudget.shared`) to one shard.
* **A token bucket per target that starts empty in every invocation.** An ingest shard's invocations run one after
  another, but not always in the same execution environment, so nothing is carried from one to the next: each
  invocation earns its puts at the budget's rate from its own start (a chunk waits until its records are earned)
  and may keep at most :data:`BURST_S` seconds of unspent earnings. Any one-second window then holds at most
  ``(1 + BURST_S) * rate`` records to a shard from one ingest shard, whichever invocations sent them; the rate is
  set so that this is the share.
* A target is a stream and an ``ExplicitHashKey``: each slot shard of a spec has its own key
  (:class:`geokernel.partition_spec.model.Worker` ``shard_keys``), so a key stands for its shard.

Cost: only while catching up, the invocation sleeps (billed duration). A 500-record batch spread over many workers'
shards waits little; one that is all for one shard takes ``500 / rate`` seconds (local run, two ingest shards:
~2.8 s). ``PACED_SHARE`` is below the budget's 50 % so a fresh batch right after a paced one stays inside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geokernel.aws_budget.quotas import BY_KEY
from geokernel.aws_budget.report import MIN_MARGIN

#: Kinesis per-shard write quota: the quota table's rows (1,000 records/s and 1 MiB/s, each citing its AWS page).
SHARD_RECORDS_PER_S = float(BY_KEY["kinesis.PutRecords.records"].per_second or 0)
SHARD_BYTES_PER_S = float(BY_KEY["kinesis.PutRecords.bytes"].per_second or 0)
#: The share of a shard's write quota all routers together may use while catching up: below 1 / MIN_MARGIN, so a
#: shard's steady load from fresh batches fits beside it.
PACED_SHARE = 0.9 / MIN_MARGIN
#: A batch whose oldest record is older than this (seconds) is a backlog. A fresh batch's oldest record is at most
#: about two seconds old: the batching window (1 s, ``ROUTER_BATCHING_WINDOW_S``) plus a poll of the shard once a
#: second, whose propagation delay is "typically below 1 second"
#: (https://docs.aws.amazon.com/streams/latest/dev/kinesis-low-latency.html). Every backlog ends in batches younger
#: than this, which go out unpaced as fast as the router reads them: its last ``CATCHUP_AGE_S`` seconds of arrivals
#: in about one. At 5 s a local replay at 500 events/s put 552 records in one second into a geo shard whose steady
#: load was 204/s (2026-11-29, the end of the first spec's backlog); 3 s keeps that tail to three seconds' worth.
CATCHUP_AGE_S = 3.0
#: Seconds of unspent budget an invocation may keep (the bucket's size): bounds the burst after a wait.
BURST_S = 0.25
#: The most an invocation sleeps in all (a third of the router's 60 s timeout, ``infra.router.ROUTER_TIMEOUT``):
#: beyond it the rest goes out unpaced, and what a shard refuses is re-delivered as before, rather than the batch
#: timing out and coming back whole.
MAX_WAIT_S = 20.0

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class PaceBudget:
    """What one router invocation may put to one shard per second while catching up."""

    records_per_s: float
    bytes_per_s: float

    @classmethod
    def shared(cls, routers: int) -> PaceBudget:
        """One router's budget when ``routers`` invocations may run at once (ingest shards x parallelization).

        Raises ``ValueError`` for fewer than one router.
        """
        if routers < 1:
            raise ValueError(f"routers must be >= 1, got {routers!r}")
        per = PACED_SHARE / (routers * (1 + BURST_S))
        return cls(SHARD_RECORDS_PER_S * per, SHARD_BYTES_PER_S * per)


def oldest_arrival(event: Mapping[str, Any]) -> float | None:
    """The earliest ``approximateArrivalTimestamp`` (epoch seconds) of a Kinesis Lambda event's records, or None."""
    stamps = [float(t) for r in event.get("Records", [])
              if (t := r.get("kinesis", {}).get("approximateArrivalTimestamp")) is not None]
    return min(stamps) if stamps else None


class Pacer:
    """Token buckets per target for one invocation (see the module docstring); ``sleep`` and ``clock`` injected.

    :meth:`chunks` splits a put so that no chunk asks one target for more than the bucket holds; :meth:`wait`
    sleeps until a chunk's records are earned and spends them. ``waited_s`` sums the sleeps (at most
    :data:`MAX_WAIT_S`).
    """

    def __init__(self, budget: PaceBudget, clock: Clock = time.monotonic, sleep: Sleep = time.sleep) -> None:
        self.budget = budget
        self._clock, self._sleep = clock, sleep
        self._start = clock()
        self._spent: dict[str, tuple[float, float]] = {}  # target -> (records, bytes) spent or forgone
        self.waited_s = 0.0

    @property
    def max_records(self) -> int:
        """The most records of one target in one chunk (the bucket's size, at least one)."""
        return max(1, int(self.budget.records_per_s * BURST_S))

    @property
    def max_bytes(self) -> float:
        return max(1.0, self.budget.bytes_per_s * BURST_S)

    def chunks(self, targets: Sequence[str], sizes: Sequence[int], limits: Iterable[list[int]]) -> list[list[int]]:
        """Split each chunk of ``limits`` (indices, in order) further so no target exceeds the bucket in one chunk.

        A single record larger than the bucket's bytes gets a chunk of its own (it waits for its bytes).
        """
        out: list[list[int]] = []
        for chunk in limits:
            cur: list[int] = []
            count: dict[str, tuple[int, int]] = {}
            for i in chunk:
                n, b = count.get(targets[i], (0, 0))
                if cur and (n + 1 > self.max_records or b + sizes[i] > self.max_bytes):
                    out.append(cur)
                    cur, count = [], {}
                    n, b = 0, 0
                cur.append(i)
                count[targets[i]] = (n + 1, b + sizes[i])
            if cur:
                out.append(cur)
        return out

    def wait(self, targets: Sequence[str], sizes: Sequence[int], chunk: Sequence[int]) -> None:
        """Sleep until every target of ``chunk`` has earned its records and bytes, then spend them."""
        need: dict[str, tuple[int, int]] = {}
        for i in chunk:
            n, b = need.get(targets[i], (0, 0))
            need[targets[i]] = (n + 1, b + sizes[i])
        r, by = self.budget.records_per_s, self.budget.bytes_per_s
        elapsed = self._clock() - self._start
        ready_at = elapsed
        for t, (n, b) in need.items():
            spent_n, spent_b = self._spent.get(t, (0.0, 0.0))
            ready_at = max(ready_at, (spent_n + n) / r, (spent_b + b) / by)
        if ready_at > elapsed:
            if self.waited_s + (ready_at - elapsed) > MAX_WAIT_S:
                return  # out of patience: unpaced from here (see MAX_WAIT_S)
            self._sleep(ready_at - elapsed)
            self.waited_s += ready_at - elapsed
        now = max(ready_at, self._clock() - self._start)
        for t, (n, b) in need.items():
            spent_n, spent_b = self._spent.get(t, (0.0, 0.0))
            # earnings beyond the bucket are forgone: at most BURST_S seconds of them stay spendable
            spent_n = max(spent_n, (now - BURST_S) * r)
            spent_b = max(spent_b, (now - BURST_S) * by)
            self._spent[t] = (spent_n + n, spent_b + b)
