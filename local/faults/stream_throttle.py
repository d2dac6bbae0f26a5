"""``stream-throttle`` and ``put-partial``: the local AWS throttles the geo streams for a while.

``stream-throttle`` refuses a share of their PutRecords and GetRecords calls; ``put-partial`` fails a share of the
records of each PutRecords while the rest of the request is written (Kinesis's own
``ProvisionedThroughputExceededException`` either way, :class:`local.kinesis_faults.KinesisThrottle`). The router
and the workers must ride both out without losing an event, and ``put-partial`` without an entity's events reaching
its worker out of order (:mod:`lambdas.router.waves`; the run's oracle fails on any pair out of send order within a
slot).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from local.faults.record import IN_SWAP, FaultRecord, LiveDelay, LiveSince


class Throttle(Protocol):
    """What :class:`StreamThrottle` needs of the server's hook (:class:`local.kinesis_faults.KinesisThrottle`)."""

    until: float
    refused: int
    passed: int
    first_refused_at: float | None

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0, *,
              partial: bool = False) -> None: ...


class StreamThrottle:
    """Inject and follow ``stream-throttle`` (``partial`` False): for ``duration_s`` the local AWS refuses ``share`` of
    the geo streams' PutRecords and GetRecords with ``ProvisionedThroughputExceededException``; or ``put-partial``
    (``partial`` True): it fails ``share`` of the records of each PutRecords (:class:`local.kinesis_faults.KinesisThrottle`).

    *Detected* at the first refused call (the router and the workers see the error), *recovered* once the throttle
    ended and every event sent before its end came out of the workers: the router (its event source mapping
    re-delivers failed items) and the workers (the SDK's retries, then their poll loop) rode it out. The recovery is
    dated by the last of those events' output objects (``written``: event id -> when a worker wrote its first copy,
    from the object key), not by the loop's read of the output, which comes seconds later on a loaded machine.
    """

    def __init__(self, throttle: Throttle, stream_prefix: str, sent_ids: Callable[[], Sequence[str]],
                 written: Callable[[], Mapping[str, float]], router_failures: Callable[[], int],
                 deploy_status: Callable[[], str], live_since: LiveSince, *, delay_s: float, duration_s: float, share: float, deadline_s: float,
                 partial: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.throttle = throttle
        self.stream_prefix = stream_prefix
        self.sent_ids = sent_ids
        self.written = written
        self.router_failures = router_failures
        self.deploy_status = deploy_status
        self.duration_s, self.share = duration_s, share
        self.clock = clock
        self._delay = LiveDelay(live_since, delay_s)
        self.partial = partial
        self.record = FaultRecord("put-partial" if partial else "stream-throttle", deadline_s=deadline_s)
        self._sent_before_end: int | None = None
        self._router_before = 0
        self._counts_before = (0, 0)  # the hook's (refused, passed) at injection: its counts go on across faults

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            if self._delay.due(now):
                self._router_before = self.router_failures()
                self._counts_before = (self.throttle.refused, self.throttle.passed)
                self.throttle.start(self.stream_prefix, self.share, self.duration_s, partial=self.partial)
                self.record.injected_at = now
                self.record.mid_swap = self.deploy_status() in IN_SWAP
                what = ("of the records of each PutRecords to" if self.partial else "of PutRecords/GetRecords on")
                self.record.target = f"{100 * self.share:.0f}% {what} {self.stream_prefix}* failed for {self.duration_s:g}s"
            return
        if self.record.detected_at is None and self.throttle.first_refused_at is not None:
            self.record.detected_at = self.throttle.first_refused_at
        if now < self.throttle.until or self.record.recovered_at is not None:
            return
        if self._sent_before_end is None:
            self._sent_before_end = len(self.sent_ids())
        before, written = self.sent_ids()[:self._sent_before_end], self.written()
        missing = set(before) - written.keys()
        if missing:  # what the fault table shows if the deadline passes first
            self.record.did = (f"{len(missing)} of {self._sent_before_end} events sent before the end not out yet "
                               f"(e.g. {min(missing)!r}); {self.throttle.refused - self._counts_before[0]} "
                               f"{'records failed' if self.partial else 'calls refused'}")
        elif self.record.detected_at is not None:
            last = max((written[i] for i in before), default=now)
            self.record.recovered_at = min(now, max(self.throttle.until, last))
            unit = "records failed" if self.partial else "calls refused"
            refused = self.throttle.refused - self._counts_before[0]
            passed = self.throttle.passed - self._counts_before[1]
            self.record.did = (f"{refused} of {refused + passed} {unit}; "
                               f"router re-delivered {self.router_failures() - self._router_before} failed items; "
                               f"all {self._sent_before_end} events sent before the end came out")
