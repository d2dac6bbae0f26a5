"""What the loop records of one injected fault, and the timing rules the injectors share.

:class:`FaultRecord` is one row of the fault table (``faults.json``): when the fault was injected, detected and
recovered, what the system did, and any promise it broke. :class:`LiveDelay` holds an injector back until a spec
is live; :func:`events_column` is the table's "events lost or doubled".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

IN_SWAP = ("waiting_green", "draining")
TAKEOVER_LEASES = 2.0  # a killed worker's slots are taken over within this many lease durations


@dataclass
class FaultRecord:
    """One injected fault: when it was injected, detected and recovered, and what the system did."""

    fault: str
    injected_at: float | None = None
    detected_at: float | None = None
    recovered_at: float | None = None
    mid_swap: bool = False
    target: str = ""
    leases: tuple[str, ...] = ()
    took_over_by: dict[str, str] = field(default_factory=dict)
    deadline_s: float = 0.0
    did: str = ""  # what the system did, in a few words (the leases taken over when empty)
    events: str = ""  # events lost or doubled while the fault was open (:func:`events_column`)
    problems: list[str] = field(default_factory=list)  # a broken promise (e.g. a bad snapshot published): fails the run
    #: the fault itself stops every worker of the live version (ECS rolling a deployment back after the flip): the
    #: span without a running worker it opens is judged against ``deadline_s``, not against one lease
    #: (:func:`local.report.invariants.served_check`)
    outage: bool = False

    @property
    def recovered(self) -> bool:
        return self.recovered_at is not None

    @property
    def within_deadline(self) -> bool:
        return (self.recovered_at is not None and self.injected_at is not None
                and self.recovered_at - self.injected_at <= self.deadline_s)

    def row(self, t0: float) -> str:
        """One line of the fault table (times in seconds since ``t0``)."""
        def at(t: float | None) -> str:
            return "-" if t is None else f"{t - t0:7.1f}s"

        took = ", ".join(f"{k} -> {v}" for k, v in sorted(self.took_over_by.items())) or "-"
        did = self.did or f"leases taken over: {took}"
        broken = f"; BROKEN: {' | '.join(self.problems)}" if self.problems else ""
        return (f"{self.fault:<15} injected {at(self.injected_at)}  detected {at(self.detected_at)}  recovered "
                f"{at(self.recovered_at)}  ({'mid-swap' if self.mid_swap else 'not mid-swap'}; {self.target}; "
                f"did: {did}; events: {self.events or '-'}; within {self.deadline_s:g}s: {self.within_deadline}{broken})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recovered": self.recovered, "within_deadline": self.within_deadline}


#: Since when a spec is live (epoch s), None before: the replay's clock starts once the first spec is active and its
#: warm-up backlog is out (:attr:`local.replay.ReplayThread.started_at`), so a delay from it is a share of the
#: replay. A deploy status of ``done`` seen by a poll is no such anchor: with swaps back to back a loaded loop can
#: miss it for tens of seconds (CI, stop 37: ``spark-kill`` then fell after the replay's end and was never injected).
LiveSince = Callable[[], float | None]


class LiveDelay:
    """Waits until a spec is live (``live_since``) and ``delay_s`` more passed."""

    def __init__(self, live_since: LiveSince, delay_s: float) -> None:
        self.live_since = live_since
        self.delay_s = delay_s

    def due(self, now: float) -> bool:
        since = self.live_since()
        return since is not None and now - since >= self.delay_s


def events_column(lost: int, copies: Sequence[tuple[str, int]], start_ms: int, end_ms: int) -> str:
    """The fault table's "events lost or doubled": the run's lost events, and the extra copies written in the span.

    ``copies`` is ``(event_id, written_ms)`` of every output record; an extra copy is every copy of an event after
    its first (by write time). Lost events have no output to date them, so they are counted over the whole run.
    """
    seen: set[str] = set()
    extra = 0
    for event_id, written in sorted(copies, key=lambda c: c[1]):
        extra += event_id in seen and start_ms <= written <= end_ms
        seen.add(event_id)
    repeats = len(copies) - len(seen)
    return f"lost {lost} (whole run), doubled {extra} written while open ({repeats} in the run)"
