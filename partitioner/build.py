"""Build a partition spec from load per quadkey.

Two strategies:

``compact`` (default)
    1. **Hot cells** (load > ``max_load``) are split first: into their finer
       cells when the counts carry refinement rows (recursively), else across
       several workers by entity hash (full shares of exactly ``max_load`` plus
       one remainder share that packs with other work).
    2. The other cells are grouped into **8-connected components**. A component
       within ``max_load`` is one region as it is (sparse data: each isolated
       cluster stays whole and compact).
    3. A component above ``max_load`` is **carved** by recursive bisection: cells
       are ordered along an axis and cut where one side holds ``j`` full workers
       of load (``j = ceil(L / max_load) // 2``). The exact cut is a staircase
       across the longer axis (straight except for one step), so pieces are
       square-ish; a cut with a load *window* may leave up to that much slack to
       pass where the fewest loaded neighbours are separated (either axis).
       Each side's connected components are carved again until every region fits.
       Each component gets the window whose cuts put the least load on a
       boundary, as far as all regions still pack onto the lower bound + 1
       workers; where the packing cannot afford that, the loose windows go to
       the components where they save the most (:class:`CutBudget`).
    4. Regions take the empty cells in their notches and holes and list their
       cells as quadtree squares (:mod:`partitioner.shape`).
    5. Regions are **packed onto workers** by best-fit decreasing, so cold
       regions share workers and the worker count approaches
       ``ceil(total / max_load)``.
    6. With a ``previous`` spec, the build first tries a **sticky repair** (keep
       every partition and worker that still fits, re-carve only overloaded
       partitions, attach new load to neighbours with room, move whole partitions
       off overloaded workers, empty the least-loaded workers when load falls)
       and keeps it unless it needs more workers than the fresh build and the
       lower bound + 1; otherwise the fresh build is used with ids matched to
       the previous spec by shared load.

``seed``
    The seed algorithm (shared/seeds/000), implemented faithfully as the
    baseline: seed from the hottest unassigned quadkey, grow by 8-neighbour
    adjacency ranking candidates by shared edges then load, cap at ``max_load``,
    one worker per partition, hot quadkeys unsplittable.

Notes
-----
Every spec covers the whole world: a catch-all partition lists the root quadkey
``""`` and owns every place no region lists (a new hotspot with no history has a
home). The catch-all is hosted by the least-loaded worker.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from partitioner.counts import Counts, Grid, counts_from_pairs
from partitioner.errors import BuildError
from partitioner.graph import components, components_of_pairs, group_indices, neighbour_pairs, sub_pairs
from partitioner.index import SpecIndex
from partitioner.shape import coalesce, fill_gaps, is_member, unique_pairs
from partitioner.spec import HASH_BUCKETS, Partition, Spec, Worker, check, shard_hash_key, validate
from partitioner.tiles import IntArray, arrays_to_quadkeys, neighbors, quadkey, quadkey_to_tile, quadkeys_to_arrays

STRATEGIES = ("compact", "seed")


@dataclass(frozen=True)
class Region:
    """A piece of work: grid cells (or one hash share of a hot cell) with its load."""

    quadkeys: tuple[str, ...]
    load: float
    hash_range: tuple[int, int] | None = None


@dataclass(frozen=True)
class BuildReport:
    """What a build did, beside the spec itself."""

    spec: Spec
    strategy: str
    lower_bound: int
    hot_cells: int
    hash_split_cells: int
    mode: str  # "fresh", "fresh+matched" or "repair"
    notes: tuple[str, ...] = field(default_factory=tuple)
    problems: tuple[str, ...] = field(default_factory=tuple)


def lower_bound(total: float, max_load: float) -> int:
    """Return the physical lower bound on workers: ``ceil(total / max_load)`` (at least 1)."""
    return max(1, math.ceil(total / max_load - 1e-9))


def build_spec(counts: Counts, max_load: float, *, previous: Spec | None = None, strategy: str = "compact",
               version: int | None = None, created_at: str | None = None, stream_name: str | None = None,
               fill: float = 1.0) -> Spec:
    """Build a validated spec; see :func:`build_with_report`."""
    return build_with_report(counts, max_load, previous=previous, strategy=strategy, version=version,
                             created_at=created_at, stream_name=stream_name, fill=fill).spec


def build_with_report(counts: Counts, max_load: float, *, previous: Spec | None = None,
                      strategy: str = "compact", version: int | None = None, created_at: str | None = None,
                      stream_name: str | None = None, fill: float = 1.0) -> BuildReport:
    """Build a spec from ``counts`` under ``max_load`` and say how.

    Parameters
    ----------
    counts : Counts
        Load per quadkey (a rolled-up quadtree is fine, see :mod:`partitioner.counts`).
    max_load : float
        Cap on each worker's load (> 0).
    previous : Spec, optional
        The live spec: ids are kept sticky to it (compact strategy).
    strategy : {"compact", "seed"}
    version : int, optional
        Defaults to ``previous.version + 1`` or 1.
    fill : float
        Target utilisation in (0, 1] that regions and workers are packed to; the spec's
        ``max_load`` stays the hard cap. Operations build below 1 (the rebalance
        policy's ``target_fill``) so that routine growth does not trigger the next
        redeploy at once; the benchmarks build at 1.

    Returns
    -------
    BuildReport
        ``spec`` is validated with :func:`partitioner.spec.check` for ``compact``;
        the ``seed`` baseline may break caps (that is its weakness) and lists the
        broken rules in ``problems`` instead of raising.

    Raises
    ------
    BuildError
        On a bad ``max_load``, an unknown strategy or empty counts.
    """
    if isinstance(max_load, bool) or not isinstance(max_load, (int, float)) or not (
            math.isfinite(max_load) and max_load > 0):
        raise BuildError(f"max_load must be a positive finite number, got {max_load!r}")
    if strategy not in STRATEGIES:
        raise BuildError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if len(counts) == 0:
        raise BuildError(f"{counts.source}: no load to partition")
    if isinstance(fill, bool) or not isinstance(fill, (int, float)) or not 0 < fill <= 1:
        raise BuildError(f"fill must be a number in (0, 1], got {fill!r}")
    hard_cap = float(max_load)
    cap = hard_cap * float(fill)
    if version is None:
        version = previous.version + 1 if previous is not None else 1
    prev_version = previous.version if previous is not None and previous.version < version else None
    stamp = created_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    grid = counts.grid()
    total = float(grid.weight.sum())
    lb = lower_bound(total, cap)
    source = {"counts": counts.source, "grid_zoom": grid.zoom, "total_load": total,
              "lower_bound": lower_bound(total, hard_cap), "fill": float(fill)}

    if strategy == "seed":
        regions = seed_regions(counts, cap)
        workers_of = list(range(len(regions)))
        spec = _assemble(regions, workers_of, hard_cap, version=version, previous_version=prev_version, created_at=stamp,
                         strategy="seed", stream_name=stream_name, source=source)
        hot = int(np.count_nonzero(grid.weight > cap))
        return BuildReport(spec, "seed", lb, hot, 0, "fresh", problems=tuple(validate(spec)))

    hot_regions, hot_count, hashed = _split_hot_cells(counts, grid, cap)
    cold = (grid.weight <= cap) & (grid.weight > 0)
    hot_codes = (grid.x[grid.weight > cap] << grid.zoom) | grid.y[grid.weight > cap]
    regions, workers_of = _fresh_regions(grid.x[cold], grid.y[cold], grid.weight[cold], grid.zoom, cap, hot_regions,
                                         total, lb, hot_codes)
    notes: list[str] = []
    mode = "fresh"
    if previous is not None:
        repaired = _repair(previous, counts, cap, lb + 1)
        fresh_workers = max(workers_of) + 1 if workers_of else 0
        if repaired is not None:
            r_regions, r_workers, r_ids, r_wids, r_notes = repaired
            n_rep = len(set(r_workers))
            if n_rep <= max(fresh_workers, lb + 1) + 1:
                spec = _assemble(r_regions, r_workers, hard_cap, version=version, previous_version=prev_version,
                                 created_at=stamp, strategy="compact", stream_name=stream_name, source=source,
                                 ids=r_ids, worker_ids=r_wids)
                return BuildReport(check(spec), "compact", lb, hot_count, hashed, "repair", tuple(r_notes))
            notes.append(f"repair needed {n_rep} workers vs {fresh_workers} fresh (lower bound {lb}): rebuilt")
        ids, wids = _match_ids(previous, regions, workers_of, grid.zoom)
        spec = _assemble(regions, workers_of, hard_cap, version=version, previous_version=prev_version, created_at=stamp,
                         strategy="compact", stream_name=stream_name, source=source, ids=ids, worker_ids=wids)
        mode = "fresh+matched"
    else:
        spec = _assemble(regions, workers_of, hard_cap, version=version, previous_version=prev_version, created_at=stamp,
                         strategy="compact", stream_name=stream_name, source=source)
    return BuildReport(check(spec), "compact", lb, hot_count, hashed, mode, tuple(notes))


def _fresh_regions(x: IntArray, y: IntArray, w: np.ndarray, zoom: int, cap: float, hot_regions: list[Region],
                   total: float, lb: int, hot_codes: IntArray) -> tuple[list[Region], list[int]]:
    """Carve and pack from scratch, within the lower bound + 1 workers and with the least cut boundary load.

    Two carves are made: one at a slightly lower cap (half the average slack that
    ``lower_bound + 1`` workers leave, so that routine load noise does not push a
    worker over the cap right after a deploy) and one at the real cap, whose
    exact cuts leave more slack to the loose ones. Both are packed at the real
    cap and levelled; the one with fewer workers (counting any number up to the
    target as equal), then the lower boundary load of its cuts, is kept (the
    headroom one on a tie).
    """
    slack = ((lb + 1) * cap - total) / (lb + 1)
    margin = min(0.05 * cap, max(0.0, 0.5 * slack))
    # cut windows: any slack, 20 %, 10 % and 5 % of a worker, one spare worker spread over the cuts (exact is implied)
    spare = max(0.0, (lb + 1) * cap - total)
    budget = CutBudget(windows=(math.inf, 0.2 * cap, 0.1 * cap, 0.05 * cap, spare / max(lb, 1)), workers=lb + 1,
                       pack_cap=cap, other_loads=tuple(r.load for r in hot_regions))
    best: tuple[int, float, _Labels, list[int]] | None = None
    for carve_cap in (cap - margin, cap) if margin > 0 else (cap,):
        carved = _region_labels(x, y, w, zoom, carve_cap, BRIDGE_LEVELS, 0.0, budget)
        loads = [*budget.other_loads, *np.bincount(carved.labels, weights=w, minlength=carved.n_regions).tolist()]
        workers_of = level_workers(loads, pack_best_fit(loads, cap), cap)
        # fewest workers (any count up to the target counts as equal), then least boundary load
        rank = (max(max(workers_of, default=0) + 1, lb + 1), carved.cut_load)
        if best is None or rank < best[:2]:
            best = (*rank, carved, workers_of)
        if rank[0] == lb + 1 and carved.cut_load <= carved.cut_floor:  # fits, every cut its cheapest way
            break
    assert best is not None
    chosen = best[2]
    regions = _label_regions(x, y, w, zoom, chosen.labels, chosen.coarse, chosen.n_regions, bridge_levels=BRIDGE_LEVELS,
                             fill=True, blocked=hot_codes)
    return hot_regions + regions, best[3]


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


# ---------------------------------------------------------------------------
# Hot cells
# ---------------------------------------------------------------------------


def _split_hot_cells(counts: Counts, grid_cells: Grid, cap: float) -> tuple[list[Region], int, int]:
    hot = np.nonzero(grid_cells.weight > cap)[0]
    if len(hot) == 0:
        return [], 0, 0
    refinement = counts.refinement()
    qks = arrays_to_quadkeys(grid_cells.x[hot], grid_cells.y[hot], grid_cells.zoom)
    regions: list[Region] = []
    hashed = 0
    for q, load in zip(qks, grid_cells.weight[hot], strict=True):
        pieces = _split_one(q, float(load), refinement, cap)
        hashed += sum(1 for p in pieces if p.hash_range is not None and p.hash_range[0] == 0)
        regions += pieces
    return regions, len(hot), hashed


def _split_one(qk: str, load: float, refinement: dict[str, float], cap: float) -> list[Region]:
    """Split one hot cell: by its finer rows when present, else by entity hash."""
    children = {q: w for q, w in refinement.items() if q.startswith(qk) and len(q) > len(qk)}
    if children:
        sub = counts_from_pairs(sorted(children.items()), source=f"refinement of {qk!r}")
        grid = sub.grid()
        scale = load / float(grid.weight.sum()) if grid.weight.sum() > 0 else 0.0
        if scale > 0:
            weights = grid.weight * scale
            hot = weights > cap
            out: list[Region] = []
            if hot.any():
                deeper = {q: w * scale for q, w in sub.refinement().items()}
                hot_qks = arrays_to_quadkeys(grid.x[hot], grid.y[hot], grid.zoom)
                for hq, hl in zip(hot_qks, weights[hot], strict=True):
                    out += _split_one(hq, float(hl), deeper, cap)
            cold = ~hot & (weights > 0)
            out += carve_cells(grid.x[cold], grid.y[cold], weights[cold], grid.zoom, cap, bridge_levels=0)
            # the parts of the hot cell with no finer rows still belong to it: list it so it has an owner
            if out:
                biggest = max(range(len(out)), key=lambda i: out[i].load if out[i].hash_range is None else -1.0)
                if out[biggest].hash_range is None:
                    r = out[biggest]
                    out[biggest] = Region((qk, *r.quadkeys), r.load)
                else:
                    out.append(Region((qk,), 0.0))
            return out
    return hash_split(qk, load, cap)


def hash_split(qk: str, load: float, cap: float) -> list[Region]:
    """Split a cell across workers by entity hash: full shares of ``cap`` and one remainder share.

    Notes
    -----
    Shares are whole entity buckets (``HASH_BUCKETS`` = 65536), so a share's load
    is ``load * width / HASH_BUCKETS``; full shares are rounded down to stay
    within ``cap``, and the remainder is checked too (one more share if needed).
    """
    full_width = math.floor(HASH_BUCKETS * cap / load)
    if full_width < 1:
        raise BuildError(f"cell {qk!r} with load {load!r} would need more than {HASH_BUCKETS} entity-hash shares "
                         f"of max_load {cap!r}")
    k = int(load // cap)
    while True:
        rest = HASH_BUCKETS - k * full_width
        if rest <= 0 or load * rest / HASH_BUCKETS <= cap:
            break
        k += 1
    widths = [full_width] * k + ([rest] if rest > 0 else [])
    if rest < 0:
        widths[-1] += rest
    out: list[Region] = []
    lo = 0
    for w in widths:
        out.append(Region((qk,), load * w / HASH_BUCKETS, (lo, lo + w)))
        lo += w
    return out


# ---------------------------------------------------------------------------
# Carving components into compact regions
# ---------------------------------------------------------------------------


BRIDGE_LEVELS = 3  # cells within the same or adjacent 8x8 block of grid cells may share a region


@dataclass(frozen=True)
class CutBudget:
    """Room the packing leaves for loose cuts: :func:`carve_cells` then picks a window per component.

    Attributes
    ----------
    windows : tuple of float
        Cut windows to choose from (see :func:`_cut_at`); 0 (exact cuts) is always
        among the choices.
    workers : int
        Workers the regions must pack onto (best-fit decreasing at ``pack_cap``).
    pack_cap : float
        Worker capacity for that packing.
    other_loads : tuple of float
        Loads of regions made elsewhere (hot-cell shares) that pack with these.
    """

    windows: tuple[float, ...]
    workers: int
    pack_cap: float
    other_loads: tuple[float, ...] = ()


def carve_cells(x: IntArray, y: IntArray, w: np.ndarray, zoom: int, cap: float, *,
                bridge_levels: int = BRIDGE_LEVELS, fill: bool = False,
                blocked: IntArray | None = None, window: float = 0.0,
                budget: CutBudget | None = None) -> list[Region]:
    """Group cells into 8-connected regions of at most ``cap`` load (compact strategy, steps 2-3).

    Parameters
    ----------
    x, y, w : arrays
        Loaded cells at ``zoom`` (unique) and their load, each within ``cap``.
    fill : bool
        Let regions take the empty cells in their notches and holes
        (:func:`partitioner.shape.fill_gaps`). Only for a build of the whole grid: the
        cells passed must be every loaded cell but ``blocked``.
    blocked : IntArray, optional
        Codes ``x << zoom | y`` of loaded cells handled elsewhere (hot cells), which
        filling must leave alone.
    window : float
        Load that a cut may leave short of an exact multiple of ``cap`` to pass
        through thinner columns (0: exact cuts; see :func:`_cut_at`).
    budget : CutBudget, optional
        Instead of one ``window`` for all, pick a window per component: the loosest
        cuts go where they save the most boundary load, as long as all regions
        still pack onto ``budget.workers`` (see :func:`_choose_cuts`).

    Notes
    -----
    Nearby clusters are bridged first: grid cells are lifted ``bridge_levels`` zooms
    up, and a cluster of 8-connected coarse cells whose load fits is one region that
    lists those coarse cells (the empty tiles between its clusters included, so it
    is contiguous). Clusters that do not fit fall back to 8-connected components of
    the grid cells, carved when above ``cap``. A region's cells are listed as the
    fewest quadtree squares (four siblings of one region become their parent).
    Vectorised: Python work is per region, not per cell.
    """
    labels, coarse, n, _, _ = _region_labels(x, y, w, zoom, cap, bridge_levels, window, budget)
    return _label_regions(x, y, w, zoom, labels, coarse, n, bridge_levels=bridge_levels, fill=fill, blocked=blocked)


def _label_regions(x: IntArray, y: IntArray, w: np.ndarray, zoom: int, labels: IntArray, coarse: np.ndarray, n: int,
                   *, bridge_levels: int, fill: bool, blocked: IntArray | None) -> list[Region]:
    """The regions of :func:`_region_labels`' labels: gaps filled, cells listed as quadtree squares."""
    if n == 0:
        return []
    is_coarse = coarse[labels]
    b = bridge_levels
    c_lab, c_code = unique_pairs(labels[is_coarse], ((x[is_coarse] >> b) << (zoom - b)) | (y[is_coarse] >> b))
    cx = np.stack([c_lab, c_code >> (zoom - b), c_code & ((1 << (zoom - b)) - 1)], axis=1)
    fx, fy, fl = x[~is_coarse], y[~is_coarse], labels[~is_coarse]
    if fill and len(fx):
        gx, gy, gl = fill_gaps(fx, fy, fl, zoom, blocked=_blocked_cells(cx[:, 1:], zoom - b, b, blocked, zoom))
        fx, fy, fl = np.concatenate([fx, gx]), np.concatenate([fy, gy]), np.concatenate([fl, gl])
    sx, sy, sz, sl = coalesce(fx, fy, zoom, fl)
    lx = np.concatenate([cx[:, 1], sx])
    ly = np.concatenate([cx[:, 2], sy])
    lz = np.concatenate([np.full(len(cx), zoom - b, dtype=np.int64), sz])
    lab = np.concatenate([cx[:, 0], sl])
    order = np.lexsort((ly, lx, lz, lab))
    qks = np.array(arrays_to_quadkeys(lx[order], ly[order], lz[order]), dtype=object)
    bounds = np.searchsorted(lab[order], np.arange(n + 1))
    loads = np.bincount(labels, weights=w, minlength=n)
    return [Region(tuple(qks[bounds[r]:bounds[r + 1]]), float(loads[r])) for r in range(n)]


def _blocked_cells(coarse_xy: IntArray, coarse_zoom: int, levels: int, blocked: IntArray | None, zoom: int
                   ) -> Callable[[IntArray, IntArray], npt.NDArray[np.bool_]]:
    """``(x, y) -> mask`` of cells inside a listed coarse cell or among the ``blocked`` codes."""
    coarse_codes = np.sort((coarse_xy[:, 0] << coarse_zoom) | coarse_xy[:, 1])
    blocked_codes = np.sort(blocked) if blocked is not None else None

    def is_blocked(bx: IntArray, by: IntArray) -> npt.NDArray[np.bool_]:
        return is_member(((bx >> levels) << coarse_zoom) | (by >> levels), coarse_codes) | is_member(
            (bx << zoom) | by, blocked_codes)

    return is_blocked


class _Labels(NamedTuple):
    """What :func:`_region_labels` returns."""

    labels: IntArray  # region per cell
    coarse: np.ndarray  # per region: it lists coarse (bridged) cells
    n_regions: int
    cut_load: float  # boundary load of the cuts (with a budget; else 0)
    cut_floor: float  # the least cut_load any choice of windows could reach (with a budget; else 0)


def _region_labels(x: IntArray, y: IntArray, w: np.ndarray, zoom: int, cap: float, bridge_levels: int,
                   window: float, budget: CutBudget | None) -> _Labels:
    """Label every cell with its region (bridged cluster, small component or carved piece)."""
    if len(x) == 0:
        return _Labels(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), 0, 0.0, 0.0)
    labels = np.full(len(x), -1, dtype=np.int64)
    coarse: list[np.ndarray] = []
    n_labels = 0
    cut_load = cut_floor = 0.0
    rest = np.arange(len(x))
    if bridge_levels > 0 and zoom - bridge_levels >= 2:
        cz = zoom - bridge_levels
        codes = ((x >> bridge_levels) << cz) | (y >> bridge_levels)
        uniq, inv = np.unique(codes, return_inverse=True)
        n_clusters, cluster_of_coarse = components(uniq >> cz, uniq & ((1 << cz) - 1), cz)
        cluster = cluster_of_coarse[inv]
        fits = np.bincount(cluster, weights=w, minlength=n_clusters) <= cap
        remap = np.full(n_clusters, -1, dtype=np.int64)
        ok = np.nonzero(fits)[0]
        remap[ok] = np.arange(len(ok))
        in_fit = fits[cluster]
        labels[in_fit] = remap[cluster[in_fit]]
        n_labels = len(ok)
        coarse.append(np.ones(len(ok), dtype=bool))
        rest = np.nonzero(~in_fit)[0]
    if len(rest):
        n, lab = components(x[rest], y[rest], zoom)
        comp_load = np.bincount(lab, weights=w[rest], minlength=n)
        small = comp_load <= cap
        remap = np.full(n, -1, dtype=np.int64)
        sm = np.nonzero(small)[0]
        remap[sm] = n_labels + np.arange(len(sm))
        sel = small[lab]
        labels[rest[sel]] = remap[lab[sel]]
        n_labels += len(sm)
        coarse.append(np.zeros(len(sm), dtype=bool))
        big = rest[~sel]
        if len(big):
            groups = group_indices(lab[~sel], n)
            comps = [big[groups[comp]] for comp in np.nonzero(~small)[0]]
            if budget is None:
                carved = [_carve(c, x, y, w, zoom, cap, window=window) for c in comps]
            else:
                placed = np.bincount(labels[labels >= 0], weights=w[labels >= 0], minlength=n_labels)
                carved, cut_load, cut_floor = _choose_cuts(comps, x, y, w, zoom, cap, budget,
                                                           [*budget.other_loads, *placed.tolist()])
            for pieces in carved:
                for piece in pieces:
                    labels[piece] = n_labels
                    n_labels += 1
                    coarse.append(np.zeros(1, dtype=bool))
    return _Labels(labels, np.concatenate(coarse) if coarse else np.zeros(0, dtype=bool), n_labels, cut_load,
                   cut_floor)


