"""Load history per coarse region, and the forecast of each region's load a few windows ahead.

The controller remembers, for the last few snapshot windows, the total load of every **region**
(a quadtree tile ``levels`` zooms above the snapshot's grid: 256 grid cells per region). That
history is all the forecast needs:

* :class:`LoadHistory` (immutable; JSON round trip): window end times and a windows x regions
  matrix of totals. :meth:`LoadHistory.absorb` adds a window (the same window again replaces it,
  so a retried snapshot is absorbed once; an older window is ignored).
* :func:`fit` / :func:`forecast_at`: per region, a weighted least-squares line through the
  recent totals (recent windows weigh more), evaluated at future times. A linear trend is what a
  diurnal curve or a crowd's ramp looks like over the tens of minutes between a snapshot and the
  fleet built from it. Each slope is shrunk by its noise towards its parent's relative trend, and the
  parent's towards its own parent's, up to the whole map (:func:`pooled_fit`).
* :func:`~partitioner.control.pooling.pooled_levels`: each region's forecast shrunk towards the mean of its parent's regions by as much as
  Poisson noise explains of their spread (empirical Bayes), so a sparse region seen by chance at a low or a high
  count is not forecast at that count.
* :func:`backtest`: the same forecast made from the windows that were available ``horizon_s``
  before each recent window, next to what that window carried: the forecast errors from which
  the policy sizes its headroom.

Notes
-----
Times are epoch seconds of window ends; a window's load is placed at its centre. Gaps (a missed
window) are fine: the fit uses the actual times. With one window of history the forecast is that
window's total (no trend).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.errors import PolicyError
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys, unique_ints
from partitioner.control.levels import CellLevels, frozen_array
from partitioner.control.pooling import ancestor_codes, parents, pooled_levels
from partitioner.load.counts import Counts, Grid, Tiles
from partitioner.load.loads import Cells, cells_of

FloatArray = npt.NDArray[np.float64]
HISTORY_FORMAT = "geo-rebalancer.load-history/1"
#: Standard errors a slope must stand out by, at each level of the quadtree, before most of it is extrapolated
#: (:func:`fit`, :func:`pooled_fit`; the predictive policy's ``trend_z``). 3 keeps a region's noise (1-2 standard
#: errors) at 10-30 %, and a ramp shared by many small regions is still followed through their ancestors' trends,
#: in which it stands out (bench/README.md, "Quiet days"). 1 was the default until 2026-11-29: with a region's trend
#: pooled only towards its parent, 3 lagged a ramp of a few dozen events a window by two or three windows.
TREND_Z = 3.0


def region_codes(cells: Cells, zoom: int) -> IntArray:
    """Tile code (``x << zoom | y``) of each cell's ancestor at ``zoom`` (cells must be at least that deep)."""
    shift = cells.z - zoom
    if (shift < 0).any():
        raise PolicyError(f"{cells.source}: a cell is shallower than the region zoom {zoom!r}")
    return ((cells.x >> shift) << zoom) | (cells.y >> shift)


