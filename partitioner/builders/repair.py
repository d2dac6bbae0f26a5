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
* A grid cell split into finer cells keeps its pieces (ids, workers, hash ranges); a piece
  grown past the cap gives up one listed tile that covers the overflow
  (:mod:`partitioner.builders.relieve`); only when no tile can go is the cell split again (its
  largest piece keeps its id).
* A worker over the cap sheds exactly its overflow where it can: from the ends of its hash
  shares, else by moving its cheapest regions or shaving a sliver off a large one; moved
  pieces join a neighbouring share of their cell, or go to the fullest worker they fit
  (best fit), or to a new worker (:mod:`partitioner.builders.plan`).
* New load outside every region (the catch-all) becomes new regions.
* When load has fallen and more than ``target_workers`` workers remain, the
  least-loaded workers are emptied into the others while their partitions fit whole
  (they keep their ids): the load that moves is the least that frees a worker.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.errors import BuildError
from geokernel.geo.graph import group_indices
from geokernel.geo.tiles import IntArray
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec
from partitioner.builders.bisection import carve
from partitioner.builders.carving import carve_cells
from partitioner.builders.fresh import GATHER_SHARE, TERRITORY_LEVELS, fragmented
from partitioner.builders.hot import hash_split, split_hot_cells
from partitioner.builders.nearby import merge_territories, place_nearby
from partitioner.builders.plan import RepairPlan, RepairResult
from partitioner.builders.region import Region
from partitioner.builders.relieve import Leaves, relieve
from partitioner.builders.shave import region_of, shave
from partitioner.load.counts import Counts, Grid
from partitioner.load.loads import spec_loads


class _Survey(NamedTuple):
    """The new load seen through the previous spec."""

    counts: Counts
    grid: Grid
    parts: tuple[Partition, ...]
    spec_index: SpecIndex
    owner: IntArray  # previous partition index of each grid cell; -(g + 1) for hash-split group g


def repair(previous: Spec, counts: Counts, cap: float, target_workers: int, fill: float = 1.0) -> RepairResult | None:
    """Keep the previous spec where it still fits; move only what must move (see the module notes).

    ``cap`` is what workers are packed to, ``max_load x fill``: the notes state loads as shares of ``max_load``
    (:func:`partitioner.builders.shares.of_max_load`). Returns None when the previous spec cannot be repaired (a
    partition lists cells finer than the counts' grid in more than one grid cell).
    """
    grid = counts.grid()
    index = spec_loads(previous).index  # the live spec's, made once while it is live
    finer = finer_groups(index, grid.zoom)
    if finer is None:
        return None
    parts = previous.partitions
    survey = _Survey(counts, grid, parts, index,
                     index.locate_groups_xy(grid.x, grid.y, grid.zoom))
    notes: list[str] = []
    plan = RepairPlan(cap, fill)
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
    plan.shed_overflow(grid, notes)
    spread = fragmented(len(plan.items), len(previous.workers))  # keep the spec small
    if spread:
        near = place_nearby(plan, grid.zoom, GATHER_SHARE * cap)
        if near:
            notes.append(f"{near} new small regions placed next to their neighbours' workers")
    plan.place_unassigned([w.id for w in previous.workers])
    plan.join_slivers(notes)
    plan.consolidate(target_workers, notes)
    if spread:
        fewer = merge_territories(plan, grid.zoom, GATHER_SHARE * cap, TERRITORY_LEVELS)
        if fewer:
            notes.append(f"small regions merged into territories: {fewer} fewer regions")
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