REFINE_COMPONENTS = 64  # components _choose_cuts revisits one by one after its level-wise pass


def _choose_cuts(comps: list[IntArray], x: IntArray, y: IntArray, w: np.ndarray, zoom: int, cap: float,
                 budget: CutBudget, placed: list[float]) -> tuple[list[list[IntArray]], float, float]:
    """Carve each component with the window that saves the most boundary load the packing can afford.

    Returns the pieces of each component, the boundary load of all the cuts, and the
    least it could be (every component cut its cheapest way).

    Notes
    -----
    Each component is first carved with the widest window and with exact cuts; if
    the cheaper of the two for every component packs within ``budget.workers``,
    that is the answer (and the floor). Otherwise every window is carved, and,
    starting from exact cuts everywhere, windows are taken widest first; at each, the components whose
    boundary load (:func:`_cut_load`) that window lowers the most are switched to
    it, as many as the packing of all regions (``placed`` + the pieces) still fits
    on ``budget.workers`` (a binary search over the components sorted by saving).
    Last, the ``REFINE_COMPONENTS`` components with the most left to gain each
    take their cheapest option that still fits. If exact cuts already need more
    workers, that count is the budget instead.
    """
    windows = sorted({*budget.windows, 0.0}, reverse=True)
    exact = len(windows) - 1
    comp_pairs = [neighbour_pairs(x[c], y[c], zoom) for c in comps]
    comp_order = [np.argsort(c, kind="stable") for c in comps]
    options: list[list[list[IntArray]]] = [[[] for _ in windows] for _ in comps]
    cost = [[math.inf] * len(windows) for _ in comps]
    piece_loads: list[list[list[float]]] = [[[] for _ in windows] for _ in comps]

    def carve_with(levels: Sequence[int]) -> None:
        for c, cells in enumerate(comps):
            for k in levels:
                pieces = _carve(cells, x, y, w, zoom, cap, window=windows[k], pairs=comp_pairs[c])
                options[c][k] = pieces
                cost[c][k] = _cut_load(cells, comp_order[c], pieces, w, comp_pairs[c])
                piece_loads[c][k] = [float(w[p].sum()) for p in pieces]

    def workers(ch: list[int]) -> int:
        loads = placed + [ld for c, k in enumerate(ch) for ld in piece_loads[c][k]]
        return max(pack_best_fit(loads, budget.pack_cap), default=-1) + 1

    def cheapest() -> list[int]:
        """The cheapest option carved so far per component; on a tie the narrower window (it packs tighter)."""
        return [min(range(len(windows)), key=lambda k: (costs[k], -k)) for costs in cost]

    def result(ch: list[int], floor: list[int]) -> tuple[list[list[IntArray]], float, float]:
        return ([options[c][k] for c, k in enumerate(ch)], sum(cost[c][k] for c, k in enumerate(ch)),
                sum(cost[c][k] for c, k in enumerate(floor)))

    carve_with((0, exact) if exact > 0 else (0,))
    first = cheapest()
    if workers(first) <= budget.workers:
        return result(first, first)
    carve_with(range(1, exact))
    floor = cheapest()
    choice = [exact] * len(comps)
    limit = max(budget.workers, workers(choice))
    for level in range(exact):
        cand = sorted((c for c in range(len(comps)) if cost[c][level] < cost[c][choice[c]]),
                      key=lambda c: cost[c][level] - cost[c][choice[c]])
        lo, hi = 0, len(cand)  # the first lo candidates are known to fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = list(choice)
            for c in cand[:mid]:
                trial[c] = level
            if workers(trial) <= limit:
                lo = mid
            else:
                hi = mid - 1
        for c in cand[:lo]:
            choice[c] = level
    # then one by one, where the most is still to gain: the cheapest option that still fits
    gain = sorted(range(len(comps)), key=lambda c: min(cost[c]) - cost[c][choice[c]])
    for c in gain[:REFINE_COMPONENTS]:
        for k in sorted(range(len(windows)), key=lambda k: cost[c][k]):
            if cost[c][k] >= cost[c][choice[c]]:
                break
            trial = list(choice)
            trial[c] = k
            if workers(trial) <= limit:
                choice = trial
                break
    return result(choice, floor)


