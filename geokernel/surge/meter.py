"""The surge meter: events per grid cell over short intervals, and the workers a surge is taking past their cap.

The meter keeps the counts of the last intervals (:class:`Interval`, each a share of the snapshot window) and, at each
interval's close, judges the last ``recent_buckets`` of them (a sliding window, checked every interval) against the
ones before (:meth:`SurgeMeter.check`):

1. **Shares, not rates.** A router execution environment sees an unknown share of all events (its ingest shards'
   batches), so every count is read as a share of the interval's events, and a share as load through the spec's
   plan: share ``s`` of the events is ``s x k`` per window, ``k`` the median over the workers of what each was
   planned to carry per share of the events it carried before the recent intervals.
2. **A cell surges** when its count in the last interval exceeds what its share before predicts by more than
   ``rise_z`` Poisson standard deviations and by ``min_rise`` of the cap.
3. **A worker signals** when its load in the last interval plus the rise per second of its surging cells over
   ``horizon_s`` (the interval and the relief's latency) exceeds ``trigger`` x the cap: it heads past its cap before
   a relief could be live. One signal per spec version and worker from a meter.

Notes
-----
* A cell split by entity hash (:data:`geokernel.surge.view.SPLIT`) is left to the window path: its shares are sized.
* With fewer than ``min_baseline`` intervals before the last one, or no events in them, nothing is judged (a fresh
  execution environment, or a grid zoom that changed: the meter starts over).
* Work per check: a search of the last interval's busy cells in the earlier ones; the workers' shares are attributed
  only when a cell surged.
* The scale is the fleet's, not each worker's: a worker's plan is not always its share of the events (a worker a relief
  made is planned at its cell's projection, and read through its own plan a surge measured there at 125 % of the cap
  where it was at 28 %, ``metro-day`` seed 1). Nor is it the plan's total: surges reserved at their projections
  inflate it (a local run read a worker at 171 % whose crowd was at a third of the cap). The median of the workers'
  ratios leaves a few such workers out. Where events cost unevenly (cost-weighted specs), a worker of costly events is
  read low and one of cheap events high; the window path still sizes on cost.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import asdict, dataclass, fields

import numpy as np
import numpy.typing as npt

from geokernel.contracts.surge import SurgeCell, SurgeSignal
from geokernel.errors import PolicyError
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys
from geokernel.surge.view import SurgeView

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SurgeSettings:
    """How the meter judges (``SURGE_JSON`` of the router; ``simulate`` takes the same keys).

    Parameters
    ----------
    bucket_share : float
        Each interval is this share of the spec's snapshot window (0.2: a minute of 5-minute windows), in (0, 1].
    recent_buckets : int
        The last intervals judged together (>= 1): a sliding window of that many intervals, checked at each close.
    baseline_buckets, min_baseline : int
        Intervals before the recent ones that a cell's share is pooled over (>= 1), and the fewest needed (>= 1).
    slope_buckets : int
        Intervals (the last one included) a surging cell's rise per second is fitted through (>= 2).
    horizon_s : float
        Seconds a worker is projected ahead: an interval plus the relief's latency (signal to live), >= 0.
    trigger : float
        Projected utilisation at which a worker signals (> 0).
    rise_z, min_rise : float
        A cell surges when it rises more than ``rise_z`` Poisson standard deviations (> 0) and ``min_rise`` of the cap
        (>= 0) above its share before.
    """

    bucket_share: float = 0.2
    recent_buckets: int = 1
    baseline_buckets: int = 10
    min_baseline: int = 3
    slope_buckets: int = 3
    horizon_s: float = 150.0
    trigger: float = 1.0
    rise_z: float = 6.0
    min_rise: float = 0.04

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise PolicyError(f"surge {f.name} must be a finite number, got {v!r}")
        for name, low in (("recent_buckets", 1), ("baseline_buckets", 1), ("min_baseline", 1), ("slope_buckets", 2)):
            v = getattr(self, name)
            if v != int(v) or v < low:
                raise PolicyError(f"surge {name} must be an integer >= {low}, got {v!r}")
        if self.min_baseline > self.baseline_buckets:
            raise PolicyError(f"surge min_baseline must be <= baseline_buckets, got {self.min_baseline!r} > "
                              f"{self.baseline_buckets!r}")
        if not 0 < self.bucket_share <= 1 or self.horizon_s < 0 or self.trigger <= 0 or self.rise_z <= 0 \
                or self.min_rise < 0:
            raise PolicyError(f"surge bucket_share must be in (0, 1], horizon_s >= 0, trigger > 0, rise_z > 0 and "
                              f"min_rise >= 0, got {self.bucket_share!r}, {self.horizon_s!r}, {self.trigger!r}, "
                              f"{self.rise_z!r}, {self.min_rise!r}")

    def bucket_s(self, window_s: float) -> float:
        """Seconds per interval for a snapshot window of ``window_s``."""
        return self.bucket_share * window_s

    @classmethod
    def from_json(cls, text: str | None, where: str = "SURGE_JSON") -> SurgeSettings:
        """A flat JSON object of these keys (empty: the defaults); :class:`PolicyError` naming a bad key or value."""
        if text is None or not text.strip():
            return cls()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PolicyError(f"{where}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise PolicyError(f"{where}: must be a JSON object, got {text[:60]!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PolicyError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(known))})")
        try:
            return cls(**data)
        except (PolicyError, TypeError) as exc:
            raise PolicyError(f"{where}: {exc}") from None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True, eq=False)
class Interval:
    """The events of one interval ``[start, end)`` per grid cell: ``codes`` (``x << zoom | y``, ascending, distinct)
    and their ``counts``."""

    start: float
    end: float
    codes: IntArray
    counts: FloatArray

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    def lookup(self, codes: IntArray) -> FloatArray:
        """The count of each of ``codes`` in this interval (0 where it has none)."""
        if len(self.codes) == 0:
            return np.zeros(len(codes))
        pos = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        return np.where(self.codes[pos] == codes, self.counts[pos], 0.0)


def interval(start: float, end: float, codes: npt.ArrayLike, counts: npt.ArrayLike | None = None) -> Interval:
    """An :class:`Interval` from cell codes, one per event (``counts`` None) or with their counts (summed per code)."""
    c = np.asarray(codes, dtype=np.int64)
    w = np.ones(len(c)) if counts is None else np.asarray(counts, dtype=np.float64)
    if len(c) == 0:
        return Interval(start, end, np.zeros(0, dtype=np.int64), np.zeros(0))
    uniq, inv = np.unique(c, return_inverse=True)
    return Interval(start, end, uniq, np.bincount(inv, weights=w, minlength=len(uniq)).astype(np.float64))


class SurgeMeter:
    """The last intervals' counts per cell and the signals they give (see the module docstring)."""

    def __init__(self, settings: SurgeSettings | None = None) -> None:
        self.settings = settings or SurgeSettings()
        s = self.settings
        self._intervals: deque[Interval] = deque(maxlen=int(s.baseline_buckets + s.recent_buckets))
        self._zoom: int | None = None
        self._signalled: set[tuple[int, str]] = set()

    def __len__(self) -> int:
        return len(self._intervals)

    def record(self, counted: Interval, zoom: int) -> None:
        """Keep one closed interval's counts at grid ``zoom`` (a new zoom starts the meter over)."""
        if zoom != self._zoom:
            self._intervals.clear()
            self._zoom = zoom
        self._intervals.append(counted)

    def check(self, view: SurgeView) -> list[SurgeSignal]:
        """The signals the last interval gives under the live spec ``view`` (see the module docstring)."""
        s = self.settings
        m = int(s.recent_buckets)
        if view.zoom != self._zoom or len(self._intervals) < m + s.min_baseline:
            return []
        recent, past = self._recent(m), list(self._intervals)[:-m]
        total, past_total, planned_total = recent.total, sum(b.total for b in past), view.total
        if total <= 0 or past_total <= 0 or planned_total <= 0:
            return []
        need = max(1.0, 0.5 * s.min_rise * view.cap / planned_total * total)
        busy = np.flatnonzero(recent.counts >= need)
        if len(busy) == 0:
            return []
        codes, now = recent.codes[busy], recent.counts[busy]
        before = np.sum([b.lookup(codes) for b in past], axis=0) / past_total
        expected = before * total
        rose = (now - expected) / np.sqrt(np.maximum(expected, 1.0)) > s.rise_z
        if not rose.any():
            return []
        return self._signals(view, codes[rose], now[rose] / total, before[rose], past, past_total)

    def _recent(self, m: int) -> Interval:
        """The last ``m`` intervals as one."""
        last = list(self._intervals)[-m:]
        if m == 1:
            return last[0]
        return interval(last[0].start, last[-1].end, np.concatenate([b.codes for b in last]),
                        np.concatenate([b.counts for b in last]))

    def _signals(self, view: SurgeView, codes: IntArray, share: FloatArray, before: FloatArray, past: list[Interval],
                 past_total: float) -> list[SurgeSignal]:
        """Signals of the workers holding the cells that rose (``share`` now, ``before``: pooled before)."""
        s = self.settings
        recent = self._recent(int(s.recent_buckets))
        owner = view.owners(codes)
        now_w = view.worker_counts(recent.codes, recent.counts) / recent.total
        before_w = view.worker_counts(np.concatenate([b.codes for b in past]),
                                      np.concatenate([b.counts for b in past])) / past_total
        per_share = np.full(len(view.worker_ids), _scale(view.planned, before_w, view.total))
        slopes = self._slopes(codes)
        out = []
        for w in sorted(set(owner[owner >= 0].tolist())):
            key = (view.version, view.worker_ids[w])
            sel = np.flatnonzero(owner == w)
            k = float(per_share[w])
            rise = k * (share[sel] - before[sel])
            sel = sel[rise >= s.min_rise * view.cap]
            if len(sel) == 0 or key in self._signalled:
                continue
            measured = k * float(now_w[w])
            slope = np.maximum(k * slopes[sel], 0.0)
            projected = measured + float(slope.sum()) * s.horizon_s
            if projected <= s.trigger * view.cap:
                continue
            order = sel[np.lexsort((-share[sel], -slopes[sel]))]
            qks = arrays_to_quadkeys(codes[order] >> view.zoom, codes[order] & ((1 << view.zoom) - 1), view.zoom)
            cells = tuple(SurgeCell(q, k * float(before[i]), k * float(share[i]), max(0.0, k * float(slopes[i])))
                          for q, i in zip(qks, order.tolist(), strict=True))
            loads = tuple((wid, float(per_share[u] * now_w[u])) for u, wid in enumerate(view.worker_ids))
            self._signalled.add(key)
            out.append(SurgeSignal(view.version, view.worker_ids[w], recent.end, view.window_s, s.horizon_s,
                                   view.cap, float(view.planned[w]), measured, projected, cells, loads))
        return out

    def _slopes(self, codes: IntArray) -> FloatArray:
        """Each cell's share per second, the least-squares slope through the last ``slope_buckets`` intervals."""
        last = list(self._intervals)[-int(self.settings.slope_buckets):]
        t = np.array([0.5 * (b.start + b.end) for b in last])
        y = np.vstack([b.lookup(codes) / b.total if b.total > 0 else np.zeros(len(codes)) for b in last])
        tc = t - t.mean()
        denom = float((tc ** 2).sum())
        if denom <= 0:
            return np.zeros(len(codes))
        return np.asarray((tc[:, None] * (y - y.mean(axis=0))).sum(axis=0) / denom, dtype=np.float64)


def _scale(planned: FloatArray, before: FloatArray, total: float) -> float:
    """Load per window per unit share of the events: the median over the workers of their plan over the share they
    carried before (the plan's total when no worker carried any)."""
    ok = (before > 0) & (planned > 0)
    return float(np.median(planned[ok] / before[ok])) if ok.any() else total
