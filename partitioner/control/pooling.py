"""Pooling across the quadtree: a tile code's ancestors, and sparse regions' forecasts pooled towards their parent's.

* :func:`ancestor_codes` / :func:`parents`: the tile arithmetic the forecast groups regions with (one home).
* :func:`pooled_levels`: each region's forecast moved towards its parent's mean region by the share of the regions'
  spread that Poisson noise explains (empirical Bayes, the gamma-Poisson model), each parent's total kept.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import IntArray

FloatArray = npt.NDArray[np.float64]


def ancestor_codes(codes: IntArray, zoom: int, levels: int) -> IntArray:
    """Tile code (``x << (zoom - levels) | y``) of the ancestor ``levels`` zooms up of each tile code at ``zoom``."""
    x, y = codes >> zoom, codes & ((1 << zoom) - 1)
    return ((x >> levels) << (zoom - levels)) | (y >> levels)


def parents(codes: IntArray, zoom: int, levels: int) -> tuple[IntArray, IntArray]:
    """The distinct ancestors ``levels`` zooms up of tile codes at ``zoom`` (sorted), and each code's index into them."""
    uniq, inv = np.unique(ancestor_codes(codes, zoom, levels), return_inverse=True)
    return np.asarray(uniq, dtype=np.int64), np.asarray(inv, dtype=np.int64)


def pooled_levels(forecast: FloatArray, times: FloatArray, totals: FloatArray, regions: IntArray, zoom: int,
                  window_s: float, half_life: float, levels: int = 2) -> FloatArray:
    """Each region's forecast moved towards its parent's mean region (``levels`` zooms up) by the share of the
    regions' spread that Poisson noise explains (empirical Bayes); each parent's total is kept.

    Parameters
    ----------
    forecast : ndarray
        Forecast totals, times x regions.
    times, totals : ndarray
        Window centres (epoch s) and the windows x regions event counts the forecast was made from.
    regions : ndarray
        The regions' tile codes at ``zoom``.
    window_s, half_life : float
        Window length; a window's weight halves every ``half_life`` windows back (as in :func:`partitioner.control.forecast.fit`).
    levels : int
        Zooms up to the parent whose regions are pooled (16 regions for 2).

    Returns
    -------
    ndarray
        ``(1 - B) f + B mean(f)`` per time and region, the mean over the parent's regions. ``B = v / (v + tau2)``:
        ``v = m / n`` is the Poisson variance of a region's weighted mean count over ``n`` effective windows (``m``
        the parent's mean region) and ``tau2`` the spread of the regions' means left after it (method of moments,
        the gamma-Poisson model). A parent's only region keeps its forecast.

    Notes
    -----
    On sparse load (a few events per region and window) most of the spread between regions is Poisson noise, and
    the builder picks regions by their counts: the regions that happened to be quiet in the windows seen so far
    land on one worker for almost nothing. 256 regions of one event a window, two windows seen: the 102-131 quiet
    ones were forecast at 33-42 events, pooled at 94-100 (``tests/partitioner/control/test_forecast.py``); on a
    Russian quiet day such a worker was forecast at 64 % and carried 135 % (``bench/bench_quiet.py``, 10 workers).
    Where regions differ by far more than their noise (a city beside its countryside, any dense load) ``B`` is near
    0 and nothing moves. The counts must be events (the history follows plain event counts), not cost-weighted
    load, for the Poisson variance to hold.
    """
    if len(times) == 0 or len(regions) == 0:
        return forecast
    w = 0.5 ** ((times[-1] - times) / (window_s * half_life))
    n = float(w.sum())
    own = (w[:, None] * totals).sum(axis=0) / n
    _, inv = parents(regions, zoom, min(levels, zoom))
    g = int(inv.max()) + 1
    count = np.bincount(inv, minlength=g)
    m = np.bincount(inv, weights=own, minlength=g) / count
    spread = np.bincount(inv, weights=(own - m[inv]) ** 2, minlength=g) / np.maximum(count - 1, 1)
    v = m / n
    b = (np.divide(v, v + np.maximum(spread - v, 0.0), out=np.zeros_like(v), where=v > 0) * (count > 1))[inv]
    mean = np.vstack([np.bincount(inv, weights=row, minlength=g) / count for row in forecast])[:, inv]
    return np.asarray((1.0 - b)[None, :] * forecast + b[None, :] * mean, dtype=np.float64)