@dataclass(frozen=True, eq=False)
class LoadHistory:
    """Total load per region for the last windows (oldest first)."""

    region_zoom: int
    window_s: float
    ends: tuple[float, ...]
    regions: IntArray  # sorted region tile codes at region_zoom
    totals: FloatArray  # shape (len(ends), len(regions))

    @classmethod
    def empty(cls, region_zoom: int, window_s: float) -> LoadHistory:
        return cls(region_zoom, window_s, (), frozen_array([], np.int64), frozen_array(np.zeros((0, 0)), np.float64))

    def __len__(self) -> int:
        return len(self.ends)

    @property
    def centres(self) -> FloatArray:
        """Window centre times (epoch s)."""
        return np.asarray(self.ends, dtype=np.float64) - 0.5 * self.window_s

    def absorb(self, cells: Cells, window_end: float, window_s: float, keep: int) -> LoadHistory:
        """Return the history with this window's region totals, keeping the last ``keep`` windows.

        A window ending at the last end replaces it (idempotent); an older one is ignored.
        """
        if self.ends and window_end < self.ends[-1]:
            return self
        codes = region_codes(cells, self.region_zoom)
        uniq, inv = np.unique(codes, return_inverse=True)
        sums = np.bincount(inv, weights=cells.weight, minlength=len(uniq))
        regions = unique_ints(np.concatenate([self.regions, uniq]))
        old = np.zeros((len(self.ends), len(regions)))
        if len(self.ends):
            old[:, np.searchsorted(regions, self.regions)] = self.totals
        row = np.zeros(len(regions))
        row[np.searchsorted(regions, uniq)] = sums
        ends = list(self.ends)
        if ends and window_end == ends[-1]:
            ends.pop()
            old = old[:-1]
        ends.append(float(window_end))
        totals = np.vstack([old, row[None, :]])[-keep:]
        ends = ends[-keep:]
        alive = totals.sum(axis=0) > 0
        return LoadHistory(self.region_zoom, float(window_s), tuple(ends), frozen_array(regions[alive], np.int64),
                           frozen_array(totals[:, alive], np.float64))

    def growth(self, zoom: int) -> Callable[[IntArray], FloatArray]:
        """``f(codes)``: for tiles at ``zoom`` (>= the region zoom), their region's last total / the one before (1
        where either is unknown or zero)."""
        last = self.totals[-1] if len(self.ends) >= 1 else np.zeros(len(self.regions))
        before = self.totals[-2] if len(self.ends) >= 2 else np.zeros(len(self.regions))
        ratio = np.divide(last, before, out=np.ones_like(last), where=(before > 0) & (last > 0))
        shift = zoom - self.region_zoom

        def of(codes: IntArray) -> FloatArray:
            pos = self.index_of(ancestor_codes(codes, zoom, shift))
            return np.where(pos >= 0, ratio[np.maximum(pos, 0)], 1.0)

        return of

    def index_of(self, codes: IntArray) -> IntArray:
        """Position of each region code in :attr:`regions` (-1 where unknown)."""
        if len(self.regions) == 0:
            return np.full(len(codes), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.regions, codes), len(self.regions) - 1)
        return np.where(self.regions[pos] == codes, pos, -1).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {"format": HISTORY_FORMAT, "region_zoom": self.region_zoom, "window_s": self.window_s,
                "ends": list(self.ends), "regions": [int(c) for c in self.regions],
                "totals": [[float(f"{v:.7g}") for v in row] for row in self.totals.tolist()]}

    @classmethod
    def from_dict(cls, d: Any, where: str = "load history") -> LoadHistory:
        """Parse :meth:`to_dict` output; raise :class:`PolicyError` naming the bad field."""
        if not isinstance(d, dict) or d.get("format") != HISTORY_FORMAT:
            raise PolicyError(f"{where}: not a {HISTORY_FORMAT} object: {str(d)[:80]!r}")
        try:
            ends = tuple(float(e) for e in d["ends"])
            regions = np.array([int(c) for c in d["regions"]], dtype=np.int64)
            totals = np.array(d["totals"], dtype=np.float64).reshape(len(ends), len(regions))
            zoom, window_s = int(d["region_zoom"]), float(d["window_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyError(f"{where}: malformed field ({exc})") from None
        if list(ends) != sorted(ends) or not np.isfinite(totals).all() or (totals < 0).any():
            raise PolicyError(f"{where}: ends must be increasing and totals finite and >= 0")
        if len(regions) and (np.diff(regions) <= 0).any():
            raise PolicyError(f"{where}: regions must be sorted and unique")
        return cls(zoom, window_s, ends, frozen_array(regions, np.int64), frozen_array(totals, np.float64))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))


@dataclass(frozen=True)
class Trend:
    """Per region: level at ``t0`` and slope per second of a weighted line through recent totals."""

    t0: float
    level: FloatArray
    slope: FloatArray

    def at(self, times: Sequence[float]) -> FloatArray:
        """Forecast totals, shape (len(times), regions), never below zero."""
        dt = np.asarray(times, dtype=np.float64)[:, None] - self.t0
        return np.maximum(self.level[None, :] + self.slope[None, :] * dt, 0.0)


