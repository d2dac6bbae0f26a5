"""The local report's swap section and the swap invariants, from what the run recorded.

Inputs: the enriched records (one :class:`local.output.Processed` per output line: which process read the event from which
version's stream, and when), the deploy plans and lease tenures the observer saw
(:class:`local.observe.ControlObserver`), the flips, and the local fleet's process history
(:class:`local.fleet.FleetEvent`).

**Per swap** (one row per flip from a version n to m, :class:`SwapRow`; ``report.json`` ``"swaps"``):

* ``carried``: slots the plan kept whose ``v<m>#w`` lease was first held by the process that held ``v<n>#w``
  (same owner, so the same process id); ``carried_share`` = carried / slots of m; ``carryable`` = min(slots of
  n, slots of m), what old processes could carry (the carry invariant's base: a grow's new slots need new ones);
* ``started``: processes the fleet started for m; ``stopped``: processes that held a slot of n the plan
  stops (every slot in ``whole`` mode), i.e. drained n and exited;
* ``moved_cells``: cells of m that changed worker (the plan's count);
* ``extra_worker_s``: worker-seconds the swap cost beyond the steady fleet: each started process from its
  start to the flip, plus each stopped process from the flip to its exit. A carried process costs nothing
  extra (it loads what it gains while serving);
* ``handover_s``: for the carried slots, the median time from the flip until the process processed its first
  record of the new version (``serving_at``: its records pass the handover gate once every old slot caught up
  past them, :mod:`geo_service.swap.handover`; a slot that got no record is left out).
* ``kept_lag_p99_s`` / ``moved_lag_p99_s``: the p99 lag (event sent -> output written) of the new version's
  records that carried processes processed in the ``LAG_WINDOW_S`` after the flip, for places that stayed with
  the slot (kept cells: no pause expected) and for places that came from another slot (moved cells: they wait
  for the old worker's drain); ``before_lag_p99_s``: the same processes' old-version records in the
  ``LAG_WINDOW_S`` before the flip, the baseline a kept cell is compared with. Needs the specs; empty without.

**Timings** (:class:`SwapTimings`, ``report.json`` ``"swap_timings"``, the medians a simulator can take its
swap time from): ``process_start_s`` (process started -> first lease claimed), ``warm_up_s`` (claimed ->
ready), ``carry_prepare_s`` (a carried slot's new lease claimed -> ready), ``drain_s`` (flip -> old lease
drained).

**Checks** (:func:`checks`): the three of :mod:`local.report.swap_checks` (per-entity order, the router flips each
entity once, never two readers of one cell at once), and in ``carry`` mode the median swap's carried share.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from geokernel.contracts.plan import PlanItem, SwapMode
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from local.output import Processed
from local.report.swap_checks import Check, flip_check, order_check, reader_check

LAG_WINDOW_S = 10.0  # the handover lag looks at the new version's records processed this long after the flip


class Tenure(Protocol):
    """What the swap section reads of a lease tenure (:class:`local.observe.LeaseTenure`)."""

    version: int
    worker: str
    owner: str
    claimed_at: float | None
    ready_at: float | None
    serving_at: float | None
    drained_at: float | None
    released_at: float | None

    @property
    def pid(self) -> int | None: ...


class Event(Protocol):
    """A fleet history entry (:class:`local.fleet.FleetEvent`)."""

    at: float
    kind: str
    version: int
    worker: str
    pid: int


@dataclass(frozen=True)
class Flip:
    """The active pointer moved from ``from_version`` to ``to_version`` at ``at`` (epoch s)."""

    from_version: int
    to_version: int
    at: float


@dataclass(frozen=True)
class SwapRow:
    """One swap; see the module docstring."""

    from_version: int
    to_version: int
    mode: str
    slots: int
    kept: int
    carried: int
    started: int
    stopped: int
    moved_cells: int
    extra_worker_s: float
    handover_s: float | None
    kept_lag_p99_s: float | None = None
    moved_lag_p99_s: float | None = None
    before_lag_p99_s: float | None = None
    #: slots an old process could carry: min(old slots, new slots); a grown fleet's extra slots need new processes
    carryable: int = 0

    @property
    def carried_share(self) -> float:
        return self.carried / self.slots if self.slots else 0.0

    @property
    def carried_of_carryable(self) -> float:
        return self.carried / self.carryable if self.carryable else 0.0

    def to_json(self) -> dict[str, Any]:
        out = {"from": self.from_version, "to": self.to_version, **asdict(self)}
        for k in ("from_version", "to_version"):
            out.pop(k)
        out["carried_share"] = round(self.carried_share, 4)
        return out


@dataclass(frozen=True)
class SwapTimings:
    """Medians (seconds) of the parts of a swap, and how many samples each has."""

    process_start_s: float | None
    warm_up_s: float | None
    carry_prepare_s: float | None
    drain_s: float | None
    handover_s: float | None
    samples: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SwapsReport:
    """The swap rows, the timings, and the checks."""

    rows: tuple[SwapRow, ...]
    timings: SwapTimings
    order: Check
    readers: Check
    flips: Check  # the router flips each entity once (swap_checks.flip_check)

    @property
    def median_carried_share(self) -> float | None:
        return statistics.median(r.carried_share for r in self.rows) if self.rows else None

    @property
    def median_carried_of_carryable(self) -> float | None:
        """The invariant's measure: a grow's new slots need new processes whatever the mechanism (a quick run
        under load once grew in two of three swaps: 71% of all slots carried, 100% of those an old process had)."""
        return statistics.median(r.carried_of_carryable for r in self.rows) if self.rows else None


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


class _Index:
    """Tenures by (version, worker) and process exits by pid."""

    def __init__(self, tenures: Iterable[Tenure], history: Iterable[Event]) -> None:
        self.by_slot: dict[tuple[int, str], list[Tenure]] = defaultdict(list)
        for t in tenures:
            self.by_slot[(t.version, t.worker)].append(t)
        self.exits: dict[int, float] = {}
        self.starts: list[Event] = []
        for e in history:
            if e.kind in ("exit", "stop"):
                self.exits.setdefault(e.pid, e.at)
            elif e.kind in ("start", "restart"):
                self.starts.append(e)

    def first(self, version: int, worker: str) -> Tenure | None:
        held = self.by_slot.get((version, worker))
        return held[0] if held else None

    def last(self, version: int, worker: str) -> Tenure | None:
        held = self.by_slot.get((version, worker))
        return held[-1] if held else None


def swap_rows(flips: Sequence[Flip], plans: Mapping[int, PlanItem], slots: Mapping[int, int],
              index: _Index) -> list[tuple[SwapRow, list[float]]]:
    """One row per flip between two versions (with the carried slots' handover times); no plan seen = nothing kept."""
    rows: list[tuple[SwapRow, list[float]]] = []
    for flip in flips:
        n, m = flip.from_version, flip.to_version
        plan = plans.get(m)
        mode = plan.mode.value if plan else SwapMode.CARRY.value
        kept, stopped_slots = (plan.kept, plan.stopped) if plan else ((), ())
        carried, handovers = 0, []
        for w in kept:
            old, new = index.last(n, w), index.first(m, w)
            if old is not None and new is not None and old.owner == new.owner:
                carried += 1
                if new.serving_at is not None:
                    handovers.append(new.serving_at - flip.at)
        started = [e for e in index.starts if e.version == m and e.kind == "start"]
        extra = sum(max(0.0, flip.at - e.at) for e in started)
        stopped = 0
        for w in stopped_slots:
            held = index.last(n, w)
            if held is None:
                continue
            stopped += 1
            end = index.exits.get(held.pid or -1) or held.released_at or held.drained_at
            extra += max(0.0, (end or flip.at) - flip.at)
        rows.append((SwapRow(n, m, mode, slots.get(m, 0), len(kept), carried, len(started), stopped,
                             plan.moved_cells if plan else 0, round(extra, 3), _median(handovers),
                             carryable=min(slots.get(n, 0), slots.get(m, 0))), handovers))
    return rows


def swap_timings(flips: Sequence[Flip], plans: Mapping[int, PlanItem], index: _Index,
                 handovers: Sequence[float]) -> SwapTimings:
    """The medians of :class:`SwapTimings` over every swap of the run (the first deploy's starts included)."""
    first_claim: dict[int, Tenure] = {}
    for held in index.by_slot.values():
        for t in held:
            pid = t.pid
            if pid is not None and t.claimed_at is not None and (pid not in first_claim
                                                               or t.claimed_at < (first_claim[pid].claimed_at or 0)):
                first_claim[pid] = t
    start, warm = [], []
    for e in index.starts:
        first = first_claim.get(e.pid)
        if first is not None and first.claimed_at is not None:
            start.append(first.claimed_at - e.at)
            if first.ready_at is not None:
                warm.append(first.ready_at - first.claimed_at)
    prepare, drain = [], []
    for flip in flips:
        for w in plans[flip.to_version].kept if flip.to_version in plans else ():
            new, old = index.first(flip.to_version, w), index.last(flip.from_version, w)
            if new is not None and old is not None and new.owner == old.owner and new.claimed_at and new.ready_at:
                prepare.append(new.ready_at - new.claimed_at)
        for (version, _w), held in index.by_slot.items():
            if version == flip.from_version and held[-1].drained_at is not None:
                drain.append(held[-1].drained_at - flip.at)
    samples = {"process_start": len(start), "warm_up": len(warm), "carry_prepare": len(prepare), "drain": len(drain),
               "handover": len(handovers)}
    return SwapTimings(_median(start), _median(warm), _median(prepare), _median(drain), _median(handovers), samples)


def swaps_report(records: Iterable[Processed], flips: Sequence[Flip], plans: Mapping[int, PlanItem],
                 slots: Mapping[int, int], tenures: Iterable[Tenure], history: Iterable[Event],
                 specs: Mapping[int, Spec | None] | None = None) -> SwapsReport:
    """Everything of the module docstring; ``slots`` is the worker count of each spec version, ``specs`` the specs
    (for the handover lag of kept and moved cells; without them those columns stay empty)."""
    recs = list(records)
    index = _Index(tenures, history)
    rows = swap_rows(flips, plans, slots, index)
    if specs:
        rows = [(handover_lags(row, flip, recs, specs, index), hs) for (row, hs), flip in zip(rows, flips, strict=True)]
    handovers = [h for _row, hs in rows for h in hs]
    return SwapsReport(tuple(r for r, _h in rows), swap_timings(flips, plans, index, handovers), order_check(recs),
                       reader_check(recs), flip_check(recs))


def handover_lags(row: SwapRow, flip: Flip, records: Sequence[Processed], specs: Mapping[int, Spec | None],
                  index: _Index) -> SwapRow:
    """``row`` with the p99 lag (send -> output) of the new version's records that carried processes processed in
    the :data:`LAG_WINDOW_S` after the flip, split by whether the record's place stayed with its slot (kept cell)
    or belonged to another slot in the old version (moved cell, which waits for its old worker's drain)."""
    old = specs.get(row.from_version)
    if old is None:
        return row
    carriers = {(w, t.owner) for w in {r.worker for r in records if r.version == row.to_version}
                if (t := index.first(row.to_version, w)) is not None
                and (o := index.last(row.from_version, w)) is not None and o.owner == t.owner}
    lo, hi = flip.at * 1000, (flip.at + LAG_WINDOW_S) * 1000
    picked = [r for r in records if r.version == row.to_version and r.sent_ms is not None
              and lo <= r.processed_ms <= hi and (r.worker, r.owner) in carriers]
    before = [(r.processed_ms - (r.sent_ms or 0)) / 1000 for r in records
              if r.version == row.from_version and r.sent_ms is not None and lo - LAG_WINDOW_S * 1000 <= r.processed_ms
              < lo and (r.worker, r.owner) in carriers]
    row = replace(row, before_lag_p99_s=_p99(before))
    if not picked:
        return row
    owners = SpecIndex(old).locate([r.lon for r in picked], [r.lat for r in picked], [r.entity for r in picked])
    kept: list[float] = []
    moved: list[float] = []
    for r, k in zip(picked, owners.tolist(), strict=True):
        (kept if old.partitions[k].worker == r.worker else moved).append((r.processed_ms - (r.sent_ms or 0)) / 1000)
    return replace(row, kept_lag_p99_s=_p99(kept), moved_lag_p99_s=_p99(moved))


def _p99(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3)


def _fmt(v: float | None, unit: str = "s") -> str:
    return "-" if v is None else f"{v:.1f}{unit}"


def report_lines(rep: SwapsReport) -> list[str]:
    """The report.txt section."""
    lines = ["SWAPS (carried = kept slots whose new lease went to the same process; extra worker-s = started "
             "processes' time before the flip + stopped processes' time after it; handover = flip -> carried slot "
             f"processes its first record of the new version; lag kept / moved = p99 send -> output of the carried "
             f"slots' new-version records in the {LAG_WINDOW_S:g} s after the flip, in cells that stayed with the slot "
             "/ that came from another slot; lag before = their old-version records in the same span before the flip)",
             f"  {'swap':<9} {'mode':<6} {'slots':>5} {'kept':>5} {'carried':>8} {'started':>8} {'stopped':>8} "
             f"{'moved cells':>11} {'extra worker-s':>15} {'handover':>9} {'lag before':>10} {'lag kept':>9} "
             f"{'lag moved':>9}"]
    for r in rep.rows:
        lines.append(f"  {f'v{r.from_version}->v{r.to_version}':<9} {r.mode:<6} {r.slots:>5} {r.kept:>5} "
                     f"{r.carried:>3} {100 * r.carried_share:>3.0f}% {r.started:>8} {r.stopped:>8} "
                     f"{r.moved_cells:>11} {r.extra_worker_s:>15.1f} {_fmt(r.handover_s):>9} "
                     f"{_fmt(r.before_lag_p99_s):>10} {_fmt(r.kept_lag_p99_s):>9} {_fmt(r.moved_lag_p99_s):>9}")
    if not rep.rows:
        lines.append("  (no swap between two versions in this run)")
    t = rep.timings
    lines.append(f"  medians: process start {_fmt(t.process_start_s)}, warm-up {_fmt(t.warm_up_s)}, carried slot "
                 f"prepared {_fmt(t.carry_prepare_s)}, drain after the flip {_fmt(t.drain_s)}, handover "
                 f"{_fmt(t.handover_s)} (samples {dict(t.samples)})")
    return lines


def report_json(rep: SwapsReport) -> dict[str, Any]:
    """``report.json`` fields: ``swaps`` (rows) and ``swap_timings``."""
    return {"swaps": [r.to_json() for r in rep.rows], "swap_timings": asdict(rep.timings),
            "median_carried_share": rep.median_carried_share}


def from_run(observer: Any, fleet: Any, records: Iterable[Processed]) -> SwapsReport:
    """The swap section of a local run: the observer's flips, plans and tenures, the fleet's history, the records
    (no swap when the run failed before its observer started)."""
    if observer is None:
        return swaps_report(records, [], {}, {}, [], [])
    flips = [Flip(old, new, observer.timeline(new).flipped_at or at) for old, new, at in observer.flips
             if old is not None]
    tenures = [t for held in observer.tenures.values() for t in held]
    history = fleet.history if fleet is not None else []
    return swaps_report(records, flips, observer.plans, observer.spec_slots, tenures, history,
                        getattr(observer, "specs", None))


def checks(rep: SwapsReport, mode: str) -> list[tuple[str, bool, str]]:
    """The report's swap invariants as (name, ok, detail); the carry share applies to ``carry`` runs only."""
    share = rep.median_carried_of_carryable
    out = [("never two readers of one cell at once", rep.readers.ok,
            f"{rep.readers.checked} cells checked, {rep.readers.violations} overlaps {list(rep.readers.sample)}"),
           ("per-entity order kept across every flip", rep.order.ok,
            f"{rep.order.checked} entities checked, {rep.order.violations} out of order {list(rep.order.sample)}"),
           ("the router flips each entity once (nothing put on an older stream after a newer one)", rep.flips.ok,
            f"{rep.flips.checked} entities checked, {rep.flips.violations} put back {list(rep.flips.sample)}")]
    if mode == "carry":
        out.append(("the median swap carries over >= 80% of the slots an old process could carry",
                    share is None or share >= 0.8,
                    f"median {'-' if share is None else f'{100 * share:.0f}%'} over {len(rep.rows)} swaps "
                    f"({', '.join(f'v{r.from_version}->v{r.to_version} {r.carried}/{r.carryable} (of {r.slots})' for r in rep.rows)})"))
    return out
