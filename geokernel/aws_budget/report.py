"""Hold a :class:`~geokernel.aws_budget.calls.CallLog` against the quota table: one row per quota, its busiest
scope, peak and sustained rate, and the margin (quota / use); and check that calls grow linearly in workers.

Notes
-----
* **Peak** is the busiest second of the busiest scope (for a token bucket, the busiest second is held against the
  bucket, ``burst``, and the busiest ``window_s`` against the refill rate). **Sustained** is the mean over the
  busiest ``window_s`` (default 10 s) of the busiest scope, held against ``per_second``.
* The margin is ``min(quota / peak, quota / sustained)``; ``MIN_MARGIN`` (2x) is what the scale test demands, so
  every API stays at or below half its quota.
* A row with no documented quota (``per_second`` None) and a call no row covers are reported with their rates and
  no margin: counted, never hidden.
* A quota of fewer than ``MIN_MARGIN`` calls per second (``DescribeLimits``: one per second) cannot show a 2x margin
  in whole seconds: one call in a second passes if the sustained rate keeps the margin.
* Lambda concurrency is a level, not a rate: its "per second" samples are the concurrent executions seen in that
  second, and the peak is held against the limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from geokernel.aws_budget.calls import CallLog, Series
from geokernel.aws_budget.quotas import BY_KEY, Quota

MIN_MARGIN = 2.0
WINDOW_S = 10
CONTROL_PLANE = ("kinesis.DescribeStreamSummary", "kinesis.DescribeStream", "kinesis.ListShards",
                 "kinesis.CreateStream", "kinesis.DeleteStream", "kinesis.DescribeLimits", "kinesis.ListStreams",
                 "dynamodb.GetItem", "dynamodb.BatchGetItem", "dynamodb.UpdateItem", "dynamodb.PutItem",
                 "dynamodb.Query", "dynamodb.Scan", "ecs.UpdateService", "ecs.DescribeServices",
                 "ecs.RegisterTaskDefinition", "ecs.UpdateTaskProtection", "s3.get.prefix")


@dataclass(frozen=True)
class BudgetRow:
    """One quota row's use: its busiest scope, the peak second and the busiest ``WINDOW_S`` mean, per second."""

    key: str
    scope: str
    scopes: int
    peak: float
    sustained: float
    total: float
    quota: Quota | None

    @property
    def margin(self) -> float | None:
        """quota / use (the smaller of the peak's and the sustained rate's); None without a documented quota."""
        q = self.quota
        if q is None or q.per_second is None:
            return None
        peak_limit = q.burst if q.burst is not None else q.per_second
        sustained = q.per_second / self.sustained if self.sustained else float("inf")
        if self.peak <= 1.0 and peak_limit < MIN_MARGIN:
            return sustained  # one call in a second is the least use there is (e.g. DescribeLimits, 1 per second)
        return min(peak_limit / self.peak if self.peak else float("inf"), sustained)

    @property
    def ok(self) -> bool:
        return self.margin is None or self.margin >= MIN_MARGIN


def _sustained(seconds: Mapping[int, float], window_s: int) -> float:
    if not seconds:
        return 0.0
    times = sorted(seconds)
    best, total, lo = 0.0, 0.0, 0
    for t in times:
        total += seconds[t]
        while times[lo] <= t - window_s:
            total -= seconds[times[lo]]
            lo += 1
        best = max(best, total)
    return best / window_s


def budget(log: CallLog | Iterable[Series], window_s: int = WINDOW_S,
           overrides: Mapping[tuple[str, str], Quota] | None = None) -> list[BudgetRow]:
    """One :class:`BudgetRow` per quota row (or uncovered call) the log used, worst margin first.

    ``overrides``: ``{(quota key, scope): quota}`` for a scope whose quota differs from the row's (a pre-warmed
    table: :func:`geokernel.aws_budget.quotas.warm_table`). A row with one shows its scope of least margin;
    without, its busiest scope.
    """
    by_key: dict[str, list[Series]] = {}
    for s in log.series() if isinstance(log, CallLog) else log:
        by_key.setdefault(s.key, []).append(s)
    rows = []
    for key, series in by_key.items():
        total = sum(sum(s.seconds.values()) for s in series)
        scored = [BudgetRow(key, s.scope, len(series), max(s.seconds.values(), default=0.0),
                            _sustained(s.seconds, window_s), total, (overrides or {}).get((key, s.scope), BY_KEY.get(key)))
                  for s in series]
        if any((key, s.scope) in (overrides or {}) for s in series):
            rows.append(min(scored, key=lambda r: (float("inf") if r.margin is None else r.margin, -r.peak)))
            continue
        busiest = max(scored, key=lambda r: r.peak)
        rows.append(BudgetRow(key, busiest.scope, len(series), busiest.peak, max(r.sustained for r in scored), total,
                              busiest.quota))
    return sorted(rows, key=lambda r: (r.margin is None, r.margin if r.margin is not None else 0.0, r.key))