def fit(times: FloatArray, totals: FloatArray, window_s: float, span: int, half_life: float,
        prior: FloatArray | None = None, trend_z: float = TREND_Z) -> Trend:
    """Fit a line per region through the last ``span`` windows, weights halving every ``half_life`` windows.

    ``times``: window centres (ascending); ``totals``: event counts, shape (len(times), regions).
    Each slope is shrunk towards its prior (``prior`` x the region's level; default no trend) by its
    own uncertainty, ``b0 + (b - b0) d^2 / (d^2 + z^2 var(b))`` with ``d = b - b0`` and ``z = trend_z``:
    the residual variance of the fit (with three windows or more), never below the Poisson variance of
    the counts, so a small region's noise is not extrapolated while a large region's ramp is. With a
    single window the slope is zero.

    Notes
    -----
    ``trend_z`` is how many standard errors a slope must stand out by before most of it is kept. At
    ``z = 1`` (the default) a slope of 3 standard errors keeps 90 %, and the 1-2 standard errors of pure
    noise keep 50-80 %, which the forecast extrapolates two or three windows ahead: over thousands of
    small regions (a sparse load of a few events per region and window) that inflates a flat forecast by
    4-10 % and can forecast a small region at nothing. At ``z = 3`` noise keeps 10-30 % and a slope of 10
    standard errors 92 %, but a real ramp of a few dozen events a window (3 standard errors) only half.
    """
    t = np.asarray(times[-span:], dtype=np.float64)
    y = np.asarray(totals[-span:], dtype=np.float64)
    n_regions = totals.shape[1]
    if len(t) == 0:
        return Trend(0.0, np.zeros(n_regions), np.zeros(n_regions))
    w = 0.5 ** ((t[-1] - t) / (window_s * half_life))
    w = w / w.sum()
    tbar = float(w @ t)
    ybar = np.asarray(w @ y, dtype=np.float64)
    dt = t - tbar
    sxx = float(w @ dt ** 2)
    if sxx <= 1e-9 * window_s * window_s:
        return Trend(tbar, ybar, np.zeros(n_regions))
    slope = (w * dt) @ (y - ybar) / sxx
    var_y = np.maximum(ybar, 0.0)  # Poisson: the variance of a count is its mean
    if len(t) >= 3:
        resid = y - ybar - np.outer(dt, slope)
        var_y = np.maximum(var_y, (w @ resid ** 2) * len(t) / (len(t) - 2))
    var_slope = var_y * float((w ** 2) @ dt ** 2) / sxx ** 2
    b0 = np.zeros(n_regions) if prior is None else prior * ybar
    d2 = (slope - b0) ** 2
    noise = trend_z * trend_z * var_slope
    keep = np.divide(d2, d2 + noise, out=np.ones_like(d2), where=(d2 + noise) > 0)
    return Trend(tbar, ybar, np.asarray(b0 + (slope - b0) * keep, dtype=np.float64))


def pooled_fit(times: FloatArray, totals: FloatArray, regions: IntArray, zoom: int, window_s: float, span: int,
               half_life: float, levels: int = 2, trend_z: float = TREND_Z) -> Trend:
    """:func:`fit` per region, each slope shrunk towards its parent's relative trend (``levels`` zooms up), whose
    own slope is fitted the same way, up to the tile that holds every region (partial pooling at every level).

    A parent (16 regions for ``levels=2``) has more load, so its trend is measured with less noise;
    a region departs from it only as far as its own data say.

    Notes
    -----
    Pooling up to the whole map is what lets ``trend_z`` 3 follow a ramp that many small regions share, each by one
    or two standard errors (ships appearing along a coast): their ancestors' sums rise by many standard errors and
    pass the ramp down, in proportion to each region's level. Pooling only to the parent 16 regions up followed a
    ramp of a few dozen events a window two or three windows late at ``trend_z`` 3. The price: a flat region keeps
    part of a trend of the map that it does not share as long as its own data cannot tell (a 500-event region next
    to one growing 8 % a window is forecast 3-4 % high two windows ahead).
    """
    if totals.shape[1] <= 1 or zoom <= 0:
        return fit(times, totals, window_s, span, half_life, trend_z=trend_z)
    step = min(levels, zoom)
    uniq, inv = parents(regions, zoom, step)
    sums = np.zeros((len(uniq), totals.shape[0]))
    np.add.at(sums, inv, np.asarray(totals, dtype=np.float64).T)
    up = pooled_fit(times, sums.T, uniq, zoom - step, window_s, span, half_life, levels, trend_z)
    rel = np.divide(up.slope, up.level, out=np.zeros_like(up.slope), where=up.level > 0)
    return fit(times, totals, window_s, span, half_life, prior=rel[inv], trend_z=trend_z)


