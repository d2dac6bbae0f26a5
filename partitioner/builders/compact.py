"""The compact strategy (the default): compact regions packed onto as few workers as the load allows.

1. **Hot cells** (load > ``max_load``) are split first: into their finer
   cells when the counts carry refinement rows (recursively), else across
   several workers by entity hash: whole workers of ``max_load``, and the rest
   poured into the room the packed regions leave, on the workers of the cell's
   neighbours first (:mod:`~partitioner.builders.pour`); where the workers the
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
   the components where they save the most (:class:`~partitioner.builders.cuts.CutBudget`).
4. Regions take the empty cells in their notches and holes and list their
   cells as quadtree squares (:mod:`geokernel.geo.shape`).
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
   the previous spec by shared load. A repair that leaves a worker over the
   cap is never kept (the fresh build is used, and a note names the worker):
   the repair keeps every worker within the cap by construction, and this
   check makes sure a slip there costs stickiness, not a rejected spec.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geokernel.partition_spec.model import LOAD_TOLERANCE, Spec
from geokernel.partition_spec.rules import check
from partitioner.builders.assemble import assemble
from partitioner.builders.fresh import fresh_build
from partitioner.builders.ids import match_ids
from partitioner.builders.protocol import BuildReport, BuildRequest
from partitioner.builders.region import Placement
from partitioner.builders.repair import repair
from partitioner.builders.shares import of_max_load


@dataclass(frozen=True, slots=True)
class CompactBuilder:
    """The compact strategy (the default); see the module docstring."""

    name: str = "compact"

    def build(self, request: BuildRequest) -> BuildReport:
        """A fresh build, or with ``request.previous`` a sticky repair if it is not much worse.

        Notes
        -----
        A repair is kept when it needs at most ``max(fresh workers, lb + 1) + 1`` workers, so one
        within ``lb + 2`` is kept without making the fresh build at all (the steady state of a
        running system: only the repair's cost).
        """
        counts, grid, cap, lb = request.counts, request.grid, request.cap, request.lower_bound
        previous, header = request.previous, request.header
        hot_cells = int(np.count_nonzero(grid.weight > cap))

        def report(spec: Spec, mode: str, hashed: int, notes: tuple[str, ...] = ()) -> BuildReport:
            return BuildReport(check(spec), self.name, lb, hot_cells, hashed, mode, notes)

        repaired = repair(previous, counts, cap, lb + 1, request.fill) if previous is not None else None
        notes: tuple[str, ...] = ()
        if repaired is not None:
            worker, load = repaired.placement.busiest()
            if load > cap * (1 + LOAD_TOLERANCE):
                notes = (f"repair left worker {repaired.ids.workers[worker]!r} at {load:.6g} "
                         f"({of_max_load(load, cap, request.fill, 1)}), over the cap it packs to: rebuilt",)
                repaired = None
        if repaired is not None and repaired.placement.worker_count <= lb + 2:
            return report(assemble(repaired.placement, header, repaired.ids), "repair", _hashed(repaired.placement),
                          repaired.notes)
        fresh, hot = fresh_build(counts, grid, cap, lb)
        if previous is None:
            return report(assemble(fresh, header), "fresh", hot.hashed)
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
