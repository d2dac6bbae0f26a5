"""Utilisation measured at the workers: the load each worker received per window, and what it cost.

The truth about utilisation is what reached the workers, never the snapshot's estimate
(DESIGN). Every source is written by the workers themselves:

* **events**: a worker writes one enriched object per batch it processed, keyed
  ``enriched/v<version>/<worker>/<epoch_ms>.jsonl`` with the time of the write; each record
  keeps the event's ``ts`` (when the replay sent it into the ingest stream) and the
  ``owner`` (the process). Every record counts (an at-least-once duplicate is work done twice).

  - **received** (the target): a worker's load in a window is the number of events sent in
    that window that the worker processed, i.e. the load the partitions assigned to it. The
    cap is a throughput limit per window, so this is what must stay under it.
  - **processed** (shown beside it): the same records counted by the write time of the
    worker's output. It differs from *received* where a worker paused and caught up: a carried
    slot reads its new stream only after draining the old one (the handover, a few seconds),
    then works through what queued meanwhile in one burst. That burst is catch-up of load the
    worker was assigned, and it shows as **lag** (write time minus send time), reported with
    its p50/p99/max so a pause is never hidden.

* **cost**: its cost reports ``costs/v<version>/<worker>/<epoch_s>.json`` give, per interval,
  the events and the CPU per event in calibration units; the interval's CPU seconds
  (``sum(events * rates) * calibration``) are spread over the windows it overlaps, in
  proportion to the overlap. A window's CPU is known only where the worker's reports cover
  all of it. The run stops the workers (each writes its last report) before it collects the
  reports. The cap is in events (the local partitioner balances on counts), so cost is
  reported beside the events, not checked against the cap.

Windows are the snapshot windows ``[i * window_s, (i + 1) * window_s)`` in epoch seconds
(the aggregation job's tumbling windows on event time), so a worker's window lines up with a
snapshot.

**Worker-windows.** A window counts for a worker (a *worker-window*) only when the worker
served for the whole of it:

* its version was active from before the window began until after it ended: from the
  flip to it to the flip away from it (:func:`live_spans`). The window in which a flip
  happens is partial for both fleets (green's first events, blue's drained backlog);
* the window lies in the measured span of the replay (:func:`measured_span`): it starts
  no earlier than the first boundary after the **warm-up backlog** came out and ends no
  later than the last boundary before the replay stopped sending. The warm-up backlog is
  what the replay sent before the first spec was active: the router holds it in the
  ingest stream until then, and the first fleet works through it in one burst that no
  load pattern caused. The replay's first and last windows hold part of a window's events.

Partial windows are shown (in parentheses in the report) but never counted. A worker that
processed nothing at all does not appear; a live worker with no events in a window counts
at 0 %.

**The target** every run is held to: at most :data:`MAX_OVER_CAP_SHARE` of the worker-windows over
the cap, none above :data:`MAX_UTILISATION` x the cap. A run with no worker-window fails
it: nothing was measured.

Everything is keyed by :func:`load_key`: the physical worker, i.e. the slot and the process
(``owner``) that served it. With carry-over swaps one process serves its slot across versions,
so it is one key and its live span is the union of the spans of every version it served (the
window of a flip counts for it: it drained the old stream and read the new one in it). Records
written before processes carried an ``owner`` fall back to ``v<version>/<worker>``. Cost reports
name no process: each is charged to the process that wrote that slot-version's records.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from geokernel.contracts.cost import CostReportRecord
from local.output import OutRecord

#: The run fails when more than this share of worker-windows is over the cap ...
MAX_OVER_CAP_SHARE = 0.02
#: ... or when any worker-window is above this multiple of the cap.
MAX_UTILISATION = 1.10


class Keyed(Protocol):
    """What :func:`load_key` reads: the worker slot and the process that served it."""

    @property
    def worker(self) -> str: ...

    @property
    def owner(self) -> str: ...


def load_key(item: Keyed) -> str:
    """The unit utilisation is measured for: one worker process, shown as ``<slot>/p<pid>``."""
    return worker_label(item.worker, item.owner)


def worker_label(worker: str, owner: str, version: int | None = None) -> str:
    """``<slot>/p<pid>`` for an owner ``<host>:<pid>:<random>``; ``v<version>/<slot>`` without an owner."""
    parts = owner.split(":")
    if len(parts) >= 3 and parts[-2].isdigit():
        return f"{worker}/p{parts[-2]}"
    if owner:
        return f"{worker}/{owner}"
    return f"v{version}/{worker}" if version is not None else worker


@dataclass(frozen=True)
class Span:
    """A time interval ``[start_s, end_s)`` in epoch seconds (``end_s`` may be infinite)."""

    start_s: float
    end_s: float = math.inf

    def covers(self, lo: float, hi: float) -> bool:
        """True when ``[lo, hi)`` lies inside the span."""
        return self.start_s <= lo and hi <= self.end_s


def live_spans(flips: Sequence[tuple[int, float]]) -> dict[int, Span]:
    """Return when each version was active: from its flip to the next flip (the last one: open).

    ``flips`` is ``(version, flipped_at)`` of every flip of the active pointer.
    """
    ordered = sorted(flips, key=lambda f: f[1])
    return {v: Span(at, ordered[i + 1][1] if i + 1 < len(ordered) else math.inf)
            for i, (v, at) in enumerate(ordered)}


def merge(spans: Iterable[Span]) -> list[Span]:
    """Merge overlapping or touching spans (a process serving v3 then v4 serves without a gap)."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda s: s.start_s):
        if out and s.start_s <= out[-1].end_s:
            out[-1] = Span(out[-1].start_s, max(out[-1].end_s, s.end_s))
        else:
            out.append(s)
    return out