def _cut_load(cells: IntArray, by_cell: IntArray, pieces: list[IntArray], w: np.ndarray,
              pairs: tuple[IntArray, IntArray]) -> float:
    """Load on ``cells`` with an 8-neighbour in another of ``pieces`` (the boundary load the cuts make).

    ``by_cell`` is ``argsort(cells)``; ``pairs`` are the 8-neighbour pairs of ``cells`` (positions in ``cells``).
    """
    if len(pieces) < 2:
        return 0.0
    own = np.empty(len(cells), dtype=np.int64)
    for k, p in enumerate(pieces):
        own[by_cell[np.searchsorted(cells, p, sorter=by_cell)]] = k
    i, j = pairs
    cut = own[i] != own[j]
    edge = np.zeros(len(cells), dtype=bool)
    edge[i[cut]] = True
    edge[j[cut]] = True
    return float(w[cells][edge].sum())


def _carve(idx: IntArray, x: IntArray, y: IntArray, w: np.ndarray, zoom: int, cap: float, *,
           window: float = 0.0, pairs: tuple[IntArray, IntArray] | None = None) -> list[IntArray]:
    """Recursively cut one connected set of cells into connected pieces within ``cap`` (see :func:`_cut_at`).

    ``pairs``: the 8-neighbour pairs of ``idx`` (positions in ``idx``) if already known; each piece's
    pairs are taken from them rather than searched again.
    """
    pi, pj = pairs if pairs is not None else neighbour_pairs(x[idx], y[idx], zoom)
    stack = [(idx, pi, pj)]
    done: list[IntArray] = []
    while stack:
        cur, pi, pj = stack.pop()
        load = float(w[cur].sum())
        if load <= cap * (1 + 1e-12) or len(cur) == 1:
            # a single cell cannot be cut: callers only pass cells within the real cap
            done.append(cur)
            continue
        k = math.ceil(load / cap - 1e-12)
        u, v = _axes(x[cur], y[cur], zoom)
        orders = [np.lexsort((v, u))]
        if window > 0:
            orders.append(np.lexsort((u, v)))
        best: tuple[float, int, IntArray] | None = None
        for order in orders:
            csum = np.cumsum(w[cur][order])
            cut, cost = _cut_at(csum, k, cap, window, (pi, pj) if window > 0 else None, order, w[cur])
            if best is None or cost < best[0]:
                best = (cost, cut, order)
        assert best is not None
        _, cut, order = best
        for side in (order[:cut], order[cut:]):
            si, sj = sub_pairs(side, len(cur), pi, pj)
            n, labels = components_of_pairs(len(side), si, sj)
            if n == 1:
                stack.append((cur[side], si, sj))
                continue
            for g in group_indices(labels, n):
                stack.append((cur[side[g]], *sub_pairs(g, len(side), si, sj)))
    return done


