"""Choosing a cut window per component: the loosest cuts where they save the most boundary load the packing affords.

:func:`choose_cuts` carves each component (:func:`partitioner.builders.bisection.carve`) with
the windows of a :class:`CutBudget` and picks a window per component: the loosest cuts go
to the components where they save the most boundary load, as long as every region still
packs onto the budget's workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from geokernel.geo.graph import boundary_mask
from geokernel.geo.tiles import FloatArray, IntArray
from partitioner.builders.bisection import Pairs, carve, sorted_piece
from partitioner.builders.pour import pour_count
from partitioner.load.counts import Grid

REFINE_COMPONENTS = 64  # components choose_cuts revisits one by one after its level-wise pass

@dataclass(frozen=True)
class CutBudget:
    """Room the packing leaves for loose cuts: :func:`partitioner.builders.carving.carve_cells` then picks a window per component.

    Attributes
    ----------
    windows : tuple of float
        Cut windows to choose from (see :func:`partitioner.builders.bisection.cut_at`); 0 (exact cuts) is always
        among the choices.
    workers : int
        Workers the regions must pack onto (best-fit decreasing at ``pack_cap``).
    pack_cap : float
        Worker capacity for that packing.
    other_loads : tuple of float
        Loads of regions made elsewhere (pieces of hot cells) that pack with these.
    liquid : tuple of float
        Loads of cells split by entity hash, poured into the room the packing leaves
        (:func:`partitioner.builders.pour.pour`).
    """

    windows: tuple[float, ...]
    workers: int
    pack_cap: float
    other_loads: tuple[float, ...] = ()
    liquid: tuple[float, ...] = ()



class CutChoice(NamedTuple):
    """What :func:`choose_cuts` returns."""

    pieces: list[list[IntArray]]  # per component, its pieces (cell indices)
    cut_load: float  # boundary load of all the cuts
    cut_floor: float  # the least it could be: every component cut its cheapest way


class _Options:
    """Each component carved with each window: its pieces, their loads and the boundary load of the cuts."""

    def __init__(self, comps: list[IntArray], grid: Grid, cap: float, windows: Sequence[float]) -> None:
        self.comps, self.grid, self.cap, self.windows = comps, grid, cap, windows
        self.pieces: list[list[list[IntArray]]] = [[[] for _ in windows] for _ in comps]
        self.cost = [[math.inf] * len(windows) for _ in comps]
        self.piece_loads: list[list[list[float]]] = [[[] for _ in windows] for _ in comps]

    def carve_with(self, levels: Sequence[int]) -> None:
        """Carve every component with each window of ``levels`` (indices into the windows)."""
        w = self.grid.weight
        boundary = np.zeros(len(w), dtype=bool)
        for c, cells in enumerate(self.comps):
            piece = sorted_piece(cells, self.grid)  # sorted once for all the windows
            for k in levels:
                boundary[cells] = False
                pieces = carve(piece, self.grid, self.cap, window=self.windows[k], boundary=boundary)
                self.pieces[c][k] = pieces
                self.cost[c][k] = float(w[cells][boundary[cells]].sum())  # as cut_load finds it from all pairs
                self.piece_loads[c][k] = [float(w[p].sum()) for p in pieces]

    def cheapest(self) -> list[int]:
        """The cheapest option carved so far per component; on a tie the narrower window (it packs tighter)."""
        return [min(range(len(self.windows)), key=lambda k: (costs[k], -k)) for costs in self.cost]

    def workers(self, choice: list[int], placed: list[float], budget: CutBudget) -> int:
        """Workers all regions need (``placed`` + the pieces of ``choice``), packed best fit at the budget's cap,
        with its liquid loads poured into the room left."""
        loads = placed + [ld for c, k in enumerate(choice) for ld in self.piece_loads[c][k]]
        return pour_count(loads, budget.liquid, budget.pack_cap, budget.workers)

    def total_cost(self, choice: list[int]) -> float:
        return sum(self.cost[c][k] for c, k in enumerate(choice))

    def result(self, choice: list[int], floor: list[int]) -> CutChoice:
        return CutChoice([self.pieces[c][k] for c, k in enumerate(choice)], self.total_cost(choice),
                         self.total_cost(floor))


def choose_cuts(comps: list[IntArray], grid: Grid, cap: float, budget: CutBudget, placed: list[float]) -> CutChoice:
    """Carve each component with the window that saves the most boundary load the packing can afford.

    Notes
    -----
    Each component is first carved with the widest window and with exact cuts; if
    the cheaper of the two for every component packs within ``budget.workers``,
    that is the answer (and the floor). Otherwise every window is carved, and,
    starting from exact cuts everywhere, windows are taken widest first; at each, the components whose
    boundary load (:func:`cut_load`) that window lowers the most are switched to
    it, as many as the packing of all regions (``placed`` + the pieces) still fits
    on ``budget.workers`` (a binary search over the components sorted by saving).
    Last, the ``REFINE_COMPONENTS`` components with the most left to gain each
    take their cheapest option that still fits. If exact cuts already need more
    workers, that count is the budget instead.
    """
    windows = sorted({*budget.windows, 0.0}, reverse=True)
    exact = len(windows) - 1
    opts = _Options(comps, grid, cap, windows)

    def workers(choice: list[int]) -> int:
        return opts.workers(choice, placed, budget)

    opts.carve_with((0, exact) if exact > 0 else (0,))
    first = opts.cheapest()
    if workers(first) <= budget.workers:
        return opts.result(first, first)
    opts.carve_with(range(1, exact))
    floor = opts.cheapest()
    choice = [exact] * len(comps)
    limit = max(budget.workers, workers(choice))
    for level in range(exact):
        choice = _switch_to(level, choice, opts.cost, lambda ch: workers(ch) <= limit)
    return opts.result(_refine(choice, opts.cost, lambda ch: workers(ch) <= limit), floor)


def _switch_to(level: int, choice: list[int], cost: list[list[float]], fits: Callable[[list[int]], bool]
               ) -> list[int]:
    """Switch to window ``level`` the most components it saves the most on, as many as still fit."""
    cand = sorted((c for c in range(len(choice)) if cost[c][level] < cost[c][choice[c]]),
                  key=lambda c: cost[c][level] - cost[c][choice[c]])
    lo, hi = 0, len(cand)  # the first lo candidates are known to fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = list(choice)
        for c in cand[:mid]:
            trial[c] = level
        if fits(trial):
            lo = mid
        else:
            hi = mid - 1
    out = list(choice)
    for c in cand[:lo]:
        out[c] = level
    return out


def _refine(choice: list[int], cost: list[list[float]], fits: Callable[[list[int]], bool]) -> list[int]:
    """One by one, where the most is still to gain: each component's cheapest option that still fits."""
    gain = sorted(range(len(choice)), key=lambda c: min(cost[c]) - cost[c][choice[c]])
    for c in gain[:REFINE_COMPONENTS]:
        for k in sorted(range(len(cost[c])), key=lambda k: cost[c][k]):
            if cost[c][k] >= cost[c][choice[c]]:
                break
            trial = list(choice)
            trial[c] = k
            if fits(trial):
                choice = trial
                break
    return choice


def cut_load(cells: IntArray, pieces: list[IntArray], w: FloatArray, pairs: Pairs) -> float:
    """Load on ``cells`` with an 8-neighbour in another of ``pieces`` (the boundary load the cuts make).

    ``pieces`` split ``cells`` (indices into ``w``); ``pairs`` are the 8-neighbour pairs of ``cells``
    (positions in ``cells``).
    """
    if len(pieces) < 2:
        return 0.0
    piece_of = np.empty(len(w), dtype=np.int64)
    piece_of[np.concatenate(pieces)] = np.repeat(np.arange(len(pieces)), [len(p) for p in pieces])
    return float(w[cells][boundary_mask(piece_of[cells], *pairs)].sum())
