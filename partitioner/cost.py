"""Balancing on measured cost (seed 004): weigh each quadkey's events by the CPU the workers measured there.

Workers report a normalised CPU cost per event for each grid cell they processed
(``docs/CONTRACTS.md``, cost reports). The partitioner Lambda and the simulator weigh a snapshot
with those rates before building, so a worker's load is CPU, not messages:

* :func:`apply_cost_rates`: every row times the rate of its grid-zoom ancestor; rows without a
  rate get the events-weighted mean rate of the rows that have one, so totals stay in "events at
  mean cost" and comparable with ``max_load``;
* :func:`measured_rates`: the rates a window's cost implies (what the workers would report).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from partitioner.counts import Counts
from partitioner.errors import CountsError


def apply_cost_rates(counts: Counts, rates: Mapping[str, float], grid_zoom: int) -> Counts:
    """Return ``counts`` with each row weighted by the cost rate of its grid-zoom ancestor.

    Rows whose cell has no rate get the events-weighted mean rate of the rows that have one.
    With no rates (or none that applies) the counts come back unchanged.
    """
    if not rates:
        return counts
    anc = [q[:grid_zoom] for q in counts.quadkeys]
    known = np.fromiter((rates.get(a, np.nan) for a in anc), dtype=np.float64, count=len(anc))
    has = ~np.isnan(known)
    if not has.any():
        return counts
    w = np.asarray(counts.weights, dtype=np.float64)
    grid_rows = np.fromiter((len(q) == grid_zoom for q in counts.quadkeys), dtype=bool, count=len(anc))
    sel = has & grid_rows
    denom = float(w[sel].sum())
    mean = float((w[sel] * known[sel]).sum() / denom) if denom > 0 else float(np.nanmean(known))
    factors = np.where(has, known, mean)
    return counts.scaled(factors)


def measured_rates(events: Counts, cost: Counts, grid_zoom: int) -> dict[str, float]:
    """Cost per event of each grid cell with events (``events`` and ``cost`` list the same quadkeys)."""
    if events.quadkeys != cost.quadkeys:
        raise CountsError(f"{cost.source}: cost rows must list the same quadkeys as {events.source}")
    ev: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for q, e, c in zip(events.quadkeys, events.weights.tolist(), cost.weights.tolist(), strict=True):
        if len(q) != grid_zoom:
            continue
        ev[q] = ev.get(q, 0.0) + e
        cpu[q] = cpu.get(q, 0.0) + c
    return {q: cpu[q] / e for q, e in ev.items() if e > 0}