def _cut_at(csum: np.ndarray, k: int, cap: float, window: float, pairs: tuple[IntArray, IntArray] | None,
            order: IntArray, w: np.ndarray) -> tuple[int, float]:
    """Where to cut cells taken in ``order`` (``csum``: their running load); return the cut and its cost.

    Notes
    -----
    The exact cut (``window`` 0) leaves ``k // 2`` full workers of load on the first
    side: in the primary-axis order a staircase, straight except for one step. With
    a ``window`` the cut may go anywhere the first side holds ``j * cap`` minus at
    most ``window`` and both sides still fit in ``j`` and ``k - j`` workers (``j`` =
    ``k // 2`` or ``k - k // 2``); it takes the cut through the least load, counted
    over the 8-neighbour ``pairs`` it separates (each pair weighs the lighter of its
    two cells). That keeps hot spots whole and boundary load low, at the price of
    pieces that pack less tightly (the caller narrows the window if that costs a
    worker).
    """
    n = len(csum)
    load = float(csum[-1])
    tol = 1 + 1e-12
    exact = int(np.searchsorted(csum, (k // 2) * cap * tol, side="right"))
    exact = min(max(exact, 1), n - 1)
    if window <= 0 or pairs is None:
        return exact, 0.0
    left = csum[:-1]  # load of the first side when cutting before position c = 1 .. n-1
    ok = np.zeros(n - 1, dtype=bool)
    for j in {k // 2, k - k // 2}:
        ok |= (left <= j * cap * tol) & (left >= j * cap - window) & (load - left <= (k - j) * cap * tol)
    if not ok.any():
        return exact, math.inf
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    i, j2 = pairs
    lo, hi = np.minimum(rank[i], rank[j2]), np.maximum(rank[i], rank[j2])
    weight = np.minimum(w[i], w[j2])
    # a pair is cut by every cut position c with lo < c <= hi
    diff = np.bincount(lo + 1, weights=weight, minlength=n + 1) - np.bincount(hi + 1, weights=weight, minlength=n + 1)
    cost = np.cumsum(diff)[1:n]
    cand = np.nonzero(ok)[0]
    pick = cand[np.lexsort((np.abs(left[cand] - (k // 2) * cap), cost[cand]))[0]]
    return int(pick) + 1, float(cost[pick])


def _axes(x: IntArray, y: IntArray, zoom: int) -> tuple[IntArray, IntArray]:
    """Return (primary, secondary) coordinates: the longer extent first, x unwrapped at the antimeridian."""
    n = 1 << zoom
    ux = np.unique(x)
    if len(ux) > 1:
        gaps = np.diff(np.append(ux, ux[0] + n))
        g = int(np.argmax(gaps))
        start = int(ux[(g + 1) % len(ux)])
        xu = (x - start) % n
    else:
        xu = x - x.min()
    ext_x = int(xu.max() - xu.min())
    ext_y = int(y.max() - y.min())
    return (xu, y) if ext_x >= ext_y else (y, xu)


# ---------------------------------------------------------------------------
# Packing regions onto workers
# ---------------------------------------------------------------------------


def pack_best_fit(loads: Sequence[float], cap: float) -> list[int]:
    """Best-fit decreasing bin packing: return the worker index of each item.

    Notes
    -----
    Items must each be <= ``cap``. Residual capacities are kept in a sorted list so
    each placement costs ``O(log bins)`` to find plus ``O(bins)`` to update.
    """
    order = sorted(range(len(loads)), key=lambda i: -loads[i])
    residuals: list[float] = []  # sorted ascending
    bins_at: list[int] = []  # bin id per residual slot, same order
    assign = [0] * len(loads)
    n_bins = 0
    eps = cap * 1e-9
    for i in order:
        need = loads[i]
        pos = bisect.bisect_left(residuals, need - eps)
        if pos < len(residuals):
            b = bins_at.pop(pos)
            r = residuals.pop(pos) - need
        else:
            b = n_bins
            n_bins += 1
            r = cap - need
        assign[i] = b
        ins = bisect.bisect_left(residuals, r)
        residuals.insert(ins, r)
        bins_at.insert(ins, b)
    return _renumber(assign)


def _renumber(assign: list[int]) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(a, len(seen)) for a in assign]


# ---------------------------------------------------------------------------
# Sticky repair of a previous spec
# ---------------------------------------------------------------------------


RepairResult = tuple[list[Region], list[int], list[str], list[str], list[str]]


def _repair(previous: Spec, counts: Counts, cap: float, target_workers: int) -> RepairResult | None:
    """Keep the previous spec where it still fits; move only what must move.

    Returns regions, worker index per region, partition ids, worker ids (per worker
    index) and notes; or None when the previous spec cannot be repaired (its
    regions list cells finer than the counts' grid).

    Notes
    -----
    * A region that still fits keeps its id, its listed quadkeys (so contiguity
      holds where load vanished) and its worker.
    * A region over the cap is re-carved; its largest piece keeps the id.
    * A hot cell split by entity hash keeps its shares while each fits, else is
      re-split with the first shares keeping their ids; a cell newly hotter than
      the cap is split and taken out of its region.
    * A worker over the cap sheds the overflow: the smallest of its regions that
      covers the excess moves if it is small, else a sliver of about the excess is
      shaved off its largest region. Moved pieces go to the fullest worker they fit
      (best fit), or to a new worker.
    * New load outside every region (the catch-all) becomes new regions.
    * When load has fallen and more than ``target_workers`` workers remain, the
      least-loaded workers are emptied into the others while their partitions fit
      whole (they keep their ids): the load that moves is the least that frees a
      worker.
    """
    grid = counts.grid()
    parts = previous.partitions
    if any(len(q) > grid.zoom for p in parts if p.hash_range is None for q in p.quadkeys):
        return None
    index = SpecIndex(previous)
    owner = index.locate_groups_xy(grid.x, grid.y, grid.zoom)
    catch = index.catch_all_index
    notes: list[str] = []
    qks = np.array(arrays_to_quadkeys(grid.x, grid.y, grid.zoom), dtype=object)
    plan = _RepairPlan(cap)
    handled = np.zeros(len(grid.x), dtype=bool)
    # 1. hot cells: previous splits keep their shares while they fit; new hot cells are split
    for cell in np.nonzero(owner < 0)[0]:
        members = [parts[int(i)] for i in index.group_members(int(-owner[cell] - 1))]
        load = float(grid.weight[cell])
        if all(load * p.share <= cap for p in members):
            for p in members:
                plan.add(Region(p.quadkeys, load * p.share, p.hash_range), p.id, p.worker)
        else:
            notes.append(f"hot cell {members[0].quadkeys[0]!r} re-split for load {load:.6g}")
            for k, r in enumerate(hash_split(members[0].quadkeys[0], load, cap)):
                plan.add(r, members[k].id if k < len(members) else "", members[k].worker if k < len(members) else "")
        handled[cell] = True
    newly_hot = np.nonzero((grid.weight > cap) & ~handled)[0]
    drop: dict[int, set[str]] = {}
    for cell in newly_hot:
        notes.append(f"cell {qks[cell]!r} at {grid.weight[cell] / cap:.0%} of max_load split by entity hash")
        for r in hash_split(str(qks[cell]), float(grid.weight[cell]), cap):
            plan.add(r, "", "")
        drop.setdefault(int(owner[cell]), set()).add(str(qks[cell]))
        handled[cell] = True
    plain = ~handled & (owner >= 0)
    loads = np.bincount(owner[plain], weights=grid.weight[plain], minlength=len(parts))
    # 2. previous regions
    for i, p in enumerate(parts):
        if i == catch or p.hash_range is not None:
            continue
        cells = np.nonzero(plain & (owner == i))[0]
        if loads[i] <= cap:
            listed = tuple(q for q in p.quadkeys if q not in drop.get(i, ()))
            if listed:
                plan.add(Region(listed, float(loads[i])), p.id, p.worker, cells)
            continue
        pieces = _recarve(cells, grid, cap)
        notes.append(f"partition {p.id!r} at {loads[i] / cap:.0%} of max_load re-carved into {len(pieces)} pieces")
        for k, piece in enumerate(pieces):
            plan.add(Region(tuple(sorted(qks[piece])), float(grid.weight[piece].sum())), p.id if k == 0 else "",
                     p.worker if k == 0 else "", piece)
    # 3. new load in the catch-all
    new_cells = np.nonzero(plain & (owner == catch) & (grid.weight > 0))[0]
    if len(new_cells):
        fresh = carve_cells(grid.x[new_cells], grid.y[new_cells], grid.weight[new_cells], grid.zoom, cap,
                            bridge_levels=0)
        notes.append(f"{float(grid.weight[new_cells].sum()):.6g} load outside the previous regions -> "
                     f"{len(fresh)} new regions")
        for r in fresh:
            plan.add(r, "", "")
    # 4. workers over the cap shed their overflow; everything unplaced is packed best-fit
    plan.shed_overflow(grid, qks, notes)
    plan.place_unassigned([w.id for w in previous.workers])
    plan.consolidate(target_workers, notes)
    return plan.result(previous, notes)


def _recarve(cells: IntArray, grid: Grid, cap: float) -> list[IntArray]:
    """Cut an overloaded region to the cap, moving as little load as possible; largest piece first."""
    shaved = _shave(cells, grid, cap)
    if shaved is None:
        pieces = _carve(cells, grid.x, grid.y, grid.weight, grid.zoom, cap)
    else:
        keep, rest = shaved
        pieces = [keep]
        for r in rest:
            pieces += _carve(r, grid.x, grid.y, grid.weight, grid.zoom, cap)
    return sorted(pieces, key=lambda c: -float(grid.weight[c].sum()))


class _RepairPlan:
    """Mutable working state of one repair (internal; the result is immutable regions and ids)."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.regions: list[Region] = []
        self.ids: list[str] = []
        self.worker: list[str] = []
        self.cells: list[IntArray | None] = []

    def add(self, region: Region, pid: str, worker: str, cells: IntArray | None = None) -> None:
        self.regions.append(region)
        self.ids.append(pid)
        self.worker.append(worker)
        self.cells.append(cells)

    def worker_loads(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r, w in zip(self.regions, self.worker, strict=True):
            if w:
                out[w] = out.get(w, 0.0) + r.load
        return out

    def shed_overflow(self, grid: Grid, qks: np.ndarray, notes: list[str]) -> None:
        tol = self.cap * 1e-12
        for w, load in sorted(self.worker_loads().items()):
            excess = load - self.cap
            if excess <= tol:
                continue
            mine = [i for i, ww in enumerate(self.worker) if ww == w]
            moves = self._moves_covering(mine, excess)
            move_cost = sum(self.regions[i].load for i in moves)
            largest = max(mine, key=lambda i: self.regions[i].load)
            cells = self.cells[largest]
            shaved = None
            if move_cost > 1.05 * excess and cells is not None and len(cells) > 1 \
                    and self.regions[largest].hash_range is None:
                shaved = _shave(cells, grid, self.regions[largest].load - excess)
                if shaved is not None and float(grid.weight[np.concatenate(shaved[1])].sum()) >= move_cost:
                    shaved = None
            if shaved is None:
                for i in moves:
                    self.worker[i] = ""
                continue
            keep, rest = shaved
            self.regions[largest] = Region(tuple(sorted(qks[keep])), float(grid.weight[keep].sum()))
            self.cells[largest] = keep
            for piece in rest:
                self.add(Region(tuple(sorted(qks[piece])), float(grid.weight[piece].sum())), "", "", piece)
            notes.append(f"worker {w!r} at {load / self.cap:.1%}: shaved {float(grid.weight[np.concatenate(rest)].sum()):.6g}"
                         f" off partition {self.ids[largest]!r}")

    def consolidate(self, target: int, notes: list[str]) -> None:
        """Empty the least-loaded workers into the others (best fit, whole partitions) down to ``target``."""
        wl = self.worker_loads()
        if len(wl) <= target:
            return
        hosted: dict[str, list[int]] = {}
        for i, w in enumerate(self.worker):
            hosted.setdefault(w, []).append(i)
        emptied: list[str] = []
        moved = 0.0
        for w in sorted(wl, key=lambda k: (wl[k], k)):
            if len(wl) <= target:
                break
            others = {o: load for o, load in wl.items() if o != w}
            plan: list[tuple[int, str]] = []
            for i in sorted(hosted.get(w, []), key=lambda i: -self.regions[i].load):
                need = self.regions[i].load
                fits = [(self.cap - load - need, o) for o, load in others.items()
                        if load + need <= self.cap * (1 + 1e-12)]
                if not fits:
                    break
                dest = min(fits)[1]
                others[dest] += need
                plan.append((i, dest))
            else:
                for i, dest in plan:
                    self.worker[i] = dest
                    hosted.setdefault(dest, []).append(i)
                hosted.pop(w, None)
                moved += wl[w]
                emptied.append(w)
                wl = others
        if emptied:
            notes.append(f"load fell: emptied {len(emptied)} least-loaded workers into the others, moving "
                         f"{moved:.6g} load ({', '.join(emptied[:5])}{', ...' if len(emptied) > 5 else ''})")

    def _moves_covering(self, mine: list[int], excess: float) -> list[int]:
        """Pick regions of one worker to move off it, moving as little load as greedily possible."""
        left = sorted(mine, key=lambda i: self.regions[i].load)
        picked: list[int] = []
        while excess > self.cap * 1e-12 and left:
            pick = next((i for i in left if self.regions[i].load >= excess), left[-1])
            left.remove(pick)
            picked.append(pick)
            excess -= self.regions[pick].load
        return picked

    def place_unassigned(self, previous_workers: list[str]) -> None:
        wl = self.worker_loads()
        for i in sorted((i for i, w in enumerate(self.worker) if not w), key=lambda i: -self.regions[i].load):
            need = self.regions[i].load
            fits = [(self.cap - used, w) for w, used in wl.items() if used + need <= self.cap * (1 + 1e-12)]
            w = min(fits)[1] if fits else _new_worker_id(previous_workers, wl)
            self.worker[i] = w
            wl[w] = wl.get(w, 0.0) + need

    def result(self, previous: Spec, notes: list[str]) -> RepairResult:
        wids = sorted(set(self.worker))
        windex = {w: k for k, w in enumerate(wids)}
        used = {p.id for p in previous.partitions} | {i for i in self.ids if i}
        nxt = _next_number(list(used))
        ids = list(self.ids)
        for k, pid in enumerate(ids):
            if not pid:
                ids[k] = f"p{nxt:04d}"
                nxt += 1
        return self.regions, [windex[w] for w in self.worker], ids, wids, notes


def _shave(cells: IntArray, grid: Grid, keep_load: float) -> tuple[IntArray, list[IntArray]] | None:
    """Cut a region's cells so the piece kept is at most ``keep_load``; return it and the shaved pieces.

    Returns None when no cut keeps a non-empty piece within ``keep_load``.
    """
    u, v = _axes(grid.x[cells], grid.y[cells], grid.zoom)
    w = grid.weight[cells]
    # shave from the side whose edge cells add up to the excess: try all four sides, keep the cheapest
    best: tuple[float, IntArray, IntArray] | None = None
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
        moved = float(grid.weight[shaved].sum())
        if best is None or moved < best[0]:
            best = (moved, keep, shaved)
    if best is None:
        return None
    _, keep, shaved = best
    n, labels = components(grid.x[shaved], grid.y[shaved], grid.zoom)
    return keep, [shaved[g] for g in group_indices(labels, n)]


def _new_worker_id(existing: list[str], in_use: dict[str, float]) -> str:
    n = _next_number(existing + list(in_use))
    return f"w{n:04d}"


def _next_number(ids: Sequence[str]) -> int:
    nums = [int(i[1:]) for i in ids if len(i) > 1 and i[1:].isdigit()]
    return max(nums, default=0) + 1


def _match_ids(previous: Spec, regions: list[Region], workers_of: list[int], zoom: int
               ) -> tuple[list[str], list[str]]:
    """Give fresh regions and workers the previous ids they share the most load with."""
    index = SpecIndex(previous)
    prev_parts = previous.partitions
    members = [(r_i, q, r.load / len(r.quadkeys)) for r_i, r in enumerate(regions) for q in r.quadkeys if q]
    overlap: dict[tuple[int, int], float] = {}
    woverlap: dict[tuple[int, str], float] = {}
    if members:
        region_of = np.array([m[0] for m in members], dtype=np.int64)
        share = np.array([m[2] for m in members], dtype=np.float64)
        x, y, z = quadkeys_to_arrays([m[1] for m in members])
        owners = np.empty(len(members), dtype=np.int64)
        for zz in np.unique(z):
            sel = z == zz
            owners[sel] = index.locate_xy(x[sel], y[sel], int(zz))
        keep = owners != index.catch_all_index
        pair = region_of[keep] * len(prev_parts) + owners[keep]
        uniq, inv = np.unique(pair, return_inverse=True)
        sums = np.bincount(inv, weights=share[keep])
        prev_worker = [p.worker for p in prev_parts]
        for code, load in zip(uniq.tolist(), sums.tolist(), strict=True):
            r_i, o = divmod(code, len(prev_parts))
            overlap[(r_i, o)] = load
            key = (workers_of[r_i], prev_worker[o])
            woverlap[key] = woverlap.get(key, 0.0) + load
    ids = [""] * len(regions)
    taken: set[int] = set()
    for (r_i, o), _ in sorted(overlap.items(), key=lambda kv: -kv[1]):
        if not ids[r_i] and o not in taken:
            ids[r_i] = prev_parts[o].id
            taken.add(o)
    n_workers = max(workers_of) + 1 if workers_of else 0
    wids = [""] * n_workers
    wtaken: set[str] = set()
    for (wi, wid), _ in sorted(woverlap.items(), key=lambda kv: -kv[1]):
        if not wids[wi] and wid not in wtaken:
            wids[wi] = wid
            wtaken.add(wid)
    used = {p.id for p in prev_parts} | set(ids)
    nxt = _next_number(list(used))
    for k in range(len(ids)):
        if not ids[k]:
            ids[k] = f"p{nxt:04d}"
            nxt += 1
    wused = {w.id for w in previous.workers} | set(wids)
    wn = _next_number(list(wused))
    for k in range(n_workers):
        if not wids[k]:
            wids[k] = f"w{wn:04d}"
            wn += 1
    return ids, wids


# ---------------------------------------------------------------------------
# Assembling the spec
# ---------------------------------------------------------------------------


def _assemble(regions: list[Region], workers_of: list[int], cap: float, *, version: int,
              previous_version: int | None, created_at: str, strategy: str, stream_name: str | None,
              source: dict[str, object], ids: list[str] | None = None, worker_ids: list[str] | None = None) -> Spec:
    n_workers = max(workers_of) + 1 if workers_of else 1
    wids = worker_ids or [f"w{k + 1:04d}" for k in range(n_workers)]
    wload = [0.0] * n_workers
    for r, w in zip(regions, workers_of, strict=True):
        wload[w] += r.load
    # the catch-all rides on the least-loaded worker
    host = min(range(n_workers), key=lambda k: wload[k])
    order = sorted(range(len(regions)), key=lambda i: (workers_of[i], -regions[i].load))
    pids = ids or [""] * len(regions)
    parts: list[Partition] = []
    counter = _next_number([p for p in pids if p])
    for n, i in enumerate(order):
        pid = pids[i] or f"p{(n + 1) if not ids else counter:04d}"
        if ids and not pids[i]:
            counter += 1
        parts.append(Partition(id=pid, worker=wids[workers_of[i]], quadkeys=regions[i].quadkeys,
                               load=regions[i].load, hash_range=regions[i].hash_range))
    used = {p.id for p in parts}
    catch_id = next(f"p{k:04d}" for k in range(_next_number(list(used)), 10**9) if f"p{k:04d}" not in used) \
        if parts else "p0001"
    parts.append(Partition(id=catch_id, worker=wids[host], quadkeys=("",), load=0.0))
    workers = tuple(Worker(id=wids[k], load=wload[k], hash_key=shard_hash_key(k, n_workers))
                    for k in range(n_workers))
    return Spec(version=version, max_load=cap, partitions=tuple(parts), workers=workers,
                previous_version=previous_version, created_at=created_at, strategy=strategy,
                stream_name=stream_name, source=source)


# ---------------------------------------------------------------------------
# The seed algorithm (baseline)
# ---------------------------------------------------------------------------


def seed_regions(counts: Counts, cap: float) -> list[Region]:
    """The seed strategy: greedy growth from the hottest quadkeys (plain Python, as published).

    Notes
    -----
    Works on the grid cells (single zoom). Candidates are the unassigned loaded
    8-neighbours of the growing component, ranked by how many of their own
    neighbours are already in the component, then by load; the best candidate that
    still fits is added; growth stops when none fits. A quadkey hotter than the
    cap becomes a partition of its own, over the cap.
    """
    grid = counts.grid()
    qks = arrays_to_quadkeys(grid.x, grid.y, grid.zoom)
    qk_counts = {q: float(w) for q, w in zip(qks, grid.weight, strict=True) if w > 0}
    nbr_cache: dict[str, set[str]] = {}

    def nbrs(q: str) -> set[str]:
        s = nbr_cache.get(q)
        if s is None:
            s = {quadkey(t) for t in neighbors(quadkey_to_tile(q))} & qk_counts.keys()
            nbr_cache[q] = s
        return s

    assigned: set[str] = set()
    regions: list[Region] = []
    for seed_qk, seed_load in sorted(qk_counts.items(), key=lambda kv: -kv[1]):
        if seed_qk in assigned:
            continue
        component = {seed_qk}
        assigned.add(seed_qk)
        load = seed_load
        frontier: dict[str, int] = {}
        for n in nbrs(seed_qk) - assigned:
            frontier[n] = frontier.get(n, 0) + 1
        while frontier:
            ranked = sorted(frontier, key=lambda c: (-frontier[c], -qk_counts[c]))
            pick = next((c for c in ranked if load + qk_counts[c] <= cap), None)
            if pick is None:
                break
            component.add(pick)
            assigned.add(pick)
            load += qk_counts[pick]
            del frontier[pick]
            for n in nbrs(pick):
                if n not in assigned:
                    frontier[n] = frontier.get(n, 0) + 1
            for c in [c for c in frontier if c in assigned]:
                del frontier[c]
        regions.append(Region(tuple(sorted(component)), load))
    return regions