def measured_span(records: Iterable[OutRecord], live_from_s: float, replay_end_s: float) -> Span:
    """The part of the replay whose windows count: after the warm-up backlog, before the replay stopped.

    Parameters
    ----------
    records
        Every enriched record.
    live_from_s
        When the replay saw the first spec active (events sent before are the warm-up backlog).
    replay_end_s
        When the replay sent its last events.
    """
    backlog_out = max((r.written_ms / 1000.0 for r in records if r.ts_ms / 1000.0 < live_from_s),
                      default=live_from_s)
    return Span(max(live_from_s, backlog_out), replay_end_s)


@dataclass(frozen=True)
class CostSample:
    """One cost report: which worker, the interval it covers, its CPU seconds and events."""

    version: int
    worker: str
    start_s: float
    end_s: float
    cpu_s: float
    events: int


def cost_sample(body: Mapping[str, Any], where: str) -> CostSample:
    """Read a cost report body with the contract's decoder (:class:`CostReportRecord`): the CPU seconds it measured.

    Raises :class:`~geokernel.contracts.errors.ContractError` (a ``ValueError``) naming ``where`` if it is bad.
    """
    report = CostReportRecord.from_dict(body, where)
    cpu_s = sum(n * report.rates.get(q, 0.0) for q, n in report.events.items()) * report.calibration
    return CostSample(report.version, report.worker, report.reported_at - report.interval_s, report.reported_at,
                      cpu_s, sum(report.events.values()))


def spread(start_s: float, end_s: float, amount: float, window_s: float) -> dict[int, float]:
    """Split ``amount`` over the windows ``[start_s, end_s)`` overlaps, in proportion to the overlap."""
    if end_s <= start_s:
        return {math.floor(end_s / window_s): amount}
    out: dict[int, float] = {}
    for i in range(math.floor(start_s / window_s), math.ceil(end_s / window_s)):
        overlap = min(end_s, (i + 1) * window_s) - max(start_s, i * window_s)
        if overlap > 0:
            out[i] = amount * overlap / (end_s - start_s)
    return out


@dataclass(frozen=True)
class Cell:
    """One counted worker-window: whose, when it started (epoch s), events and utilisation."""

    key: str
    start_s: float
    events: int
    utilisation: float


@dataclass(frozen=True)
class OverCap:
    """The over-cap target evaluated on the counted worker-windows."""

    worker_windows: int
    over: int
    above_limit: int
    worst: Cell | None

    @property
    def share(self) -> float:
        return self.over / self.worker_windows if self.worker_windows else 0.0

    @property
    def ok(self) -> bool:
        return self.worker_windows > 0 and self.share <= MAX_OVER_CAP_SHARE and self.above_limit == 0


@dataclass(frozen=True)
class WindowStats:
    """Utilisation over the counted workers of one window."""

    workers: int
    max: float
    p90: float
    median: float


@dataclass(frozen=True)
class Lag:
    """Seconds from an event's send time to the write of its output, over the measured span."""

    events: int
    p50_s: float
    p99_s: float
    max_s: float
    worst_key: str


