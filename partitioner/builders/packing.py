"""Packing regions onto workers: best-fit decreasing and levelling (the lower bound is :mod:`partitioner.load.bound`).

Notes
-----
A region's load never exceeds the worker cap it is packed at (hot cells are split
first), so every region fits on an empty worker.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np


def pack_best_fit(loads: Sequence[float], cap: float) -> list[int]:
    """Best-fit decreasing bin packing: return the worker index of each item.

    Notes
    -----
    Items must each be <= ``cap``. Residual capacities are kept in a sorted list so
    each placement costs ``O(log bins)`` to find plus ``O(bins)`` to update.

    Items of equal load (common: thousands of small regions of 1, 2, 3 events) are placed as a run: the bin
    that takes one of them keeps the smallest residual that fits the next one, so it takes them until it is
    too full, and the sorted list is updated once per bin instead of once per item. The result is the
    item-by-item packing's exactly (same bins, same order, same float residuals).
    """
    # largest first, equal loads in index order (a stable sort, as ``sorted`` with ``key=-load`` would give)
    order: list[int] = np.argsort(-np.asarray(loads, dtype=np.float64), kind="stable").tolist()
    residuals: list[float] = []  # sorted ascending
    bins_at: list[int] = []  # bin id per residual slot, same order
    assign = [0] * len(loads)
    n_bins = 0
    eps = cap * 1e-9
    k, n = 0, len(order)
    while k < n:
        need = loads[order[k]]
        fits = need - eps
        pos = bisect.bisect_left(residuals, fits)
        if pos < len(residuals):
            b = bins_at.pop(pos)
            r = residuals.pop(pos)
        else:
            b = n_bins
            n_bins += 1
            r = cap
        while True:  # this bin takes the run's items while the next still fits
            r -= need
            assign[order[k]] = b
            k += 1
            if k == n or loads[order[k]] != need or r < fits:
                break
        ins = bisect.bisect_left(residuals, r)
        residuals.insert(ins, r)
        bins_at.insert(ins, b)
    return _renumber(assign)


def _renumber(assign: list[int]) -> list[int]:
    """Worker indices renumbered in order of first appearance."""
    seen: dict[int, int] = {}
    return [seen.setdefault(a, len(seen)) for a in assign]


def level_workers(loads: Sequence[float], assign: list[int], cap: float) -> list[int]:
    """Move items from the fullest worker to the emptiest while that lowers the fuller one.

    Notes
    -----
    Greedy and bounded (at most one pass over the items per worker): it evens out
    loads so each worker keeps about the same headroom below ``cap``.
    """
    n = max(assign, default=-1) + 1
    if n < 2:
        return assign
    out = list(assign)
    wl = [0.0] * n
    items: list[list[int]] = [[] for _ in range(n)]
    for i, b in enumerate(out):
        wl[b] += loads[i]
        items[b].append(i)
    for b in range(n):
        items[b].sort(key=lambda i: loads[i])
    for _ in range(len(loads)):
        hi = max(range(n), key=wl.__getitem__)
        lo = min(range(n), key=wl.__getitem__)
        gap = wl[hi] - wl[lo]
        # the largest item that still narrows the gap
        cand = [i for i in items[hi] if 0 < loads[i] < gap]
        if not cand:
            break
        i = cand[-1]
        if wl[lo] + loads[i] > cap:
            break
        items[hi].remove(i)
        bisect.insort(items[lo], i, key=lambda j: loads[j])
        wl[hi] -= loads[i]
        wl[lo] += loads[i]
        out[i] = lo
    return out
