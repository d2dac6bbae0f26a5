"""Build a partition spec from load per quadkey.

Two strategies:

``compact`` (default)
    1. **Hot cells** (load > ``max_load``) are split first: into their finer
       cells when the counts carry refinement rows (recursively), else across
       several workers by entity hash: whole workers of ``max_load``, and the rest
       poured into the room the packed regions leave, on the workers of the cell's
       neighbours first (:mod:`~partitioner.build.pour`); where the workers the
       pouring needs have room to spare, each share leaves some headroom for its
       cell to grow. If hot and big cells still
       leave the packing above the lower bound + 1, cells above half (then a
       quarter) of the cap are split by hash too.
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
       partitions, attach new load to neighbours with room, shed exactly a
       worker's overflow from the end of an entity-hash share where it can, else
       move or shave its cheapest partitions, join small shares back to their
       neighbours and empty the least-loaded workers when load falls)
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

Modules: :mod:`~partitioner.build.hot` (step 1), :mod:`~partitioner.build.carving` and
:mod:`~partitioner.build.bisection` and :mod:`~partitioner.build.cuts` (steps 2-4), :mod:`~partitioner.build.packing` and
:mod:`~partitioner.build.fresh` (step 5), :mod:`~partitioner.build.repair` with :mod:`~partitioner.build.plan`
and :mod:`~partitioner.build.relieve` (step 6),
:mod:`~partitioner.build.ids` (partition and worker ids), :mod:`~partitioner.build.assemble`
(the spec of a placement) and :mod:`~partitioner.build.seed` (the baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from partitioner.build.assemble import SpecHeader, assemble
from partitioner.build.carving import BRIDGE_LEVELS, carve_cells
from partitioner.build.cuts import REFINE_COMPONENTS, CutBudget
from partitioner.build.fresh import fresh_build
from partitioner.build.hot import hash_split
from partitioner.build.ids import match_ids
from partitioner.build.packing import level_workers, lower_bound, pack_best_fit
from partitioner.build.plan import RepairResult
from partitioner.build.region import Placement, Region
from partitioner.build.repair import repair
from partitioner.build.seed import seed_regions
from partitioner.counts import Counts, Grid
from partitioner.errors import BuildError
from partitioner.spec import Spec, check, validate

__all__ = [
    "BRIDGE_LEVELS",
    "REFINE_COMPONENTS",
    "STRATEGIES",
    "BuildReport",
    "CutBudget",
    "Region",
    "RepairResult",
    "build_spec",
    "build_with_report",
    "carve_cells",
    "hash_split",
    "level_workers",
    "lower_bound",
    "pack_best_fit",
    "seed_regions",
]

STRATEGIES = ("compact", "seed")


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
    _check_arguments(counts, max_load, strategy, fill)
    cap = float(max_load) * float(fill)
    grid = counts.grid()
    header = _header(counts, grid, float(max_load), previous=previous, strategy=strategy, version=version,
                     created_at=created_at, stream_name=stream_name, fill=fill)
    lb = lower_bound(float(grid.weight.sum()), cap)
    if strategy == "seed":
        regions = seed_regions(counts, cap)
        spec = assemble(Placement(tuple(regions), tuple(range(len(regions)))), header)
        hot = int(np.count_nonzero(grid.weight > cap))
        return BuildReport(spec, "seed", lb, hot, 0, "fresh", problems=tuple(validate(spec)))
    return _build_compact(counts, grid, cap, lb, previous, header)


def _check_arguments(counts: Counts, max_load: float, strategy: str, fill: float) -> None:
    """Raise BuildError naming the first bad argument."""
    if isinstance(max_load, bool) or not isinstance(max_load, (int, float)) or not (
            math.isfinite(max_load) and max_load > 0):
        raise BuildError(f"max_load must be a positive finite number, got {max_load!r}")
    if strategy not in STRATEGIES:
        raise BuildError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if len(counts) == 0:
        raise BuildError(f"{counts.source}: no load to partition")
    if isinstance(fill, bool) or not isinstance(fill, (int, float)) or not 0 < fill <= 1:
        raise BuildError(f"fill must be a number in (0, 1], got {fill!r}")


def _header(counts: Counts, grid: Grid, hard_cap: float, *, previous: Spec | None, strategy: str,
            version: int | None, created_at: str | None, stream_name: str | None, fill: float) -> SpecHeader:
    """The spec's version, stamp and ``source`` record (total load, lower bound at the hard cap, fill)."""
    if version is None:
        version = previous.version + 1 if previous is not None else 1
    total = float(grid.weight.sum())
    source = {"counts": counts.source, "grid_zoom": grid.zoom, "total_load": total,
              "lower_bound": lower_bound(total, hard_cap), "fill": float(fill)}
    return SpecHeader(version=version, max_load=hard_cap,
                      previous_version=previous.version if previous is not None and previous.version < version else None,
                      created_at=created_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), strategy=strategy,
                      stream_name=stream_name, source=source)


def _build_compact(counts: Counts, grid: Grid, cap: float, lb: int, previous: Spec | None,
                   header: SpecHeader) -> BuildReport:
    """The compact strategy: a fresh build, or with ``previous`` a sticky repair if it is not much worse.

    Notes
    -----
    A repair is kept when it needs at most ``max(fresh workers, lb + 1) + 1`` workers, so one
    within ``lb + 2`` is kept without making the fresh build at all (the steady state of a
    running system: only the repair's cost).
    """
    hot_cells = int(np.count_nonzero(grid.weight > cap))

    def report(spec: Spec, mode: str, hashed: int, notes: tuple[str, ...] = ()) -> BuildReport:
        return BuildReport(check(spec), "compact", lb, hot_cells, hashed, mode, notes)

    repaired = repair(previous, counts, cap, lb + 1) if previous is not None else None
    if repaired is not None and repaired.placement.worker_count <= lb + 2:
        return report(assemble(repaired.placement, header, repaired.ids), "repair", _hashed(repaired.placement),
                      repaired.notes)
    fresh, hot = fresh_build(counts, grid, cap, lb)
    if previous is None:
        return report(assemble(fresh, header), "fresh", hot.hashed)
    notes: tuple[str, ...] = ()
    if repaired is not None:
        n_rep = repaired.placement.worker_count
        if n_rep <= max(fresh.worker_count, lb + 1) + 1:
            return report(assemble(repaired.placement, header, repaired.ids), "repair", _hashed(repaired.placement),
                          repaired.notes)
        notes = (f"repair needed {n_rep} workers vs {fresh.worker_count} fresh (lower bound {lb}): rebuilt",)
    return report(assemble(fresh, header, match_ids(previous, fresh)), "fresh+matched", hot.hashed, notes)


def _hashed(placement: Placement) -> int:
    """Cells split by entity hash in a placement."""
    return len({r.quadkeys[0] for r in placement.regions if r.hash_range is not None})
