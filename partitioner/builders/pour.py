"""Pouring hot cells into workers: entity-hash shares sized to fill the room that packing leaves.

A cell hotter than the cap (with no finer counts to split it by) is split by entity hash,
and its shares can take any size in whole buckets of :data:`geokernel.partition_spec.model.HASH_BUCKETS`:
it is *liquid*. The regions (*solids*) are packed first (best fit decreasing,
:func:`partitioner.builders.packing.pack_best_fit`). The liquid the room left cannot hold
gets whole new workers (shares of the cap, largest cells first); the rest of each cell,
largest first, goes to the room on the workers of the regions next to it, then to the
best-fitting room anywhere, then (split) to the largest rooms, and only then to a new
worker. So hot cells top up the workers the regions leave short, and the worker count is
``max(workers the regions need, ceil(total / cap))``, give or take rounding, however
many cells are hot.

Notes
-----
A share's load is ``load * width / HASH_BUCKETS``; widths are rounded down so that no
worker passes the cap, and a cell whose single bucket is above the cap cannot be split
(:class:`geokernel.errors.BuildError`). The shares of one cell are ordered with those on
its neighbours' workers first (the lowest hash range, the one the boundary metric counts).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import NamedTuple

from geokernel.errors import BuildError
from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders.packing import pack_best_fit

_TOL = 1e-9


class Liquid(NamedTuple):
    """A cell to split by entity hash: its quadkey, load, its index in the grid (-1 for a finer cell) and
    the solid items (regions) next to it."""

    quadkey: str
    load: float
    cell: int = -1
    near: tuple[int, ...] = ()


class Share(NamedTuple):
    """One share of a liquid cell: which cell, which worker (bin), its hash range ``[lo, hi)`` and load."""

    liquid: int
    bin: int
    lo: int
    hi: int
    load: float


class Pouring(NamedTuple):
    """Where solids and liquid shares went: the bin of each solid, the shares, and the bins used."""

    bins_of: list[int]
    shares: list[Share]
    bins: int


class _Rooms:
    """Free room per bin, with the bins kept sorted by room for best-fit lookups (``min_room``: the least room
    a piece of a cell is split into)."""

    def __init__(self, cap: float, used: Sequence[float], min_room: float = 0.0) -> None:
        self.cap = cap
        self.min_room = min_room
        self.room = [cap - u for u in used]
        self._sorted = sorted((r, b) for b, r in enumerate(self.room))

    def add_bin(self) -> int:
        self.room.append(self.cap)
        bisect.insort(self._sorted, (self.cap, len(self.room) - 1))
        return len(self.room) - 1

    def take(self, b: int, load: float) -> None:
        self._sorted.remove((self.room[b], b))
        self.room[b] -= load
        bisect.insort(self._sorted, (self.room[b], b))

    def best_fit(self, need: float) -> int | None:
        """The bin with the least room that still holds ``need``."""
        i = bisect.bisect_left(self._sorted, (need - _TOL * self.cap, -1))
        return self._sorted[i][1] if i < len(self._sorted) else None

    def largest(self) -> int | None:
        return self._sorted[-1][1] if self._sorted else None


#: Rooms smaller than this share of the cap take no piece of a cell unless that saves a worker.
MIN_SHARE = 0.1


def pour(solids: Sequence[float], liquids: Sequence[Liquid], cap: float, target: int | None = None,
         headroom: bool = True) -> Pouring:
    """Pack ``solids`` best fit, then pour every liquid cell into the room left (see the module docstring).

    Notes
    -----
    New workers are opened only for the liquid that the room left cannot hold: as whole
    workers of one cell's shares (largest cells first), and one more if a part remains.
    Rooms under :data:`MIN_SHARE` of the cap are left alone at first, so a cell is not
    scattered in slivers; if that needs more workers than ``target`` (any number when
    ``target`` is None) and every room helps, every room is used.

    With ``headroom``, the liquid is then poured again as if each cell were larger by the
    first of :data:`HEADROOM` that still needs no more workers than the pouring without
    (the shares keep their real loads): a share then leaves that much of its own load free
    on its worker, so its cell can grow that much before a sticky rebuild must move any of
    it. Headroom never costs a worker. All shares of one cell follow that cell's load
    together, so a worker filled by shares swings with it; workers of many regions average out.
    """
    plain = _pour_tight(solids, liquids, cap, target)
    if not (headroom and liquids):
        return plain
    room = plain.bins * cap - sum(solids)
    liquid = sum(q.load for q in liquids)
    for h in HEADROOM:
        if liquid * (1 + h) > room:  # cannot fit in plain.bins workers however it is poured
            continue
        loose = _pour_tight(solids, [q._replace(load=q.load * (1 + h)) for q in liquids], cap, plain.bins)
        if loose.bins <= plain.bins:
            return loose._replace(shares=[s._replace(load=(s.hi - s.lo) * liquids[s.liquid].load / HASH_BUCKETS)
                                          for s in loose.shares])
    return plain


#: Headroom tried for the entity-hash shares of a fresh build, largest first, within the workers the pouring
#: needs anyway: a share is poured as if its cell's load were this much larger.
HEADROOM = (0.10, 0.07, 0.05, 0.03, 0.02, 0.01)


def _pour_tight(solids: Sequence[float], liquids: Sequence[Liquid], cap: float, target: int | None) -> Pouring:
    """:func:`pour` without headroom."""
    coarse = _pour(solids, liquids, cap, MIN_SHARE * cap)
    if target is not None and coarse.bins <= target:
        return coarse
    fine = _pour(solids, liquids, cap, 0.0)
    return fine if fine.bins < coarse.bins else coarse


def pour_count(solids: Sequence[float], liquid_loads: Sequence[float], cap: float, target: int | None = None) -> int:
    """Workers that :func:`pour` uses for these loads (no neighbour preferences)."""
    return _pour_tight(solids, [Liquid("", load) for load in liquid_loads], cap, target).bins


def _pour(solids: Sequence[float], liquids: Sequence[Liquid], cap: float, min_room: float) -> Pouring:
    bins_of = pack_best_fit(solids, cap)
    used = [0.0] * (max(bins_of, default=-1) + 1)
    for load, b in zip(solids, bins_of, strict=True):
        used[b] += load
    rooms = _Rooms(cap, used, min_room)
    order = sorted(range(len(liquids)), key=lambda i: -liquids[i].load)
    spare = sum(r for r in rooms.room if r >= min_room)
    whole = max(0, math.floor((sum(q.load for q in liquids) - spare) / cap + 1e-9))
    cuts: dict[int, list[_Cut]] = {}
    for k in order:
        cuts[k], whole = _whole_workers(liquids[k], rooms, whole)
    shares: list[Share] = []
    for k in order:
        near_bins = list(dict.fromkeys(bins_of[s] for s in liquids[k].near))
        shares += _shares(k, liquids[k], cuts[k] + _pour_rest(liquids[k], cuts[k], rooms, near_bins))
    return Pouring(bins_of, shares, len(rooms.room))


class _Cut(NamedTuple):
    """Buckets of one cell given to one bin (``near``: a bin of the cell's neighbours)."""

    bin: int
    buckets: int
    near: bool


def _unit_and_full(liquid: Liquid, cap: float) -> tuple[float, int]:
    """Load per bucket, and the most buckets one worker can take."""
    unit = liquid.load / HASH_BUCKETS
    full = math.floor(HASH_BUCKETS * cap / liquid.load * (1 - 1e-12)) if liquid.load > 0 else HASH_BUCKETS
    if full < 1:
        raise BuildError(f"cell {liquid.quadkey!r} with load {liquid.load!r} would need more than {HASH_BUCKETS} "
                         f"entity-hash shares of the cap {cap!r}")
    return unit, full


def _whole_workers(liquid: Liquid, rooms: _Rooms, budget: int) -> tuple[list[_Cut], int]:
    """New workers filled with this cell's shares of the cap, at most ``budget``; return them and the budget left."""
    unit, full = _unit_and_full(liquid, rooms.cap)
    out: list[_Cut] = []
    for _ in range(min(budget, HASH_BUCKETS // full if liquid.load > rooms.cap else 0)):
        b = rooms.add_bin()
        rooms.take(b, full * unit)
        out.append(_Cut(b, full, False))
    return out, budget - len(out)


def _pour_rest(liquid: Liquid, done: list[_Cut], rooms: _Rooms, near_bins: list[int]) -> list[_Cut]:
    """Pour what whole workers did not take: near rooms first, whole if it fits anywhere, else split."""
    if liquid.load <= 0:
        return [] if done else [_Cut(_some_bin(rooms), HASH_BUCKETS, False)]
    unit, full = _unit_and_full(liquid, rooms.cap)
    left = HASH_BUCKETS - sum(c.buckets for c in done)
    out: list[_Cut] = []
    while left > 0:
        b = _target(rooms, left * unit, near_bins, unit)
        width = min(left, math.floor(rooms.room[b] / unit * (1 + 1e-12)))
        if width <= 0:
            b = rooms.add_bin()
            width = min(left, full)
        rooms.take(b, width * unit)
        out.append(_Cut(b, width, b in near_bins))
        left -= width
    return out


def _shares(k: int, liquid: Liquid, cuts: list[_Cut]) -> list[Share]:
    """Hash ranges for the cuts of one cell: those on a neighbour's worker take the lowest ranges."""
    unit = liquid.load / HASH_BUCKETS
    out: list[Share] = []
    lo = 0
    for c in sorted(cuts, key=lambda c: not c.near):
        out.append(Share(k, c.bin, lo, lo + c.buckets, c.buckets * unit))
        lo += c.buckets
    return out


def _target(rooms: _Rooms, need: float, near_bins: list[int], unit: float) -> int:
    """Where the rest of a cell goes: a neighbour's worker it fits whole (best fit), else any worker it fits
    whole, else the neighbour's or any worker with the most room, else a new worker."""
    tol = _TOL * rooms.cap
    near_fit = [b for b in near_bins if rooms.room[b] >= need - tol]
    if near_fit:
        return min(near_fit, key=lambda b: rooms.room[b])
    fit = rooms.best_fit(need)
    if fit is not None:
        return fit
    least = max(unit, rooms.min_room)
    near_room = [b for b in near_bins if rooms.room[b] >= least]
    if near_room:
        return max(near_room, key=lambda b: rooms.room[b])
    largest = rooms.largest()
    if largest is not None and rooms.room[largest] >= least:
        return largest
    return rooms.add_bin()


def _some_bin(rooms: _Rooms) -> int:
    largest = rooms.largest()
    return largest if largest is not None else rooms.add_bin()