def forecast_at(history: LoadHistory, times: Sequence[float], span: int, half_life: float,
                trend_z: float = TREND_Z) -> FloatArray:
    """Forecast every region's total at ``times`` (epoch s) from the whole history (:func:`pooled_fit`, then
    :func:`~partitioner.control.pooling.pooled_levels`)."""
    if len(history) == 0:
        return np.zeros((len(times), len(history.regions)))
    return _forecast(history, history.centres, history.totals, times, span, half_life, trend_z)


def _forecast(history: LoadHistory, centres: FloatArray, totals: FloatArray, times: Sequence[float], span: int,
              half_life: float, trend_z: float) -> FloatArray:
    """The forecast at ``times`` from the windows ``centres``/``totals`` of ``history``'s regions."""
    trend = pooled_fit(centres, totals, history.regions, history.region_zoom, history.window_s, span, half_life,
                       trend_z=trend_z)
    return pooled_levels(trend.at(times), centres, totals, history.regions, history.region_zoom, history.window_s,
                         half_life)


def peak_by_ancestor(history: LoadHistory, ahead: FloatArray, levels: int = 4) -> FloatArray:
    """Each region's forecast at the row of ``ahead`` (times x regions) where the summed forecast of its ancestor
    ``levels`` zooms up (256 regions for ``levels=4``) is largest: the peak of an interval given by its two ends.

    Notes
    -----
    The peak is taken per ancestor, not per region: on a sparse load a region's slope is mostly noise, and the
    larger of each region's own two ends adds that noise one-sidedly over thousands of regions (+2.4 % on a flat day
    of 5,119 regions of 1-2 events, ``bench/bench_quiet.py``), where an ancestor's ends differ by its regions'
    slopes summed, in which noise cancels (+1.3 % with 256 regions to an ancestor, +2.0 % with 16). A ramp that
    carries its ancestor still peaks at its later end, and a crowd's cells are extrapolated on their own
    (:func:`forecast_load`).
    """
    if ahead.shape[0] <= 1 or ahead.shape[1] == 0:
        return ahead.max(axis=0) if ahead.shape[0] else np.zeros(ahead.shape[1])
    _, inv = parents(history.regions, history.region_zoom, min(levels, history.region_zoom))
    sums = np.vstack([np.bincount(inv, weights=row) for row in ahead])
    best = sums.argmax(axis=0)[inv]
    return np.asarray(ahead[best, np.arange(ahead.shape[1])], dtype=np.float64)


@dataclass(frozen=True)
class Backtest:
    """Forecasts made ``horizon_s`` ahead for recent windows, and what those windows carried."""

    forecast: FloatArray  # shape (windows, regions)
    actual: FloatArray


def backtest(history: LoadHistory, horizon_s: float, windows: int, span: int, half_life: float,
             trend_z: float = TREND_Z) -> Backtest:
    """Re-forecast each of the last ``windows`` windows from the windows that had closed ``horizon_s`` earlier."""
    centres = history.centres
    ends = np.asarray(history.ends)
    rows_f: list[FloatArray] = []
    rows_a: list[FloatArray] = []
    for k in range(max(0, len(centres) - windows), len(centres)):
        known = np.nonzero(ends <= centres[k] - horizon_s + 1e-6)[0]
        if len(known) == 0:
            continue
        rows_f.append(_forecast(history, centres[known], history.totals[known], [float(centres[k])], span,
                                half_life, trend_z)[0])
        rows_a.append(history.totals[k])
    r = len(history.regions)
    if not rows_f:
        return Backtest(np.zeros((0, r)), np.zeros((0, r)))
    return Backtest(np.vstack(rows_f), np.vstack(rows_a))


@dataclass(frozen=True, eq=False)
class Forecast:
    """The forecast load as counts (for the builder) and as cells (for attribution)."""

    counts: Counts
    cells: Cells


