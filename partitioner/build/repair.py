"""Sticky repair of a previous spec: keep what still fits, move only what must move (compact strategy, step 6).

Notes
-----
* A region that still fits keeps its id, its listed quadkeys (so contiguity holds where
  load vanished) and its worker.
* A region over the cap is re-carved; its largest piece keeps the id.
* A hot cell split by entity hash keeps its shares while each fits; a share grown past
  the cap keeps the start of its hash range (id and worker too) and gives up the end as
  new shares; a cell newly hotter than the cap is split (into its finer cells when the
  counts have them, else by entity hash) and taken out of its region.
* A grid cell split into finer cells keeps its pieces (ids, workers, hash ranges) while
  every piece fits the new load, else is split again (its largest piece keeps its id).
* A worker over the cap sheds the overflow: the smallest of its regions that covers the
  excess moves if it is small, else a sliver of about the excess is shaved off its
  largest region. Moved pieces go to the fullest worker they fit (best fit), or to a
  new worker.
* New load outside every region (the catch-all) becomes new regions.
* When load has fallen and more than ``target_workers`` workers remain, the
  least-loaded workers are emptied into the others while their partitions fit whole
  (they keep their ids): the load that moves is the least that frees a worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from partitioner.build.bisection import axes, carve
from partitioner.build.carving import carve_cells
from partitioner.build.hot import hash_split, split_hot_cells
from partitioner.build.ids import PARTITION_PREFIX, WORKER_PREFIX, IdAllocator, Ids, fill_blanks
from partitioner.build.region import Placement, Region
from partitioner.counts import Counts, Grid
from partitioner.errors import BuildError
from partitioner.graph import components, group_indices
from partitioner.index import SpecIndex
from partitioner.spec import HASH_BUCKETS, Partition, Spec
from partitioner.tiles import IntArray, arrays_to_quadkeys


@dataclass(frozen=True)
class RepairResult:
    """A repaired placement, the ids of its regions and workers, and what the repair did."""

    placement: Placement
    ids: Ids
    notes: tuple[str, ...]


class _Survey(NamedTuple):
    """The new load seen through the previous spec."""

    counts: Counts
    grid: Grid
    qks: npt.NDArray[np.object_]  # quadkey of each grid cell
    parts: tuple[Partition, ...]
    spec_index: SpecIndex
    owner: IntArray  # previous partition index of each grid cell; -(g + 1) for hash-split group g


def repair(previous: Spec, counts: Counts, cap: float, target_workers: int) -> RepairResult | None:
    """Keep the previous spec where it still fits; move only what must move (see the module notes).

    Returns None when the previous spec cannot be repaired (a partition lists cells finer than
    the counts' grid in more than one grid cell).
    """
    grid = counts.grid()
    index = SpecIndex(previous)
    finer = finer_groups(index, grid.zoom)
    if finer is None:
        return None
    parts = previous.partitions
    survey = _Survey(counts, grid, np.array(arrays_to_quadkeys(grid.x, grid.y, grid.zoom), dtype=object), parts, index,
                     index.locate_groups_xy(grid.x, grid.y, grid.zoom))
    notes: list[str] = []
    plan = _RepairPlan(cap)
    # 0. grid cells the previous spec split into finer cells: kept while every piece fits, else split again
    taken = _finer_cells(survey, plan, cap, finer, notes)
    # 1. hot cells: previous splits keep their shares while they fit; new hot cells are split
    hot = _hot_cells(survey, plan, cap, notes, taken)
    plain = ~hot.handled & (survey.owner >= 0)
    # 2. previous regions
    skip = {i for members in finer.values() for i in members}
    _previous_regions(survey, plan, cap, plain, hot.drop, notes, skip)
    # 3. new load in the catch-all
    new_cells = np.nonzero(plain & (survey.owner == index.catch_all_index) & (grid.weight > 0))[0]
    if len(new_cells):
        fresh = carve_cells(grid.take(new_cells), cap, bridge_levels=0)
        notes.append(f"{float(grid.weight[new_cells].sum()):.6g} load outside the previous regions -> "
                     f"{len(fresh)} new regions")
        for r in fresh:
            plan.add(r, "", "")
    # 4. workers over the cap shed their overflow; everything unplaced is packed best-fit
    plan.shed_overflow(grid, survey.qks, notes)
    plan.place_unassigned([w.id for w in previous.workers])
    plan.consolidate(target_workers, notes)
    return plan.result(previous, notes)


def finer_groups(index: SpecIndex, zoom: int) -> dict[int, list[int]] | None:
    """Partitions that list cells finer than ``zoom``, by the tile code (``x << zoom | y``) of the one cell at
    ``zoom`` they lie in, with any partition listing that cell itself; None if one lies in several cells."""
    lab, x, y, z = index.listed
    deep = np.flatnonzero(z > zoom)
    if len(deep) == 0:
        return {}
    d = z[deep] - zoom
    code = ((x[deep] >> d) << zoom) | (y[deep] >> d)
    pairs = np.unique(np.stack([lab[deep], code], axis=1), axis=0)
    if len(np.unique(pairs[:, 0])) != len(pairs):
        return None
    groups: dict[int, list[int]] = {}
    for i, c in pairs.tolist():
        groups.setdefault(c, []).append(i)
    at_zoom = np.flatnonzero(z == zoom)
    for i, c in zip(lab[at_zoom].tolist(), ((x[at_zoom] << zoom) | y[at_zoom]).tolist(), strict=True):
        if c in groups and i not in groups[c]:
            groups[c].append(i)
    return groups


def _finer_cells(survey: _Survey, plan: _RepairPlan, cap: float, groups: dict[int, list[int]], notes: list[str]
                 ) -> npt.NDArray[np.bool_]:
    """Keep each grid cell's finer pieces (ids, workers, hash ranges) while all fit under the new load, else split
    the cell again (its largest piece keeps its id and worker); return the grid cells handled."""
    grid, parts = survey.grid, survey.parts
    taken = np.zeros(len(grid.x), dtype=bool)
    if not groups:
        return taken
    codes = (grid.x << grid.zoom) | grid.y
    leaves = survey.counts.leaves()
    d = np.maximum(leaves.z - grid.zoom, 0)
    leaf_cell = ((leaves.x >> d) << grid.zoom) | (leaves.y >> d)
    for code, members in groups.items():
        at = np.flatnonzero(codes == code)
        under = leaf_cell == code
        loads = survey.spec_index.attribute_tiles(leaves.x[under], leaves.y[under], leaves.z[under],
                                                  leaves.weight[under])
        if len(at):
            taken[at[0]] = True
        if all(loads[i] <= cap for i in members):
            for i in members:
                plan.add(Region(parts[i].quadkeys, float(loads[i]), parts[i].hash_range), parts[i].id, parts[i].worker)
            continue
        first = max(members, key=lambda i: loads[i])
        notes.append(f"cell {survey.qks[at[0]]!r} split again into finer cells for load {grid.weight[at[0]]:.6g}")
        split = split_hot_cells(survey.counts, grid, cap, only=at)
        regions = sorted(split.regions, key=lambda r: -r.load)
        regions += [r for q in split.liquid for r in hash_split(q.quadkey, q.load, cap)]
        for k, r in enumerate(regions):
            plan.add(r, parts[first].id if k == 0 else "", parts[first].worker if k == 0 else "")
    return taken


class _HotCells(NamedTuple):
    """What placing the hot cells did: the grid cells handled, and per previous partition the quadkeys it loses."""

    handled: npt.NDArray[np.bool_]
    drop: dict[int, set[str]]


def _hot_cells(survey: _Survey, plan: _RepairPlan, cap: float, notes: list[str], taken: npt.NDArray[np.bool_]
               ) -> _HotCells:
    """Place the hot cells: previous hash splits keep their shares while they fit; new hot cells are split.

    ``taken``: grid cells handled already (split into finer cells before); they count as handled.
    """
    grid, owner, parts = survey.grid, survey.owner, survey.parts
    handled = taken.copy()
    for cell in np.nonzero((owner < 0) & ~taken)[0]:
        members = [parts[int(i)] for i in survey.spec_index.group_members(int(-owner[cell] - 1))]
        load = float(grid.weight[cell])
        if all(load * p.share <= cap for p in members):
            for p in members:
                plan.add(Region(p.quadkeys, load * p.share, p.hash_range), p.id, p.worker)
        else:
            notes.append(f"hot cell {members[0].quadkeys[0]!r} re-split for load {load:.6g}")
            _trim_shares(members, load, cap, plan)
        handled[cell] = True
    drop: dict[int, set[str]] = {}
    new_hot = np.nonzero((grid.weight > cap) & ~handled)[0]
    if len(new_hot) == 0:
        return _HotCells(handled, drop)
    split = split_hot_cells(survey.counts, grid, cap, only=new_hot)  # finer cells where the counts have them
    for r in split.regions:
        plan.add(r, "", "")
    for liquid in split.liquid:
        for r in hash_split(liquid.quadkey, liquid.load, cap):
            plan.add(r, "", "")
    hashed = {h.quadkey for h in split.liquid}
    for i in new_hot.tolist():
        q = str(survey.qks[i])
        notes.append(f"cell {q!r} at {grid.weight[i] / cap:.0%} of max_load split "
                     f"{'by entity hash' if q in hashed else 'into finer cells'}")
        drop.setdefault(int(owner[i]), set()).add(q)
        handled[i] = True
    return _HotCells(handled, drop)


def _trim_shares(members: list[Partition], load: float, cap: float, plan: _RepairPlan) -> None:
    """Shares of a hash-split cell grown past the cap keep the start of their hash range (and their id and
    worker); the end they give up becomes new shares of at most the cap, placed like any new region."""
    full = math.floor(HASH_BUCKETS * cap / load)
    if full < 1:
        raise BuildError(f"cell {members[0].quadkeys[0]!r} with load {load!r} would need more than "
                         f"{HASH_BUCKETS} entity-hash shares of max_load {cap!r}")
    for p in members:
        lo, hi = p.hash_range or (0, HASH_BUCKETS)
        kept = min(hi, lo + full)
        plan.add(Region(p.quadkeys, load * (kept - lo) / HASH_BUCKETS, (lo, kept)), p.id, p.worker)
        for a in range(kept, hi, full):
            b = min(hi, a + full)
            plan.add(Region(p.quadkeys, load * (b - a) / HASH_BUCKETS, (a, b)), "", "")


def _previous_regions(survey: _Survey, plan: _RepairPlan, cap: float, plain: npt.NDArray[np.bool_],
                      drop: dict[int, set[str]], notes: list[str], skip: set[int]) -> None:
    """Keep every previous region that fits (minus its newly hot cells); re-carve the others.

    ``skip``: partitions placed already (pieces of cells split into finer cells).
    """
    grid, owner, qks = survey.grid, survey.owner, survey.qks
    loads = np.bincount(owner[plain], weights=grid.weight[plain], minlength=len(survey.parts))
    cells_of = group_indices(np.where(plain, owner, len(survey.parts)), len(survey.parts) + 1)
    for i, p in enumerate(survey.parts):
        if i == survey.spec_index.catch_all_index or p.hash_range is not None or i in skip:
            continue
        cells = cells_of[i]
        if loads[i] <= cap:
            dropped = drop.get(i)
            listed = tuple(q for q in p.quadkeys if q not in dropped) if dropped else p.quadkeys
            if listed:
                plan.add(Region(listed, float(loads[i])), p.id, p.worker, cells)
            continue
        pieces = _recarve(cells, grid, cap)
        notes.append(f"partition {p.id!r} at {loads[i] / cap:.0%} of max_load re-carved into {len(pieces)} pieces")
        for k, piece in enumerate(pieces):
            plan.add(_region_of(piece, grid, qks), p.id if k == 0 else "", p.worker if k == 0 else "", piece)


def _region_of(cells: IntArray, grid: Grid, qks: npt.NDArray[np.object_]) -> Region:
    """The region listing ``cells`` (grid cells, by index) with their load."""
    return Region(tuple(sorted(qks[cells])), float(grid.weight[cells].sum()))


def _recarve(cells: IntArray, grid: Grid, cap: float) -> list[IntArray]:
    """Cut an overloaded region to the cap, moving as little load as possible; largest piece first."""
    shaved = _shave(cells, grid, cap)
    if shaved is None:
        pieces = carve(cells, grid, cap)
    else:
        pieces = [shaved.keep]
        for r in shaved.pieces:
            pieces += carve(r, grid, cap)
    return sorted(pieces, key=lambda c: -float(grid.weight[c].sum()))


class _Shaved(NamedTuple):
    """A region cut to size: the piece it keeps and the connected pieces shaved off."""

    keep: IntArray
    pieces: list[IntArray]


class _Side(NamedTuple):
    """One way to shave a region: from one side, the load it moves, the cells kept and the cells shaved."""

    moved: float
    keep: IntArray
    shaved: IntArray


def _shave(cells: IntArray, grid: Grid, keep_load: float) -> _Shaved | None:
    """Cut a region's cells so the piece kept is at most ``keep_load``; return it and the shaved pieces.

    Returns None when no cut keeps a non-empty piece within ``keep_load``.
    """
    u, v = axes(grid.x[cells], grid.y[cells], grid.zoom)
    w = grid.weight[cells]
    # shave from the side whose edge cells add up to the excess: try all four sides, keep the cheapest
    best: _Side | None = None
    sides = [seq for order in (np.lexsort((v, u)), np.lexsort((u, v))) for seq in (order, order[::-1])]
    for seq in sides:
        csum = np.cumsum(w[seq])
        cut = min(int(np.searchsorted(csum, keep_load * (1 + 1e-12), side="right")), len(cells) - 1)
        if cut < 1:
            continue
        keep, shaved = cells[seq[:cut]], cells[seq[cut:]]
        n, labels = components(grid.x[keep], grid.y[keep], grid.zoom)
        if n > 1:
            groups = group_indices(labels, n)
            big = max(groups, key=lambda g: float(grid.weight[keep[g]].sum()))
            shaved = np.concatenate([shaved, np.setdiff1d(keep, keep[big])])
            keep = keep[big]
        side = _Side(float(grid.weight[shaved].sum()), keep, shaved)
        if best is None or side.moved < best.moved:
            best = side
    if best is None:
        return None
    n, labels = components(grid.x[best.shaved], grid.y[best.shaved], grid.zoom)
    return _Shaved(best.keep, [best.shaved[g] for g in group_indices(labels, n)])


class _Item(NamedTuple):
    """One region of the plan."""

    region: Region
    pid: str  # partition id ("" until one is allocated)
    worker: str  # worker id ("" while unplaced)
    cells: IntArray | None  # its grid cells, where known (a shave needs them)


class _RepairPlan:
    """Mutable working state of one repair (internal; the result is immutable regions and ids)."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.items: list[_Item] = []

    def add(self, region: Region, pid: str, worker: str, cells: IntArray | None = None) -> None:
        self.items.append(_Item(region, pid, worker, cells))

    def load(self, i: int) -> float:
        return self.items[i].region.load

    def move(self, i: int, worker: str) -> None:
        self.items[i] = self.items[i]._replace(worker=worker)

    def worker_loads(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for it in self.items:
            if it.worker:
                out[it.worker] = out.get(it.worker, 0.0) + it.region.load
        return out

    def shed_overflow(self, grid: Grid, qks: npt.NDArray[np.object_], notes: list[str]) -> None:
        """Bring every worker back under the cap: move its smallest covering regions, or shave its largest."""
        for w, load in sorted(self.worker_loads().items()):
            excess = load - self.cap
            if excess <= self.cap * 1e-12:
                continue
            mine = [i for i, it in enumerate(self.items) if it.worker == w]
            moves = self._moves_covering(mine, excess)
            largest = max(mine, key=self.load)
            shaved = self._shave_instead(largest, excess, sum(self.load(i) for i in moves), grid)
            if shaved is None:
                for i in moves:
                    self.move(i, "")
                continue
            it = self.items[largest]
            self.items[largest] = it._replace(region=_region_of(shaved.keep, grid, qks), cells=shaved.keep)
            for piece in shaved.pieces:
                self.add(_region_of(piece, grid, qks), "", "", piece)
            notes.append(f"worker {w!r} at {load / self.cap:.1%}: shaved "
                         f"{float(grid.weight[np.concatenate(shaved.pieces)].sum()):.6g} off partition {it.pid!r}")

    def _shave_instead(self, i: int, excess: float, move_cost: float, grid: Grid) -> _Shaved | None:
        """A shave of ``excess`` off region ``i`` when that moves less load than ``move_cost``, else None."""
        it = self.items[i]
        if not (move_cost > 1.05 * excess and it.cells is not None and len(it.cells) > 1
                and it.region.hash_range is None):
            return None
        shaved = _shave(it.cells, grid, it.region.load - excess)
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
        wl = self.worker_loads()
        new_worker = IdAllocator(WORKER_PREFIX, [*previous_workers, *wl])
        for i in sorted((i for i, it in enumerate(self.items) if not it.worker), key=lambda i: -self.load(i)):
            need = self.load(i)
            fits = [(self.cap - used, w) for w, used in wl.items() if used + need <= self.cap * (1 + 1e-12)]
            w = min(fits)[1] if fits else new_worker()
            self.move(i, w)
            wl[w] = wl.get(w, 0.0) + need

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
