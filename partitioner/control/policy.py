"""Rebalance policy: is a candidate spec worth a redeploy, and why.

A redeploy costs a blue/green swap (a new geo stream, warm-up, drain), so the
partitioner publishes a candidate only when the current spec is in trouble or
wasteful under the **new** load, and the candidate actually changes something:

* **high watermark**: any worker of the current spec above ``high_watermark`` x
  ``max_load`` under the new load -> redeploy;
* **waste**: the current spec needs more than ``max_waste_ratio`` x the lower bound
  ``ceil(total / max_load)`` workers and the candidate needs fewer -> redeploy to save;
* **low watermark**: the current workers' mean utilisation under the new load is below
  ``low_watermark`` and the candidate needs fewer workers -> redeploy to save;
* **cooldown**: no redeploy within ``cooldown_s`` of the last publish unless a worker
  is over 100 % (dropping data is worse than churn);
* **minimum change**: a candidate that moves less than ``min_change`` of the load and
  does not cut workers is not worth a swap (except to relieve a worker over 100 %);
* a candidate that itself has a worker over 100 % while being no better than the
  current spec is never published.

Every decision carries human-readable reasons, e.g. ``"worker w0003 at 131% of
max_load under new load (high watermark 90%)"`` or ``"kept: max utilisation 72% below
high watermark 90%, waste 1.08x lower bound <= 1.25x"``.

This is the **reactive** policy: it judges the specs under the snapshot that just closed.
The controller's default is the predictive policy (:mod:`partitioner.control.predictive`), which
judges them under the load forecast for when a new fleet would go live; both return a
:class:`Decision`. Loads come from the load-only evaluation (:mod:`partitioner.load.loads`), so a
decision costs two attributions, not two full :func:`partitioner.output.metrics.evaluate` runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any

from geokernel.errors import PolicyError
from geokernel.partition_spec.model import Spec
from partitioner.load.counts import Counts
from partitioner.load.loads import OVER, LoadMetrics, cells_of, load_metrics, moves, spec_loads

OVERLOAD = 1.0  # utilisation above which a worker drops behind: overrides cooldown and min_change


def _pct(v: float) -> str:
    return f"{100.0 * v:.0f}%"


@dataclass(frozen=True)
class RebalancePolicy:
    """Thresholds of the redeploy decision (validated on construction).

    Parameters
    ----------
    high_watermark : float
        Utilisation in (0, 1] above which a worker triggers a redeploy.
    low_watermark : float
        Mean utilisation in [0, high_watermark) below which fewer workers are worth a redeploy.
    max_waste_ratio : float
        Workers per lower-bound worker (>= 1) above which fewer workers are worth a redeploy.
    cooldown_s : float
        Seconds (>= 0) after a publish during which only an overload (> 100 %) redeploys.
    min_change : float
        Share of load in [0, 1] a candidate must move (unless it cuts workers).
    target_fill : float
        Utilisation in (0, high_watermark] that the partitioner packs a new spec to
        (``build_spec(..., fill=target_fill)``), leaving headroom below the high
        watermark so routine growth does not trigger the next redeploy at once.

    Raises
    ------
    PolicyError
        Naming the field and the bad value.
    """

    high_watermark: float = 0.9
    low_watermark: float = 0.5
    max_waste_ratio: float = 1.25
    cooldown_s: float = 600.0
    min_change: float = 0.05
    target_fill: float = 0.8

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise PolicyError(f"policy {f.name} must be a finite number, got {v!r}")
        if not 0 < self.high_watermark <= 1:
            raise PolicyError(f"policy high_watermark must be in (0, 1], got {self.high_watermark!r}")
        if not 0 <= self.low_watermark < self.high_watermark:
            raise PolicyError(f"policy low_watermark must be in [0, high_watermark={self.high_watermark!r}), "
                              f"got {self.low_watermark!r}")
        if self.max_waste_ratio < 1:
            raise PolicyError(f"policy max_waste_ratio must be >= 1, got {self.max_waste_ratio!r}")
        if self.cooldown_s < 0:
            raise PolicyError(f"policy cooldown_s must be >= 0, got {self.cooldown_s!r}")
        if not 0 <= self.min_change <= 1:
            raise PolicyError(f"policy min_change must be in [0, 1], got {self.min_change!r}")
        if not 0 < self.target_fill <= self.high_watermark:
            raise PolicyError(f"policy target_fill must be in (0, high_watermark={self.high_watermark!r}], "
                              f"got {self.target_fill!r}")

    @classmethod
    def from_json(cls, text: str | None, where: str = "POLICY_JSON") -> RebalancePolicy:
        """Parse a policy from a JSON object (e.g. the ``POLICY_JSON`` env var of the Lambdas).

        Missing keys take their defaults; ``None``, ``""`` or whitespace give the default policy.
        Unknown keys, non-objects and bad values raise :class:`PolicyError` naming ``where``.
        """
        data = policy_object(text, where, {f.name for f in fields(cls)})
        if data is None:
            return cls()
        try:
            return cls(**data)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from exc

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def decide(self, current: Spec | None, candidate: Spec, counts: Counts, now: datetime,
               last_published_at: datetime | None) -> Decision:
        """Decide whether to publish ``candidate`` instead of ``current`` under the load ``counts``.

        Parameters
        ----------
        current : Spec or None
            The live spec (None on the first run: always publish).
        candidate : Spec
            The spec just built from ``counts``.
        counts : Counts
            The new load.
        now, last_published_at : datetime
            Both timezone-aware or both naive; ``last_published_at`` None means never.

        Returns
        -------
        Decision

        Notes
        -----
        A ``last_published_at`` in the future (clock skew) counts as "just published".
        """
        cells = cells_of(counts)
        cand_loads = spec_loads(candidate)
        cand = load_metrics(cand_loads, cells)
        if current is None:
            return Decision(True, ("no current spec: publish the first one",), None, cand, 1.0)
        cur_loads = spec_loads(current)
        cur = load_metrics(cur_loads, cells)
        moved = moves(cur_loads, cand_loads, cells).moved_share
        triggers = self._triggers(cur, cand)
        overloaded = cur.hottest(1, above=OVERLOAD + OVER)
        if not triggers:
            return Decision(False, (self._kept_reason(cur),), cur, cand, moved)
        if cand.max_utilisation > OVERLOAD + OVER and cand.max_utilisation >= cur.max_utilisation:
            return Decision(False, (*triggers, f"kept: candidate is no better (max utilisation "
                                    f"{_pct(cand.max_utilisation)} >= current {_pct(cur.max_utilisation)})"),
                            cur, cand, moved)
        elapsed = _elapsed(now, last_published_at)
        if elapsed is not None and elapsed < self.cooldown_s and not overloaded:
            return Decision(False, (*triggers, f"kept: in cooldown ({elapsed:.0f} s since last publish < "
                                    f"{self.cooldown_s:g} s) and no worker above 100%"), cur, cand, moved)
        cuts = cand.worker_count < cur.worker_count
        if moved < self.min_change and not cuts and not overloaded:
            return Decision(False, (*triggers, f"kept: candidate moves only {100 * moved:.1f}% of load "
                                    f"(< min_change {_pct(self.min_change)}) and does not cut workers"),
                            cur, cand, moved)
        tail = (f"redeploy: candidate uses {cand.worker_count} workers (current {cur.worker_count}, lower bound "
                f"{cand.lower_bound}), max utilisation {_pct(cand.max_utilisation)}, moves "
                f"{100 * moved:.1f}% of load")
        return Decision(True, (*triggers, tail), cur, cand, moved)

    def _triggers(self, cur: LoadMetrics, cand: LoadMetrics) -> tuple[str, ...]:
        out: list[str] = []
        hot = cur.hottest(cur.worker_count, above=self.high_watermark)
        for wid, u in hot[:3]:
            out.append(f"worker {wid} at {_pct(u)} of max_load under new load "
                       f"(high watermark {_pct(self.high_watermark)})")
        if len(hot) > 3:
            out.append(f"... and {len(hot) - 3} more workers above the high watermark")
        fewer = cand.worker_count < cur.worker_count
        if cur.waste_ratio > self.max_waste_ratio and fewer:
            out.append(f"waste: {cur.worker_count} workers = {cur.waste_ratio:.2f}x lower bound {cur.lower_bound} "
                       f"> {self.max_waste_ratio:g}x; candidate needs {cand.worker_count}")
        if cur.mean_utilisation < self.low_watermark and fewer:
            out.append(f"under-used: mean utilisation {_pct(cur.mean_utilisation)} below low watermark "
                       f"{_pct(self.low_watermark)}; candidate needs {cand.worker_count} workers instead of "
                       f"{cur.worker_count}")
        return tuple(out)

    def _kept_reason(self, cur: LoadMetrics) -> str:
        return (f"kept: max utilisation {_pct(cur.max_utilisation)} below high watermark "
                f"{_pct(self.high_watermark)}, waste {cur.waste_ratio:.2f}x lower bound "
                f"{'<=' if cur.waste_ratio <= self.max_waste_ratio else '>'} {self.max_waste_ratio:g}x, "
                f"mean utilisation {_pct(cur.mean_utilisation)}")


def policy_object(text: str | None, where: str, known: set[str]) -> dict[str, Any] | None:
    """Parse a ``POLICY_JSON``-style object: None for empty text; :class:`PolicyError` naming ``where`` for
    invalid JSON, a non-object or a key outside ``known``."""
    if text is None or not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PolicyError(f"{where}: not valid JSON ({exc}): {text[:80]!r}") from exc
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: expected a JSON object, got {data!r}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise PolicyError(f"{where}: unknown policy key {unknown[0]!r}; known keys are {sorted(known)!r}")
    return data


def _summary(m: LoadMetrics | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {"version": m.version, "workers": m.worker_count, "max_utilisation": m.max_utilisation,
            "lower_bound": m.lower_bound}


def _elapsed(now: datetime, last: datetime | None) -> float | None:
    if last is None:
        return None
    if (now.tzinfo is None) != (last.tzinfo is None):
        raise PolicyError(f"now {now.isoformat()!r} and last_published_at {last.isoformat()!r} must both be "
                          f"timezone-aware or both naive")
    return max(0.0, (now - last).total_seconds())


@dataclass(frozen=True)
class Decision:
    """A policy's verdict: publish or keep, the reasons, and the evidence.

    ``current_metrics`` / ``candidate_metrics`` are worker loads under the load the policy judged by
    (the snapshot for the reactive policy, the forecast for the predictive one); either is None when
    there is no such spec (cold start; the predictive policy builds no candidate when nothing
    triggers). ``details`` holds the predictive policy's numbers (fill, headroom, horizon).
    """

    redeploy: bool
    reasons: tuple[str, ...]
    current_metrics: LoadMetrics | None
    candidate_metrics: LoadMetrics | None
    moved_share: float
    details: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A compact JSON-able summary (what the control table records as ``last_decision``)."""
        return {
            "redeploy": self.redeploy,
            "reasons": list(self.reasons),
            "moved_share": self.moved_share,
            "current": _summary(self.current_metrics),
            "candidate": _summary(self.candidate_metrics),
            **({"details": dict(self.details)} if self.details else {}),
        }

    def render(self) -> str:
        head = "REDEPLOY" if self.redeploy else "KEEP"
        return "\n".join([f"decision: {head} (moves {100 * self.moved_share:.1f}% of load)",
                          *(f"  - {r}" for r in self.reasons)])