def failures(rows: Sequence[BudgetRow]) -> list[str]:
    """One line per row below :data:`MIN_MARGIN`."""
    return [f"{r.key}: {_fmt(r.peak)}/s peak, {_fmt(r.sustained)}/s sustained in {r.scope!r} against "
            f"{_quota_text(r.quota)}: margin {r.margin:.2f}x < {MIN_MARGIN:g}x"
            for r in rows if not r.ok and r.margin is not None]


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}"


def _quota_text(q: Quota | None) -> str:
    if q is None or q.per_second is None:
        return "no documented quota"
    burst = f" (bucket {q.burst:g})" if q.burst is not None else ""
    return f"{q.per_second:,g} {q.unit}/s per {q.scope}{burst}"


def render(rows: Sequence[BudgetRow], title: str = "AWS API budget") -> str:
    """A fixed-width table: API, busiest scope, peak/s, sustained/s, quota, margin."""
    out = [f"{title} (peak = busiest second, sustained = busiest {WINDOW_S} s; margin must be >= {MIN_MARGIN:g}x)",
           f"{'quota row':38} {'scopes':>6} {'peak/s':>10} {'sust/s':>10} {'quota':>34} {'margin':>8}  busiest scope"]
    for r in rows:
        margin = "-" if r.margin is None else ("inf" if r.margin == float("inf") else f"{r.margin:.1f}x")
        flag = "" if r.ok else "  BELOW"
        out.append(f"{r.key:38} {r.scopes:>6} {_fmt(r.peak):>10} {_fmt(r.sustained):>10} "
                   f"{_quota_text(r.quota):>34} {margin:>8}  {r.scope[:48]}{flag}")
    return "\n".join(out)


@dataclass(frozen=True)
class Growth:
    """How one API's sustained rate grew from the smallest to the largest fleet: the fitted exponent of
    ``rate ~ workers ** exponent`` (1 = linear, 2 = squared)."""

    key: str
    rates: tuple[float, ...]
    exponent: float

    @property
    def linear(self) -> bool:
        return self.exponent <= LINEAR_MAX_EXPONENT


LINEAR_MAX_EXPONENT = 1.25


def growth(workers: Sequence[int], totals: Sequence[Mapping[str, float]], keys: Iterable[str] = CONTROL_PLANE,
           floor: float = 0.05) -> list[Growth]:
    """Fit the exponent of each API's total calls per second across fleets of ``workers`` (least squares on
    logs). Rates below ``floor`` calls/s in every run are too few to fit and are left out.

    Notes
    -----
    Whole-run totals (calls per simulated second over the same phases), not peaks: a peak is one second and
    depends on how the workers' timers happen to line up.
    """
    out = []
    for key in keys:
        rates = tuple(float(t.get(key, 0.0)) for t in totals)
        if max(rates, default=0.0) < floor or min(rates) <= 0:
            if max(rates, default=0.0) >= floor:
                out.append(Growth(key, rates, float("inf")))
            continue
        xs = [math.log(w) for w in workers]
        ys = [math.log(r) for r in rates]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0
        out.append(Growth(key, rates, slope))
    return out


def rates_per_api(log: CallLog | Iterable[Series], seconds: float) -> dict[str, float]:
    """Every row's total usage divided by ``seconds`` (the run's length), summed over scopes."""
    totals: dict[str, float] = {}
    for s in log.series() if isinstance(log, CallLog) else log:
        totals[s.key] = totals.get(s.key, 0.0) + sum(s.seconds.values())
    return {k: v / seconds for k, v in totals.items()}
