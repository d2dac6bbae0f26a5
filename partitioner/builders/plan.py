"""The working plan of a sticky repair: regions with their partition and worker ids, moved until every
worker fits the cap (:mod:`partitioner.builders.repair` fills it; this module moves, trims and places).

Notes
-----
* A worker over the cap gives up exactly its overflow from the ends of its entity-hash shares
  when they hold enough (the least load that can move); what they cannot give is covered by
  its cheapest items moved whole (regions, and shares under :data:`CUT_MIN` of the cap), or
  by a sliver of about the excess shaved off one of its largest regions, whichever moves less.
* The end a share gives up is the one whose neighbour in hash order has room for it, so it
  can join that neighbour.
* A piece of a hash-split cell that must move first joins the share next to it in hash
  order (same cell, adjacent range) on a worker with room, so a cell is not cut into ever
  more shares; else it goes to the fullest worker it fits (best fit), or to a new worker.
* No piece is placed that no worker can hold: an unplaced share above the cap (the end a
  share grown to more than twice the cap gives up is itself above the cap) is first cut into
  shares of at most the cap, as a hot cell is split (:meth:`RepairPlan.place_unassigned`).
* Shares under :data:`SLIVER` of the cap join a neighbouring share of their cell where that
  worker stays within :data:`SLIVER_FILL` of the cap (where load has fallen), so the ends
  given up while load rose do not pile up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from geokernel.errors import BuildError
from geokernel.geo.tiles import IntArray
from geokernel.partition_spec.model import HASH_BUCKETS, Spec
from partitioner.builders.ids import PARTITION_PREFIX, WORKER_PREFIX, IdAllocator, Ids, fill_blanks
from partitioner.builders.region import Placement, Region
from partitioner.builders.shares import of_max_load
from partitioner.builders.shave import Shaved, region_of, shave
from partitioner.load.counts import Grid

#: Entity-hash shares under this share of the cap join a neighbouring share of their cell where its worker has
#: room (:meth:`RepairPlan.join_slivers`), so that the ends given up by repairs do not pile up as ever more shares.
SLIVER = 0.1

#: A share under this share of the cap is never cut again: it moves whole when its worker must shed load (at most
#: this much more than asked), so the ends that repairs give up are not cut into ever smaller pieces.
CUT_MIN = 0.01

#: A sliver joins a neighbouring share only where that worker stays within this share of the cap: where load has
#: fallen, not on the full workers of a routine rebuild (a fresh build fills workers with slivers on purpose).
SLIVER_FILL = 0.9


@dataclass(frozen=True)
class RepairResult:
    """A repaired placement, the ids of its regions and workers, and what the repair did."""

    placement: Placement
    ids: Ids
    notes: tuple[str, ...]


class Item(NamedTuple):
    """One region of the plan."""

    region: Region
    pid: str  # partition id ("" until one is allocated)
    worker: str  # worker id ("" while unplaced)
    cells: IntArray | None  # its grid cells, where known (a shave needs them)


class RepairPlan:
    """Mutable working state of one repair (internal; the result is immutable regions and ids)."""

    def __init__(self, cap: float, fill: float = 1.0) -> None:
        self.cap = cap
        self.fill = fill  # the build's fill: ``max_load`` is ``cap / fill`` (notes state shares of it)
        self.items: list[Item] = []
        self._joined: set[int] = set()  # items joined to a neighbouring share, dropped by _drop_joined

    def add(self, region: Region, pid: str, worker: str, cells: IntArray | None = None) -> None:
        self.items.append(Item(region, pid, worker, cells))

    def load(self, i: int) -> float:
        return self.items[i].region.load

    def share(self, load: float, digits: int = 0) -> str:
        """``load`` as a note states it: its share of ``max_load`` (and of the cap, below fill 1)."""
        return of_max_load(load, self.cap, self.fill, digits)

    def move(self, i: int, worker: str) -> None:
        self.items[i] = self.items[i]._replace(worker=worker)

    def worker_loads(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for it in self.items:
            if it.worker:
                out[it.worker] = out.get(it.worker, 0.0) + it.region.load
        return out

    def shed_overflow(self, grid: Grid, notes: list[str]) -> None:
        """Bring every worker back under the cap, moving as little load as it can (see the module notes)."""
        for w, load in sorted(self.worker_loads().items()):
            excess = load - self.cap
            if excess <= self.cap * 1e-12:
                continue
            mine = [i for i, it in enumerate(self.items) if it.worker == w]
            moves, trim = self._cover(mine, excess)
            cost = sum(self.load(i) for i in moves) + trim
            best = self._cheapest_shave(mine, excess, cost, grid)
            if best is None:
                for i in moves:
                    self.move(i, "")
                self._give_from_shares(mine, trim)
                continue
            largest, shaved = best
            it = self.items[largest]
            self.items[largest] = it._replace(region=region_of(shaved.keep, grid), cells=shaved.keep)
            for piece in shaved.pieces:
                self.add(region_of(piece, grid), "", "", piece)
            notes.append(f"worker {w!r} at {self.share(load, 1)}: shaved "
                         f"{float(grid.weight[np.concatenate(shaved.pieces)].sum()):.6g} off partition {it.pid!r}")

    def _cover(self, mine: list[int], excess: float) -> tuple[list[int], float]:
        """Items of one worker to move whole, and the load to give up from the ends of its entity-hash shares, that
        together shed ``excess``: shares of :data:`CUT_MIN` of the cap or more give up what they can (exactly the
        load asked); the cheapest other items found (regions, and smaller shares, which are never cut again) cover
        the rest."""
        cut = self._cuttable(mine)
        need = excess - sum(self.load(i) for i in cut)
        if need <= self.cap * 1e-12:
            return [], excess
        whole = sorted((i for i in mine if i not in cut), key=self.load)
        options = [self._moves_covering(whole, need)]
        ascending: list[int] = []
        total = 0.0
        for i in whole:
            if total >= need:
                break
            ascending.append(i)
            total += self.load(i)
        options.append(ascending)
        moves = min(options, key=lambda o: sum(self.load(i) for i in o))
        return moves, max(0.0, excess - sum(self.load(i) for i in moves))

    def _cuttable(self, mine: list[int]) -> list[int]:
        """The entity-hash shares of ``mine`` that may give up part of their range (not slivers)."""
        return [i for i in mine if self.items[i].region.hash_range is not None and self.load(i) >= CUT_MIN * self.cap]

    def _give_from_shares(self, mine: list[int], amount: float) -> None:
        """Give up ``amount`` from the ends of the entity-hash shares of ``mine``, largest share first (a share
        smaller than what is left goes whole); each end given up becomes an unplaced share next to the rest."""
        for i in sorted(self._cuttable(mine), key=lambda i: -self.load(i)):
            if amount <= self.cap * 1e-12:
                return
            it = self.items[i]
            lo, hi = it.region.hash_range or (0, HASH_BUCKETS)
            unit = it.region.load / (hi - lo)
            k = math.ceil(amount / unit * (1 - 1e-12))
            if k >= hi - lo:
                self.move(i, "")
                amount -= it.region.load
                continue
            q = it.region.quadkeys
            if self._room_next_to(i, lo) >= unit * k > self._room_next_to(i, hi):
                self.items[i] = it._replace(region=Region(q, unit * (hi - lo - k), (lo + k, hi)))
                self.add(Region(q, unit * k, (lo, lo + k)), "", "")
            else:
                self.items[i] = it._replace(region=Region(q, unit * (hi - lo - k), (lo, hi - k)))
                self.add(Region(q, unit * k, (hi - k, hi)), "", "")
            return

    def _room_next_to(self, i: int, edge: int) -> float:
        """The room on the worker of the share of item ``i``'s cell that meets it at hash bucket ``edge`` (0 if none),
        where the end given up there could join."""
        it = self.items[i]
        for j, other in enumerate(self.items):
            hr = other.region.hash_range
            if j != i and hr is not None and edge in hr and other.worker and other.region.quadkeys == it.region.quadkeys:
                return self.cap - sum(o.region.load for o in self.items if o.worker == other.worker)
        return 0.0

    def _cheapest_shave(self, mine: list[int], excess: float, move_cost: float, grid: Grid
                        ) -> tuple[int, Shaved] | None:
        """The cheapest shave of ``excess`` off one of the three largest regions of ``mine`` when it moves less load
        than ``move_cost``, else None."""
        best: tuple[int, Shaved] | None = None
        for i in sorted(mine, key=lambda i: -self.load(i))[:3]:
            shaved = self._shave_instead(i, excess, move_cost, grid)
            if shaved is not None:
                best = (i, shaved)
                move_cost = float(grid.weight[np.concatenate(shaved.pieces)].sum())
        return best

    def _shave_instead(self, i: int, excess: float, move_cost: float, grid: Grid) -> Shaved | None:
        """A shave of ``excess`` off region ``i`` when that moves less load than ``move_cost``, else None."""
        it = self.items[i]
        if not (move_cost > 1.05 * excess and it.cells is not None and len(it.cells) > 1
                and it.region.hash_range is None and it.region.load > excess):
            return None
        shaved = shave(it.cells, grid, it.region.load - excess, below=move_cost)
        if shaved is not None and float(grid.weight[np.concatenate(shaved.pieces)].sum()) >= move_cost:
            return None
        return shaved

    def _moves_covering(self, mine: list[int], excess: float) -> list[int]:
        """Pick regions of one worker to move off it, moving as little load as greedily possible."""
        left = sorted(mine, key=self.load)
        picked: list[int] = []
        while excess > self.cap * 1e-12 and left:
            pick = next((i for i in left if self.load(i) >= excess), left[-1])
            left.remove(pick)
            picked.append(pick)
            excess -= self.load(pick)
        return picked

    def place_unassigned(self, previous_workers: list[str]) -> None:
        """Place every unplaced region on the fullest worker it fits (best fit), else on a new worker."""
        self._cut_oversized()
        wl = self.worker_loads()
        new_worker = IdAllocator(WORKER_PREFIX, [*previous_workers, *wl])
        cells = self._cell_shares()
        for i in sorted((i for i, it in enumerate(self.items) if not it.worker), key=lambda i: -self.load(i)):
            need = self.load(i)
            if self._join_neighbour(i, cells, wl):
                continue
            fits = [(self.cap - used, w) for w, used in wl.items() if used + need <= self.cap * (1 + 1e-12)]
            w = min(fits)[1] if fits else new_worker()
            self.move(i, w)
            wl[w] = wl.get(w, 0.0) + need
        self._drop_joined()

    def _cut_oversized(self) -> None:
        """Cut every unplaced entity-hash share above the cap into consecutive shares of at most the cap.

        The first keeps the item's id and the start of its range; the others are new. Without this, a share
        given up whole by a worker far over the cap (more than twice the cap) would open a worker of its own
        over the cap.

        Raises
        ------
        BuildError
            When one entity bucket of the share holds more than the cap (the cell cannot be split that finely).
        """
        for i in range(len(self.items)):
            it = self.items[i]
            hr = it.region.hash_range
            if it.worker or hr is None or it.region.load <= self.cap * (1 + 1e-12):
                continue
            lo, hi = hr
            unit = it.region.load / (hi - lo)
            full = math.floor(self.cap / unit * (1 - 1e-12))
            if full < 1:
                raise BuildError(f"share {hr!r} of cell {it.region.quadkeys[0]!r} with load {it.region.load!r} "
                                 f"holds more than max_load {self.cap!r} in one entity-hash bucket")
            q = it.region.quadkeys
            self.items[i] = it._replace(region=Region(q, unit * full, (lo, lo + full)))
            for a in range(lo + full, hi, full):
                b = min(hi, a + full)
                self.add(Region(q, unit * (b - a), (a, b)), "", "")

    def join_slivers(self, notes: list[str]) -> None:
        """Join every share under :data:`SLIVER` of the cap to a share next to it in hash order (same cell) on a
        worker that stays within :data:`SLIVER_FILL` of the cap, smallest first."""
        wl = self.worker_loads()
        cells = self._cell_shares()
        small = [i for i, it in enumerate(self.items) if it.region.hash_range is not None and self.load(i) < SLIVER * self.cap]
        joined = 0.0
        for i in sorted(small, key=self.load):
            it = self.items[i]
            if i in self._joined or it.region.load >= SLIVER * self.cap:  # joined, or grown by a sliver joining it
                continue
            wl[it.worker] -= it.region.load
            if self._join_neighbour(i, cells, wl, SLIVER_FILL):
                joined += it.region.load
            else:
                wl[it.worker] += it.region.load
        if self._joined:
            notes.append(f"{len(self._joined)} entity-hash shares under {self.share(SLIVER * self.cap)} joined the "
                         f"share next to them ({joined:.6g} load)")
        self._drop_joined()

    def _cell_shares(self) -> dict[tuple[str, ...], list[int]]:
        """The items of each hash-split cell (by its quadkeys)."""
        out: dict[tuple[str, ...], list[int]] = {}
        for i, it in enumerate(self.items):
            if it.region.hash_range is not None:
                out.setdefault(it.region.quadkeys, []).append(i)
        return out

    def _join_neighbour(self, i: int, cells: dict[tuple[str, ...], list[int]], wl: dict[str, float],
                        fill: float = 1.0) -> bool:
        """Add share ``i`` to a placed share of its cell next to it in hash order whose worker has room for it up to
        ``fill`` of the cap (``wl``: worker loads without ``i``, updated); False if there is none."""
        it = self.items[i]
        if it.region.hash_range is None:
            return False
        lo, hi = it.region.hash_range
        need = it.region.load
        for j in cells.get(it.region.quadkeys, ()):
            other = self.items[j]
            if j == i or j in self._joined or not other.worker or other.region.hash_range is None:
                continue
            a, b = other.region.hash_range
            if (b == lo or a == hi) and wl.get(other.worker, 0.0) + need <= self.cap * fill * (1 + 1e-12):
                region = Region(it.region.quadkeys, other.region.load + need, (min(a, lo), max(b, hi)))
                self.items[j] = other._replace(region=region)
                wl[other.worker] = wl.get(other.worker, 0.0) + need
                self._joined.add(i)
                return True
        return False

    def _drop_joined(self) -> None:
        """Remove the shares joined to a neighbour (indices of the other items shift)."""
        if self._joined:
            self.items = [it for i, it in enumerate(self.items) if i not in self._joined]
            self._joined = set()

    def consolidate(self, target: int, notes: list[str]) -> None:
        """Empty the least-loaded workers into the others (best fit, whole partitions) down to ``target``."""
        wl = self.worker_loads()
        if len(wl) <= target:
            return
        hosted: dict[str, list[int]] = {}
        for i, it in enumerate(self.items):
            hosted.setdefault(it.worker, []).append(i)
        emptied: list[str] = []
        moved = 0.0
        for w in sorted(wl, key=lambda k: (wl[k], k)):
            if len(wl) <= target:
                break
            others = {o: load for o, load in wl.items() if o != w}
            plan = self._empty_into(hosted.get(w, []), others)
            if plan is None:
                continue
            for i, dest in plan:
                self.move(i, dest)
                hosted.setdefault(dest, []).append(i)
            hosted.pop(w, None)
            moved += wl[w]
            emptied.append(w)
            wl = others
        if emptied:
            notes.append(f"load fell: emptied {len(emptied)} least-loaded workers into the others, moving "
                         f"{moved:.6g} load ({', '.join(emptied[:5])}{', ...' if len(emptied) > 5 else ''})")

    def _empty_into(self, regions: list[int], others: dict[str, float]) -> list[tuple[int, str]] | None:
        """Where each of ``regions`` goes (best fit, largest first) to empty their worker; None if one fits nowhere.

        ``others`` (worker loads) is updated with the moves planned, also when the plan fails.
        """
        plan: list[tuple[int, str]] = []
        for i in sorted(regions, key=lambda i: -self.load(i)):
            need = self.load(i)
            fits = [(self.cap - load - need, o) for o, load in others.items() if load + need <= self.cap * (1 + 1e-12)]
            if not fits:
                return None
            dest = min(fits)[1]
            others[dest] += need
            plan.append((i, dest))
        return plan

    def result(self, previous: Spec, notes: list[str]) -> RepairResult:
        wids = sorted({it.worker for it in self.items})
        windex = {w: k for k, w in enumerate(wids)}
        ids = fill_blanks([it.pid for it in self.items], PARTITION_PREFIX, (p.id for p in previous.partitions))
        placement = Placement(tuple(it.region for it in self.items), tuple(windex[it.worker] for it in self.items))
        return RepairResult(placement, Ids(ids, tuple(wids)), tuple(notes))