def _finer_cells(survey: _Survey, plan: RepairPlan, cap: float, groups: dict[int, list[int]], notes: list[str]
                 ) -> npt.NDArray[np.bool_]:
    """Keep each grid cell's finer pieces (ids, workers, hash ranges), a piece over the cap less one tile, else split
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
        sub = Leaves(leaves.x[under], leaves.y[under], leaves.z[under], leaves.weight[under])
        loads = survey.spec_index.attribute_tiles(sub.x, sub.y, sub.z, sub.weight)
        if len(at):
            taken[at[0]] = True
        if _keep_pieces(survey, plan, cap, members, loads, sub, notes):
            continue
        first = max(members, key=lambda i: loads[i])
        notes.append(f"cell {grid.quadkey(int(at[0]))!r} split again into finer cells for load {grid.weight[at[0]]:.6g}")
        split = split_hot_cells(survey.counts, grid, cap, only=at)
        regions = sorted(split.regions, key=lambda r: -r.load)
        regions += [r for q in split.liquid for r in hash_split(q.quadkey, q.load, cap)]
        for k, r in enumerate(regions):
            plan.add(r, parts[first].id if k == 0 else "", parts[first].worker if k == 0 else "")
    return taken


def _keep_pieces(survey: _Survey, plan: RepairPlan, cap: float, members: list[int], loads: npt.NDArray[np.float64],
                 leaves: Leaves, notes: list[str]) -> bool:
    """Keep the finer pieces of one grid cell; a piece over the cap gives up one listed tile (a hash share over it
    gives up its overflow later, in :meth:`RepairPlan.shed_overflow`). False, with nothing added, when a piece
    over the cap has no tile it can give up."""
    parts = survey.parts
    over = [i for i in members if loads[i] > cap and parts[i].hash_range is None]
    relief = {i: relieve(survey.spec_index, i, parts[i], leaves, float(loads[i]) - cap, cap) for i in over}
    if any(r is None for r in relief.values()):
        return False
    for i in members:
        rel = relief.get(i)
        if rel is None:
            plan.add(Region(parts[i].quadkeys, float(loads[i]), parts[i].hash_range), parts[i].id, parts[i].worker)
            continue
        plan.add(rel.kept, parts[i].id, parts[i].worker)
        plan.add(rel.given, "", "")
        notes.append(f"partition {parts[i].id!r} at {plan.share(float(loads[i]), 1)} gave up tile "
                     f"{rel.given.quadkeys[0]!r} ({rel.given.load:.6g} load)")
    return True


class _HotCells(NamedTuple):
    """What placing the hot cells did: the grid cells handled, and per previous partition the quadkeys it loses."""

    handled: npt.NDArray[np.bool_]
    drop: dict[int, set[str]]


def _hot_cells(survey: _Survey, plan: RepairPlan, cap: float, notes: list[str], taken: npt.NDArray[np.bool_]
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
        q = grid.quadkey(i)
        notes.append(f"cell {q!r} at {plan.share(float(grid.weight[i]))} split "
                     f"{'by entity hash' if q in hashed else 'into finer cells'}")
        drop.setdefault(int(owner[i]), set()).add(q)
        handled[i] = True
    return _HotCells(handled, drop)


def _trim_shares(members: list[Partition], load: float, cap: float, plan: RepairPlan) -> None:
    """Shares of a hash-split cell grown past the cap keep the start of their hash range (and their id and
    worker); the end they give up becomes new shares of at most the cap, placed like any new region."""
    full = math.floor(HASH_BUCKETS * cap / load)
    if full < 1:
        raise BuildError(f"cell {members[0].quadkeys[0]!r} with load {load!r} would need more than "
                         f"{HASH_BUCKETS} entity-hash shares of the cap {cap!r}")
    for p in members:
        lo, hi = p.hash_range or (0, HASH_BUCKETS)
        kept = min(hi, lo + full)
        plan.add(Region(p.quadkeys, load * (kept - lo) / HASH_BUCKETS, (lo, kept)), p.id, p.worker)
        for a in range(kept, hi, full):
            b = min(hi, a + full)
            plan.add(Region(p.quadkeys, load * (b - a) / HASH_BUCKETS, (a, b)), "", "")


def _previous_regions(survey: _Survey, plan: RepairPlan, cap: float, plain: npt.NDArray[np.bool_],
                      drop: dict[int, set[str]], notes: list[str], skip: set[int]) -> None:
    """Keep every previous region that fits (minus its newly hot cells); re-carve the others.

    ``skip``: partitions placed already (pieces of cells split into finer cells).
    """
    grid, owner = survey.grid, survey.owner
    loads = np.bincount(owner[plain], weights=grid.weight[plain], minlength=len(survey.parts))
    cells_of = group_indices(np.where(plain, owner, len(survey.parts)), len(survey.parts) + 1)
    for i, p in enumerate(survey.parts):
        if p.is_catch_all or p.hash_range is not None or i in skip:
            continue
        cells = cells_of[i]
        if loads[i] <= cap:
            dropped = drop.get(i)
            listed = tuple(q for q in p.quadkeys if q not in dropped) if dropped else p.quadkeys
            if listed:
                plan.add(Region(listed, float(loads[i])), p.id, p.worker, cells)
            continue
        pieces = _recarve(cells, grid, cap)
        notes.append(f"partition {p.id!r} at {plan.share(float(loads[i]))} re-carved into {len(pieces)} pieces")
        for k, piece in enumerate(pieces):
            plan.add(region_of(piece, grid), p.id if k == 0 else "", p.worker if k == 0 else "", piece)


def _recarve(cells: IntArray, grid: Grid, cap: float) -> list[IntArray]:
    """Cut an overloaded region to the cap, moving as little load as possible; largest piece first."""
    shaved = shave(cells, grid, cap)
    if shaved is None:
        pieces = carve(cells, grid, cap)
    else:
        pieces = [shaved.keep]
        for r in shaved.pieces:
            pieces += carve(r, grid, cap)
    return sorted(pieces, key=lambda c: -float(grid.weight[c].sum()))

