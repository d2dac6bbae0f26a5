"""The seed strategy (shared/seeds/000), implemented faithfully as the baseline the compact strategy is measured against.

Seed from the hottest unassigned quadkey, grow by 8-neighbour adjacency ranking
candidates by shared edges then load, cap at ``max_load``, one worker per partition,
hot quadkeys unsplittable.
"""

from __future__ import annotations

from partitioner.build.region import Region
from partitioner.counts import Counts
from partitioner.tiles import arrays_to_quadkeys, neighbors, quadkey, quadkey_to_tile


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
