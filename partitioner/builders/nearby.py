"""A sticky repair on fragmented data: new islands go near their worker's others, and islands merge into territories.

A repair (:mod:`partitioner.builders.repair`) keeps every previous region that fits and turns new load outside
them (cells the catch-all held) into new regions. On fragmented data (the scattered places of a day, where a
window's load appears in cells the previous window did not have) that adds hundreds of tiny regions a window,
placed best-fit by load anywhere in the world: a day's repairs grew a spec of 70 regions to 44,000 for 35
workers, and every repair took seconds. Two steps keep such a spec as small as a fresh build's:

1. :func:`place_nearby`: each new small region goes to the worker of the placed region next to it along the
   Hilbert curve (the one before or after it, whichever has more room), if that worker has room; the rest are
   left to the best-fit placement as before.
2. :func:`merge_territories`: every worker's small regions grow into territories
   (:func:`partitioner.builders.territory.territories`: the coarsest squares holding no one else's load, merged
   where they touch). No region changes worker, so no load moves; a merged region keeps the partition id of its
   largest member.

Both run only when the plan is fragmented (:func:`partitioner.builders.fresh.fragmented`).
"""

from __future__ import annotations

import numpy as np

from geokernel.geo.tiles import IntArray, quadkeys_to_arrays
from partitioner.builders.carving import squares_to_regions
from partitioner.builders.gather import curve_keys
from partitioner.builders.plan import Item, RepairPlan
from partitioner.builders.territory import Squares, territories


def _curve_keys(items: list[Item], top: int) -> IntArray:
    """Hilbert position of each item's first square."""
    x, y, z = quadkeys_to_arrays([it.region.quadkeys[0] for it in items])
    return curve_keys(x, y, z, top)


def place_nearby(plan: RepairPlan, zoom: int, small: float) -> int:
    """Put each unplaced region of at most ``small`` load (not a hash share) on the worker of its neighbour along
    the Hilbert curve among the placed regions, when that worker has room; return how many were placed."""
    items = plan.items
    new = [i for i, it in enumerate(items) if not it.worker and it.region.hash_range is None
           and it.region.load <= small and it.region.quadkeys and it.region.quadkeys[0]]
    placed = [i for i, it in enumerate(items) if it.worker and it.region.quadkeys and it.region.quadkeys[0]]
    if not new or not placed:
        return 0
    top = max(zoom, *(len(items[i].region.quadkeys[0]) for i in new + placed))
    pkeys = _curve_keys([items[i] for i in placed], top)
    order = np.argsort(pkeys, kind="stable")
    pkeys, placed_sorted = pkeys[order], [placed[k] for k in order.tolist()]
    pos = np.searchsorted(pkeys, _curve_keys([items[i] for i in new], top)).tolist()
    wl = plan.worker_loads()
    done = 0
    for i, p in zip(new, pos, strict=True):
        need = items[i].region.load
        around = {items[placed_sorted[k]].worker for k in (p - 1, p) if 0 <= k < len(placed_sorted)}
        fits = [(plan.cap - wl[w], w) for w in around if wl[w] + need <= plan.cap * (1 + 1e-12)]
        if fits:
            w = max(fits)[1]
            plan.move(i, w)
            wl[w] += need
            done += 1
    return done


def merge_territories(plan: RepairPlan, zoom: int, small: float, levels: int) -> int:
    """Merge every worker's regions of at most ``small`` load into territories up to ``levels`` zooms above
    ``zoom``; return how many regions there were less. Hash shares block growth; nothing changes worker."""
    items = plan.items
    listed = [i for i, it in enumerate(items) if it.region.hash_range is None and it.worker]
    shares = [i for i, it in enumerate(items) if it.region.hash_range is not None]
    others = [i for i, it in enumerate(items) if it.region.hash_range is None and not it.worker]
    if not listed:
        return 0
    wids = sorted({items[i].worker for i in listed})
    windex = {w: k for k, w in enumerate(wids)}
    qks = [q for i in listed for q in items[i].region.quadkeys]
    x, y, z = quadkeys_to_arrays(qks)
    item = np.repeat(np.arange(len(listed), dtype=np.int64), [len(items[i].region.quadkeys) for i in listed])
    bx, by, bz = quadkeys_to_arrays([items[i].region.quadkeys[0] for i in shares])
    load = np.array([items[i].region.load for i in listed], dtype=np.float64)
    worker = np.array([windex[items[i].worker] for i in listed], dtype=np.int64)
    movable = load <= small
    terr = territories(Squares(x, y, z, item), Squares(bx, by, bz, np.zeros(len(bx), dtype=np.int64)), worker,
                       load, movable, max(1, zoom - levels))
    regions = squares_to_regions(terr.squares, terr.loads)
    # each region keeps the id of its largest member that has one (and its cells, if it is one item)
    members: dict[int, list[int]] = {}
    for k, r in enumerate(terr.of_item.tolist()):
        members.setdefault(r, []).append(k)
    merged: list[Item] = []
    for r, region in enumerate(regions):
        group = [items[listed[k]] for k in sorted(members.get(r, []), key=lambda k: -load[k])]
        if not group:
            continue
        pid = next((it.pid for it in group if it.pid), "")
        merged.append(Item(region, pid, wids[int(terr.workers[r])], group[0].cells if len(group) == 1 else None))
    plan.items = merged + [items[i] for i in shares] + [items[i] for i in others]
    return len(listed) - len(merged)