@dataclass(frozen=True)
class WorkerLoad:
    """Events and CPU per worker per window; window ``i`` starts at ``(first_window + i) * window_s``.

    ``received[key][i]`` counts the events sent in window ``i`` that ``key`` processed (the target),
    ``processed[key][i]`` those it wrote in window ``i`` (module docstring).
    ``counted[key][i]`` says whether window ``i`` is a worker-window of ``key``;
    ``cpu_known[key][i]`` whether the key's cost reports cover all of window ``i``.
    """

    window_s: float
    cap: float
    first_window: int
    received: Mapping[str, tuple[int, ...]]
    processed: Mapping[str, tuple[int, ...]]
    counted: Mapping[str, tuple[bool, ...]]
    cpu_s: Mapping[str, tuple[float, ...]]
    cpu_known: Mapping[str, tuple[bool, ...]]
    measured: Span
    lag: Lag | None = None

    @property
    def n_windows(self) -> int:
        return len(next(iter(self.received.values()), ()))

    def window_start(self, i: int) -> float:
        return (self.first_window + i) * self.window_s

    def cells(self, series: Mapping[str, tuple[int, ...]] | None = None) -> list[Cell]:
        """Every counted worker-window of ``series`` (default: :attr:`received`)."""
        series = self.received if series is None else series
        return [Cell(key, self.window_start(i), n, n / self.cap)
                for key, row in series.items() for i, n in enumerate(row) if self.counted[key][i]]

    def over_cap(self, series: Mapping[str, tuple[int, ...]] | None = None) -> OverCap:
        """The target on :attr:`received`; pass :attr:`processed` for the write-time view."""
        cells = self.cells(series)
        return OverCap(len(cells), sum(c.utilisation > 1.0 for c in cells),
                       sum(c.utilisation > MAX_UTILISATION for c in cells),
                       max(cells, key=lambda c: c.utilisation, default=None))

    def window_stats(self, i: int) -> WindowStats | None:
        """Max, p90 and median received utilisation of the workers counted in window ``i`` (None if none)."""
        utils = [self.received[k][i] / self.cap for k in self.received if self.counted[k][i]]
        if not utils:
            return None
        a = np.asarray(utils)
        return WindowStats(len(utils), float(a.max()), float(np.quantile(a, 0.9)), float(np.median(a)))

    def counted_events(self) -> dict[str, list[int]]:
        """Per key, the received events of each counted window and 0 elsewhere (``report.json`` ``events``)."""
        return {k: [n if c else 0 for n, c in zip(s, self.counted[k], strict=True)] for k, s in self.received.items()}


def measure(records: Iterable[OutRecord], costs: Iterable[CostSample], spans: Mapping[int, Span], measured: Span,
            window_s: float, cap: float) -> WorkerLoad:
    """Count each worker's events and CPU per window and mark its worker-windows (module docstring).

    Parameters
    ----------
    records
        Every enriched record (``ts_ms`` and ``written_ms`` place it in a window).
    costs
        Every cost report.
    spans
        When each version was active (:func:`live_spans`).
    measured
        The replay span whose windows count (:func:`measured_span`).
    window_s, cap
        Window length (s) and cap (events per window), both > 0.
    """
    if not (window_s > 0 and cap > 0):
        raise ValueError(f"window_s and cap must be > 0, got {window_s!r}, {cap!r}")
    received: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    processed: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    versions: dict[str, set[int]] = defaultdict(set)
    served_by: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    lags: list[tuple[float, str]] = []
    for r in records:
        key = load_key(r) if r.owner else worker_label(r.worker, "", r.version)
        received[key][math.floor(r.ts_ms / 1000.0 / window_s)] += 1
        processed[key][math.floor(r.written_ms / 1000.0 / window_s)] += 1
        versions[key].add(r.version)
        served_by[(r.version, r.worker)][key] += 1
        if measured.covers(r.ts_ms / 1000.0, r.ts_ms / 1000.0):
            lags.append(((r.written_ms - r.ts_ms) / 1000.0, key))
    if not received:
        return WorkerLoad(window_s, cap, 0, {}, {}, {}, {}, {}, measured)
    first = min(min(c) for series in (received, processed) for c in series.values())
    n = max(max(c) for series in (received, processed) for c in series.values()) - first + 1
    starts = [(first + i) * window_s for i in range(n)]
    cpu: dict[str, list[float]] = {k: [0.0] * n for k in received}
    reported: dict[str, list[Span]] = defaultdict(list)
    for c in costs:
        by = served_by.get((c.version, c.worker))
        key = by.most_common(1)[0][0] if by else worker_label(c.worker, "", c.version)
        if key in cpu:
            reported[key].append(Span(c.start_s, c.end_s))
            for i, part in spread(c.start_s, c.end_s, c.cpu_s, window_s).items():
                if 0 <= i - first < n:
                    cpu[key][i - first] += part
    counted, known = {}, {}
    for key, vs in versions.items():
        live = merge(spans[v] for v in vs if v in spans)
        counted[key] = tuple(measured.covers(s, s + window_s) and _inside(live, s, s + window_s) for s in starts)
        covered = merge(reported[key])
        known[key] = tuple(_inside(covered, s, s + window_s) for s in starts)

    def rows(series: dict[str, dict[int, int]]) -> dict[str, tuple[int, ...]]:
        return {k: tuple(c.get(first + i, 0) for i in range(n)) for k, c in series.items()}

    return WorkerLoad(window_s, cap, first, rows(received), rows(processed), counted,
                      {k: tuple(v) for k, v in cpu.items()}, known, measured, _lag(lags))


def _lag(lags: Sequence[tuple[float, str]]) -> Lag | None:
    if not lags:
        return None
    a = np.asarray([x for x, _ in lags])
    worst = max(lags, key=lambda x: x[0])
    return Lag(len(lags), float(np.quantile(a, 0.5)), float(np.quantile(a, 0.99)), float(a.max()), worst[1])


def _inside(spans: Sequence[Span], lo: float, hi: float) -> bool:
    return any(s.covers(lo, hi) for s in spans)
