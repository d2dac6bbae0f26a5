"""Windows of load for the simulator: what the aggregation counts and what the workers spend.

A :class:`Window` is one snapshot window: ``events`` (the load per quadkey the aggregation job
counts, i.e. what the controller sees) and optionally ``cost`` (the CPU the workers spend on the
same quadkeys, in "events at mean cost"). The **truth** a worker carries is the cost
when there is one, else the events.

A series of windows is either a directory of counts CSVs (``quadkey,weight``, one file per window
in file-name order: :func:`read_window_dir`) or a generated scenario (:class:`CellSeries`: a fixed
set of cells, an expected load per window, Poisson draws from a seeded generator, so the same
seed always gives the same windows and each window can be made on demand).

**Ticks.** A window may also be known in ``k`` consecutive ticks (the router's intervals, seconds apart, which the
fast path counts: :func:`ticks_of`): a directory of one file per tick, read ``k`` to a window (each window the sum of
its ticks), or a scenario drawn with ``ticks_per_window`` (each window's Poisson draw split over its ticks in
proportion to the load expected at each tick's middle: the windows are the same draws as without ticks). A series
without ticks has one tick per window, the window itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from geokernel.errors import PartitionerError
from geokernel.geo.quadtree import tree_keys
from geokernel.geo.tiles import quadkeys_to_arrays
from partitioner.load.counts import Counts, Tiles
from partitioner.load.eventlog import window_start_of_name
from partitioner.load.read import read_counts_csv

FloatArray = npt.NDArray[np.float64]


class SimulationError(PartitionerError, ValueError):
    """A simulation input is unusable (no windows, a bad scenario name, a bad setting); names the value."""


@dataclass(frozen=True, eq=False)
class Window:
    """One snapshot window: the counted ``events`` and, when known, the workers' ``cost`` per quadkey."""

    events: Counts
    cost: Counts | None = None

    @property
    def truth(self) -> Counts:
        """The load the workers carry: the cost when the scenario has one, else the events."""
        return self.cost if self.cost is not None else self.events


class WindowSeries(Protocol):
    """A run of windows, each made on demand."""

    def __len__(self) -> int: ...

    def window(self, t: int) -> Window: ...

    def peak(self) -> Counts:
        """Every quadkey's maximum truth over the run."""
        ...


def ticks_of(series: WindowSeries, t: int) -> tuple[Window, ...]:
    """Window ``t``'s ticks in time order (the window itself, alone, when the series has none)."""
    ticks = getattr(series, "ticks", None)
    return ticks(t) if callable(ticks) else (series.window(t),)


def tick_count(series: WindowSeries) -> int:
    """Ticks per window of ``series`` (1 without ticks)."""
    return int(getattr(series, "ticks_per_window", 1))


def sum_counts(parts: Sequence[Counts], source: str) -> Counts:
    """The sum of ``parts`` per tile, ordered by zoom then ``x << zoom | y`` (one file's order for one zoom)."""
    x = np.concatenate([c.tiles.x for c in parts])
    y = np.concatenate([c.tiles.y for c in parts])
    z = np.concatenate([c.tiles.z for c in parts])
    w = np.concatenate([np.asarray(c.weights, dtype=np.float64) for c in parts])
    keys, first, inv = np.unique(tree_keys(x, y, z), return_index=True, return_inverse=True)
    total = np.bincount(inv, weights=w, minlength=len(keys))
    return Counts.from_tiles(Tiles(x[first], y[first], z[first]), total, source)


@dataclass(frozen=True, eq=False)
class ListSeries:
    """Windows given as counts (e.g. read from a directory); the truth is the counts themselves.

    ``epoch0`` is window 0's start (epoch s) when the windows carry times (``partitioner counts`` names each file
    by its window's start), else None.
    """

    windows: tuple[Counts, ...]
    epoch0: float | None = None
    tick_counts: tuple[tuple[Counts, ...], ...] | None = None  # per window, its ticks (None: no ticks)

    def __len__(self) -> int:
        return len(self.windows)

    @property
    def ticks_per_window(self) -> int:
        return len(self.tick_counts[0]) if self.tick_counts else 1

    def window(self, t: int) -> Window:
        return Window(self.windows[t])

    def ticks(self, t: int) -> tuple[Window, ...]:
        if self.tick_counts is None:
            return (self.window(t),)
        return tuple(Window(c) for c in self.tick_counts[t])

    def peak(self) -> Counts:
        best: dict[str, float] = {}
        for c in self.windows:
            for q, w in zip(c.quadkeys, c.weights.tolist(), strict=True):
                if w > best.get(q, -1.0):
                    best[q] = w
        return Counts(tuple(best), np.fromiter(best.values(), dtype=np.float64, count=len(best)), "peak of the run")


