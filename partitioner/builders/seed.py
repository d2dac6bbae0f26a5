"""The ``seed`` strategy: the greedy algorithm the project started from, kept faithfully as the baseline.

The algorithm is the one published in the article "Dynamically Rebalancing Geo-Constrained Stream
Processing" (section "Partition construction"): seed from the hottest unassigned quadkey, grow by
8-neighbour adjacency ranking candidates by shared edges then load, cap at ``max_load``, one worker
per partition, hot quadkeys unsplittable. The compact strategy is measured against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geokernel.geo.tiles import arrays_to_quadkeys, neighbors, quadkey, quadkey_to_tile
from geokernel.partition_spec.rules import validate
from partitioner.builders.assemble import assemble
from partitioner.builders.protocol import BuildReport, BuildRequest
from partitioner.builders.region import Placement, Region
from partitioner.load.counts import Counts


@dataclass(frozen=True, slots=True)
class SeedBuilder:
    """The greedy baseline: one worker per region, grown from the hottest quadkeys; caps may break.

    The spec is not checked: a quadkey hotter than the cap breaks it (that is the baseline's
    weakness), and the report lists the broken rules in ``problems`` instead of raising.
    """

    name: str = "seed"

    def build(self, request: BuildRequest) -> BuildReport:
        """Grow the regions, one per worker, and assemble them (``previous`` plays no part)."""
        regions = seed_regions(request.counts, request.cap)
        spec = assemble(Placement(tuple(regions), tuple(range(len(regions)))), request.header)
        hot = int(np.count_nonzero(request.grid.weight > request.cap))
        return BuildReport(spec, self.name, request.lower_bound, hot, 0, "fresh", problems=tuple(validate(spec)))


def seed_regions(counts: Counts, cap: float) -> list[Region]:
    """The regions of the greedy baseline: growth from the hottest quadkeys (plain Python, as published).

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
