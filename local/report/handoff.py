"""The STATE HANDOFF section: how entity states moved between slots in the run, read where it happened.

Each worker logs one ``state_handoff`` line per step that moved states (:mod:`geo_service.serving.batches`): the states it
handed over, how long each entity it received had waited (first event held -> state here) and its handoff calls so
far per API; ``state_calls`` lines carry the calls so far at most once a second while they change, and
``state_not_handed_over`` says it gave up waiting. The router's ledger reads and saves are counted per second by the
:class:`~lambdas.router.ledger.LedgerStore` of each of its execution environments in this process.

Calls per event are all of these over the events sent, for the whole run and **at steady state**: the live replay
less every swap (from its deploy's start until the version it replaced drained, plus :data:`SETTLE_S` for the last
states to move), each process's calls counted between its samples at the ends of each quiet period.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from geo_service.adapters.logs import EVENT_KEY, line_time, read_line

#: Seconds after an old version drained during which its last states still move (counted as the swap's).
SETTLE_S = 10.0

Span = tuple[float, float]


@dataclass
class HandoffStats:
    """What the workers' logs and the router say about state handoff."""

    handed: int = 0
    waits: list[float] = field(default_factory=list)
    #: Per state a slot wrote for a marker: seconds from the router's put of the marker to the state written.
    answers: list[float] = field(default_factory=list)
    crossings: int = 0
    lost: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    router_reads: int = 0
    router_saves: int = 0
    #: Per worker process: (epoch s, its handoff calls so far) at each logged line, in time order.
    samples: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    #: The router ledger's calls per whole epoch second.
    router_seconds: Counter[int] = field(default_factory=Counter)

    def p(self, q: float) -> float:
        return quantile(self.waits, q)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values()) + self.router_reads + self.router_saves

    def calls_in(self, span: Span) -> int:
        """Handoff and ledger calls made in ``span`` (a worker's by its samples: to the second it logged them)."""
        lo, hi = span
        return sum(_at(s, hi) - _at(s, lo) for s in self.samples.values()) + self.ledger_calls_in(span)

    def ledger_calls_in(self, span: Span) -> int:
        """The router ledger's calls (GetObject, PutObject) made in ``span``, by the second."""
        lo, hi = span
        return sum(n for t, n in self.router_seconds.items() if lo <= t < hi)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0.0
    w = sorted(values)
    return w[min(len(w) - 1, math.ceil(q * len(w)) - 1)]


def _at(samples: Sequence[tuple[float, int]], t: float) -> int:
    """A process's calls so far at time ``t``: its last sample at or before ``t`` (0 before its first)."""
    i = bisect.bisect_right(samples, (t, math.inf))
    return samples[i - 1][1] if i else 0


@dataclass(frozen=True)
class RouterLedgerCalls:
    """The router ledger's calls over its execution environments."""

    reads: int = 0
    saves: int = 0
    seconds: Counter[int] = field(default_factory=Counter)


def read_stats(log_files: Iterable[Path], router: RouterLedgerCalls | None = None) -> HandoffStats:
    """Sum the ``state_handoff`` lines of ``log_files`` (a process's calls are cumulative: its last line counts)."""
    router = router or RouterLedgerCalls()
    stats = HandoffStats(router_reads=router.reads, router_saves=router.saves, router_seconds=Counter(router.seconds))
    last_calls: dict[str, dict[str, int]] = {}
    for path in log_files:
        for line in path.read_text(errors="replace").splitlines():
            if '"state_' not in line:
                continue
            rec = read_line(line)  # the worker's log schema (geo_service.adapters.logs); None for an EMF line
            if rec is None:
                continue
            kind = rec.get(EVENT_KEY)
            if kind == "state_handoff":
                stats.handed += int(rec.get("handed", 0))
                stats.waits += [float(w) for w in rec.get("waits_s", [])]
                stats.answers += [float(a) for a in rec.get("answered_s", [])]
                stats.crossings += int(rec.get("crossings", 0))
            elif kind == "state_not_handed_over":
                stats.lost += 1
            if kind in ("state_handoff", "state_calls"):
                owner = str(rec.get("owner"))
                last_calls[owner] = {str(k): int(v) for k, v in rec.get("calls", {}).items()}
                at = line_time(rec)
                if at is not None:
                    stats.samples.setdefault(owner, []).append((at, sum(last_calls[owner].values())))
    for calls in last_calls.values():
        for api, n in calls.items():
            stats.calls[api] = stats.calls.get(api, 0) + n
    for samples in stats.samples.values():
        samples.sort()
    return stats


def router_ledger_calls(environments: Iterable[ModuleType]) -> RouterLedgerCalls:
    """The router ledger's calls over its environments' handler modules (none without state handoff, or for an
    environment that never ran)."""
    reads = saves = 0
    seconds: Counter[int] = Counter()
    for module in environments:
        try:
            ledgers = module.runtime().ledgers
        except Exception:  # the router never ran in this environment (its configuration is not set)
            continue
        if ledgers is not None:
            reads, saves = reads + ledgers.reads, saves + ledgers.saves
            seconds.update(ledgers.seconds)
    return RouterLedgerCalls(reads, saves, seconds)