@dataclass(frozen=True, eq=False)
class CellSeries:
    """Windows drawn on a fixed set of cells: ``events[t] ~ Poisson(expected(t))``.

    Parameters
    ----------
    cells : tuple of str
        Quadkeys (one zoom) that may carry load.
    expected : callable
        ``expected(t)`` -> expected events per cell in window ``t`` (same order as ``cells``).
    n_windows : int
    seed : int
        Window ``t`` draws from ``numpy.random.default_rng((seed, t))``: deterministic, independent per window.
    rates : array, optional
        CPU per event of each cell, in units of the run's mean cost per event; ``cost = events * rate``.
    source : str
        Name used in each window's counts (``<source>#t``).
    ticks_per_window : int
        Ticks each window is split into (:meth:`ticks`; ``expected`` is then also called at fractional ``t``, each
        tick's middle), >= 1.
    """

    cells: tuple[str, ...]
    expected: Callable[[float], FloatArray]
    n_windows: int
    seed: int
    rates: FloatArray | None = None
    source: str = "scenario"
    ticks_per_window: int = 1

    def __len__(self) -> int:
        return self.n_windows

    def draw(self, t: int) -> FloatArray:
        """Events per cell in window ``t`` (every cell, zeros included)."""
        if not 0 <= t < self.n_windows:
            raise IndexError(f"window {t!r} outside [0, {self.n_windows})")
        rng = np.random.default_rng((self.seed, t))
        return rng.poisson(np.maximum(self.expected(t), 0.0)).astype(np.float64)

    def window(self, t: int) -> Window:
        return self._window(self.draw(t), f"{self.source}#{t}")

    def _window(self, ev: FloatArray, name: str) -> Window:
        nz = np.nonzero(ev > 0)[0]
        tiles = Tiles(*(a[nz] for a in self._tiles))  # quadkey strings only if someone asks for them
        events = Counts.from_tiles(tiles, ev[nz], name)
        cost = None if self.rates is None else Counts.from_tiles(tiles, ev[nz] * self.rates[nz], f"{name} cost")
        return Window(events, cost)

    def ticks(self, t: int) -> tuple[Window, ...]:
        """Window ``t``'s draw split over its ticks: each cell's events multinomially, in proportion to the load
        expected at each tick's middle (a cell expected at none gets equal shares). The ticks sum to :meth:`window`."""
        k = int(self.ticks_per_window)
        if k <= 1:
            return (self.window(t),)
        ev = self.draw(t)
        nz = np.flatnonzero(ev > 0)
        p = np.vstack([np.maximum(self.expected(t - 0.5 + (j + 0.5) / k), 0.0)[nz] for j in range(k)]).T
        rows = p.sum(axis=1)
        p = np.where(rows[:, None] > 0, p / np.where(rows > 0, rows, 1.0)[:, None], 1.0 / k)
        split = np.random.default_rng((self.seed, t, k)).multinomial(ev[nz].astype(np.int64), p)
        out = []
        for j in range(k):
            part = np.zeros(len(ev))
            part[nz] = split[:, j]
            out.append(self._window(part, f"{self.source}#{t}.{j}"))
        return tuple(out)

    @functools.cached_property
    def _tiles(self) -> Tiles:
        """Tile arrays of :attr:`cells` (parsed once per series)."""
        return Tiles(*quadkeys_to_arrays(self.cells))

    def peak(self) -> Counts:
        best = np.zeros(len(self.cells), dtype=np.float64)
        scale = np.ones(len(self.cells)) if self.rates is None else self.rates
        for t in range(self.n_windows):
            np.maximum(best, self.draw(t) * scale, out=best)
        nz = np.nonzero(best > 0)[0]
        return Counts(tuple(self.cells[i] for i in nz), best[nz], f"{self.source} peak")


def read_window_dir(path: str | Path, ticks_per_window: int = 1) -> ListSeries:
    """Read every ``*.csv`` of a directory as one window each, in file-name order, or as one tick each,
    ``ticks_per_window`` to a window (each window the sum of its ticks).

    Raises
    ------
    SimulationError
        When the directory does not exist or holds no CSV file, or its files are not a whole number of windows.
    CountsError
        A bad file (naming the file and line).
    """
    p = Path(path)
    if not p.is_dir():
        raise SimulationError(f"windows {str(path)!r} is neither a directory nor a built-in scenario")
    files: Sequence[Path] = sorted(f for f in p.iterdir() if f.suffix.lower() == ".csv" and f.is_file())
    if not files:
        raise SimulationError(f"windows directory {str(path)!r} holds no .csv file (one quadkey,weight file per window)")
    epoch0 = window_start_of_name(files[0].name)
    if ticks_per_window <= 1:
        return ListSeries(tuple(read_counts_csv(f) for f in files), epoch0)
    if len(files) % ticks_per_window:
        raise SimulationError(f"windows directory {str(path)!r} holds {len(files)} tick files, not a whole number of "
                              f"windows of {ticks_per_window} ticks")
    ticks = [read_counts_csv(f) for f in files]
    groups = tuple(tuple(ticks[i:i + ticks_per_window]) for i in range(0, len(ticks), ticks_per_window))
    return ListSeries(tuple(sum_counts(g, f"{files[i * ticks_per_window].name}+{ticks_per_window - 1} ticks")
                            for i, g in enumerate(groups)), epoch0, groups)