def forecast_load(snapshot: Counts, grid: Grid, events: Grid, history: LoadHistory, levels: CellLevels,
                  times: Sequence[float], span: int, half_life: float, trend_z: float = TREND_Z) -> Forecast:
    """The load expected over ``times``: each region's forecast total (the largest over ``times``), spread
    over its cells in proportion to their smoothed levels, weighed by each cell's cost per event.

    ``snapshot`` is the window's load to balance (cost-weighted or plain), ``grid`` its grid; ``events`` the
    grid of plain counts (same cells); ``history`` and ``levels`` already hold the window. A cell absent from the
    snapshot keeps its level (and the mean cost per event), so the next spec still lists it. A cell that rose
    significantly in the last window (:attr:`CellLevels.rises`) is forecast at least at its level plus that rise
    per window up to the last of ``times`` (a crowd arriving keeps arriving). Refinement rows (deeper than the
    grid) follow their grid cell's factor.
    """
    ahead = peak_by_ancestor(history, forecast_at(history, times, span, half_life, trend_z))
    lx, ly = levels.codes >> levels.zoom, levels.codes & ((1 << levels.zoom) - 1)
    region = history.index_of(ancestor_codes(levels.codes, levels.zoom, levels.zoom - history.region_zoom))
    ok = region >= 0
    r = np.maximum(region, 0)
    n = len(history.regions)
    sums = np.bincount(region[ok], weights=levels.levels[ok], minlength=n)
    ratio = np.divide(ahead, sums, out=np.zeros_like(ahead), where=sums > 0)
    expected = np.where(ok, levels.levels * ratio[r], 0.0)
    rising = ok & (levels.rises > 0)
    if len(history) and rising.any():
        # a crowd's cell keeps rising at its own pace; the rest of its region shares what the region's forecast
        # leaves (never less than the rest's levels, scaled down with the region when it falls)
        ramp = levels.levels + levels.rises * (max(times) - float(history.centres[-1])) / history.window_s
        rest = ok & ~rising
        taken = np.bincount(region[rising], weights=ramp[rising], minlength=n)
        rest_sums = np.bincount(region[rest], weights=levels.levels[rest], minlength=n)
        share = np.divide(ahead - taken, rest_sums, out=np.zeros_like(ahead), where=rest_sums > 0)
        rest_ratio = np.maximum(share, np.minimum(ratio, 1.0))
        expected = np.where(rising, np.maximum(ramp, expected), np.where(rest, levels.levels * rest_ratio[r], 0.0))
    weight = expected * _cell_rates(grid, events, levels.codes)
    keep = weight > 0
    refinement = snapshot.refinement() if len(snapshot.zooms) > 1 else {}
    if not refinement:  # one zoom: the cells are the rows (tile arrays, no quadkey strings)
        zoom = np.full(int(keep.sum()), levels.zoom, dtype=np.int64)
        counts = Counts.from_tiles(Tiles(lx[keep], ly[keep], zoom), weight[keep], f"forecast of {snapshot.source}")
        return Forecast(counts, Cells(lx[keep], ly[keep], zoom, weight[keep], counts.source))
    qks = arrays_to_quadkeys(lx[keep], ly[keep], levels.zoom)
    rows_q, rows_w = list(qks), [weight[keep]]
    factor = dict(zip(qks, weight[keep].tolist(), strict=True))
    raw = dict(zip(arrays_to_quadkeys(grid.x, grid.y, grid.zoom), grid.weight.tolist(), strict=True))
    for q, w in refinement.items():
        a = q[:levels.zoom]
        if raw.get(a, 0.0) > 0:
            rows_q.append(q)
            rows_w.append(np.array([w * factor.get(a, 0.0) / raw[a]]))
    counts = Counts(tuple(rows_q), np.concatenate(rows_w), f"forecast of {snapshot.source}")
    return Forecast(counts, cells_of(counts))


def _cell_rates(grid: Grid, events: Grid, codes: IntArray) -> FloatArray:
    """Load per event of each cell of ``codes`` (``grid`` / ``events``); the overall ratio where a cell had no events."""
    gcodes = (grid.x << grid.zoom) | grid.y
    ecodes = (events.x << events.zoom) | events.y
    ev = np.zeros(len(gcodes))
    if len(ecodes):
        order = np.argsort(ecodes)
        pos = np.minimum(np.searchsorted(ecodes[order], gcodes), len(ecodes) - 1)
        hit = ecodes[order][pos] == gcodes
        ev[hit] = events.weight[order][pos[hit]]
    rate = np.full(len(codes), float(grid.weight.sum() / ev.sum()) if ev.sum() > 0 else 1.0)
    if len(codes):
        gpos = np.minimum(np.searchsorted(codes, gcodes), len(codes) - 1)
        inside = (ev > 0) & (codes[gpos] == gcodes)
        rate[gpos[inside]] = grid.weight[inside] / ev[inside]
    return rate
