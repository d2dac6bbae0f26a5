"""Balancing on measured cost, not on message counts: weigh each quadkey's events by the CPU the workers measured.

Workers report a normalised CPU cost per event for each grid cell they processed
(``docs/CONTRACTS.md``, cost reports). The partitioner Lambda and the simulator weigh a snapshot
with those rates before building, so a worker's load is CPU, not messages:

* :func:`apply_cost_rates`: every row times the rate of its grid-zoom ancestor; rows without a
  rate get the events-weighted mean rate of the rows that have one, so totals stay in "events at
  mean cost" and comparable with ``max_load``;
* :func:`measured_rates`: the rates a window's cost implies (what the workers would report).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from geokernel.errors import CountsError
from geokernel.geo.quadtree import tree_keys
from geokernel.geo.tiles import MAX_ZOOM, IntArray, arrays_to_quadkeys, quadkeys_to_arrays
from partitioner.load.counts import Counts

FloatArray = npt.NDArray[np.float64]
_QUADKEY = re.compile(f"[0-3]{{0,{MAX_ZOOM}}}")


def apply_cost_rates(counts: Counts, rates: Mapping[str, float], grid_zoom: int) -> Counts:
    """Return ``counts`` with each row weighted by the cost rate of its grid-zoom ancestor.

    Rows whose cell has no rate get the events-weighted mean rate of the grid-zoom rows that
    have one. With no rates (or none that applies) the counts come back unchanged.

    Notes
    -----
    A row shallower than ``grid_zoom`` looks up its own quadkey. Rate keys that are not
    quadkeys match no row. The lookup is one sorted search over tree keys (no Python work
    per row), so it costs little next to reading the snapshot.
    """
    if not rates:
        return counts
    known = _rates_per_row(counts, rates, grid_zoom)
    has = ~np.isnan(known)
    if not has.any():
        return counts
    w = np.asarray(counts.weights, dtype=np.float64)
    sel = has & (counts.tiles.z == grid_zoom)
    denom = float(w[sel].sum())
    mean = float((w[sel] * known[sel]).sum() / denom) if denom > 0 else float(np.nanmean(known))
    factors = np.where(has, known, mean)
    return counts.scaled(factors)


def _rates_per_row(counts: Counts, rates: Mapping[str, float], grid_zoom: int) -> FloatArray:
    """The rate of each row's ancestor at ``grid_zoom`` (NaN where none is given)."""
    keys = [q for q in rates if isinstance(q, str) and _QUADKEY.fullmatch(q)]
    rx, ry, rz = quadkeys_to_arrays(keys)
    rate_keys = tree_keys(rx, ry, rz)
    order = np.argsort(rate_keys)
    rate_keys = rate_keys[order]
    values = np.array([float(rates[q]) for q in keys], dtype=np.float64)[order]
    t = counts.tiles
    a = np.minimum(t.z, grid_zoom)
    shift = t.z - a
    anc = tree_keys(t.x >> shift, t.y >> shift, a)
    out = np.full(len(anc), np.nan)
    if len(rate_keys):
        pos = np.minimum(np.searchsorted(rate_keys, anc), len(rate_keys) - 1)
        hit = rate_keys[pos] == anc
        out[hit] = values[pos[hit]]
    return out


def measured_rates(events: Counts, cost: Counts, grid_zoom: int) -> dict[str, float]:
    """Cost per event of each grid cell with events (``events`` and ``cost`` list the same quadkeys)."""
    te, tc = events.tiles, cost.tiles
    if len(te.z) != len(tc.z) or any(not np.array_equal(p, q) for p, q in zip(te, tc, strict=True)):
        raise CountsError(f"{cost.source}: cost rows must list the same quadkeys as {events.source}")
    rows = te.z == grid_zoom
    codes: IntArray = (te.x[rows] << grid_zoom) | te.y[rows]
    cells, inv = np.unique(codes, return_inverse=True)
    ev = np.bincount(inv, weights=events.weights[rows], minlength=len(cells))
    cpu = np.bincount(inv, weights=cost.weights[rows], minlength=len(cells))
    keep = ev > 0
    qks = arrays_to_quadkeys(cells[keep] >> grid_zoom, cells[keep] & ((1 << grid_zoom) - 1), grid_zoom)
    return dict(zip(qks, (cpu[keep] / ev[keep]).tolist(), strict=True))