def quiet_spans(live: Span, swaps: Iterable[Span]) -> list[Span]:
    """The parts of ``live`` that no swap (``swaps``, possibly overlapping) covers."""
    out: list[Span] = []
    at, end = live
    for lo, hi in sorted(swaps):
        if lo > at:
            out.append((at, min(lo, end)))
        at = max(at, hi)
        if at >= end:
            break
    if at < end:
        out.append((at, end))
    return [(lo, hi) for lo, hi in out if hi > lo]


def events_in(sent_seconds: Mapping[int, int], spans: Iterable[Span]) -> float:
    """Events sent within ``spans`` (a second cut by a span's end counts by the part inside it)."""
    total = 0.0
    for lo, hi in spans:
        for t in range(math.floor(lo), math.ceil(hi)):
            part = min(hi, t + 1) - max(lo, t)
            if part > 0:
                total += sent_seconds.get(t, 0) * part
    return total


@dataclass(frozen=True)
class Steady:
    """The handoff's calls and the events sent while no swap was in progress."""

    seconds: float
    live_s: float
    calls: int
    events: float
    ledger: int = 0  #: of ``calls``, the router ledger's (a GET and a PUT per router invocation)


def steady(stats: HandoffStats, live: Span, swaps: Iterable[Span], sent_seconds: Mapping[int, int]) -> Steady:
    spans = quiet_spans(live, swaps)
    return Steady(sum(hi - lo for lo, hi in spans), live[1] - live[0], sum(stats.calls_in(s) for s in spans),
                  events_in(sent_seconds, spans), sum(stats.ledger_calls_in(s) for s in spans))


def section(stats: HandoffStats, events: int, quiet: Steady | None = None) -> list[str]:
    """The report lines (nothing when no state moved and no call was made: a stateless run)."""
    if not stats.waits and not stats.handed and not stats.total_calls:
        return []
    per_event = stats.total_calls / events if events else 0.0
    calls = ", ".join(f"{api} {n}" for api, n in sorted(stats.calls.items()))
    lines = ["STATE HANDOFF (an entity's state follows it to its next slot: geo_service/entity/handoff.py)",
             f"  states handed over {stats.handed}, received {len(stats.waits)} ({stats.crossings} across a region "
             f"border within a version, the rest across swaps); wait from the entity's first held "
             f"event to its state: p50 {stats.p(0.5):.2f}s, p99 {stats.p(0.99):.2f}s, "
             f"max {max(stats.waits, default=0):.2f}s (target p99 <= 2 s); given up {stats.lost}"]
    if stats.answers:
        a = stats.answers
        lines.append(f"  the old slot's part, from the router's marker to the state written ({len(a)} markers): "
                     f"p50 {quantile(a, 0.5):.2f}s, p99 {quantile(a, 0.99):.2f}s, max {max(a):.2f}s (a wait starts "
                     "when the new slot reads the entity's event and ends at its next fetch after this)")
    lines += [f"  extra AWS calls in the whole run: {stats.total_calls} ({calls}; router ledger GetObject "
              f"{stats.router_reads}, PutObject {stats.router_saves}) = {per_event:.4f} per event sent ({events})"]
    if quiet is not None and quiet.events > 0:
        lines.append(f"  at steady state (no swap in progress: {quiet.seconds:.0f} s of {quiet.live_s:.0f} s live): "
                     f"{quiet.calls} calls for {quiet.events:.0f} events = {quiet.calls / quiet.events:.4f} per event "
                     f"(target <= 0.01); of them the router ledger's GET and PUT per invocation "
                     f"{quiet.ledger / quiet.events:.4f} per event at {quiet.events / quiet.seconds:.0f} events/s: they "
                     "fall with the events per ingest shard and invocation (0.004 at 1,000 events/s per shard and two "
                     "invocations a second: bench/README.md, \"State handoff at scale\")")
    elif quiet is not None:
        lines.append("  at steady state: no quiet period with events sent (every live second had a swap in progress)")
    return lines


def swap_spans(flips: Iterable[tuple[int | None, int, float]], deploy_started: Mapping[int, float | None],
               drained: Mapping[int, float | None], end: float) -> list[Span]:
    """When each swap was in progress: from its deploy's start (or its flip) until the version it replaced drained
    (or ``end``), plus :data:`SETTLE_S`; a deploy that never flipped, from its start until it drained or ``end``.
    The first deployment (nothing replaced) is not a swap."""
    spans: list[Span] = []
    flipped: set[int] = set()
    for old, new, at in flips:
        flipped.add(new)
        if old is not None:
            spans.append((min(deploy_started.get(new) or at, at), (drained.get(old) or end) + SETTLE_S))
    for version, started in deploy_started.items():
        if started is not None and version not in flipped:
            spans.append((started, (drained.get(version) or end) + SETTLE_S))
    return spans
