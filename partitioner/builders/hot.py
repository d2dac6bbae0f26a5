"""Hot cells: grid cells with more load than one worker may carry (compact strategy, step 1).

A hot cell is split into its finer cells when the counts carry refinement rows under
it (recursively: a finer cell that is still hot is split again), else by entity hash.
A fresh build leaves the entity-hash split to :func:`partitioner.builders.pour.pour`
(shares sized to fill the workers, next to the cell's neighbours first); the sticky repair
uses :func:`hash_split` (full shares of exactly the cap plus one remainder share).

Notes
-----
A share's load is stated as the cell's load times its share of the buckets. The snapshot counts events per cell
(``quadkey, events, cost``: :mod:`geokernel.contracts.snapshot`), not per entity or bucket, so the builder cannot
see how a cell's load spreads over entities. The rule it keeps is on the stated loads: no region, share or worker
of a spec it builds states more than the cap (fresh: :mod:`partitioner.builders.pour` rounds widths down; repair:
a tile or share above the cap is never placed whole, :mod:`partitioner.builders.relieve`,
:class:`partitioner.builders.plan.RepairPlan`). What a share carries at its worker equals what it states only when
the cell's load is spread over many entities: an entity's events all land in one bucket. Ships make cells of a few
entities: routed by entity, the AIS log ``builtin:nyharbor`` (450 s windows, fill 0.8) put 44 of 447 worker-windows
over max_load at cap 25 (a share carrying up to 6.6x its stated load) and 1 of 122 at cap 100; ``builtin:uscoastal``
(1 h windows) 540 of 5,937 at cap 50 (up to 50x) and 133 of 2,981 at cap 100. At 200 and above neither log has a
cell split by entity hash. No spec can hold a single entity's load above the cap (its events must stay on one worker).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from geokernel.errors import BuildError
from geokernel.geo.quadtree import square_spans
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys
from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders.carving import carve_cells
from partitioner.builders.pour import Liquid
from partitioner.builders.region import Region
from partitioner.load.counts import Cells, Counts, Grid, Tiles


class HotSplit(NamedTuple):
    """What the hot step made of the hot cells.

    ``regions``: pieces of finer cells (solids, each within the cap); ``cells``: grid cells
    hotter than the cap; ``liquid``: cells to split by entity hash (poured later);
    ``taken``: indices of the grid cells this step handles (the carving leaves them out).
    """

    regions: list[Region]
    cells: int
    liquid: list[Liquid]
    taken: IntArray

    @property
    def hashed(self) -> int:
        """Cells split by entity hash."""
        return len(self.liquid)


def split_hot_cells(counts: Counts, grid: Grid, cap: float, also: IntArray | None = None,
                    only: IntArray | None = None) -> HotSplit:
    """Split every grid cell of ``counts`` with a load above ``cap`` (``grid`` is ``counts.grid()``).

    ``also``: indices of cold grid cells to split by entity hash as well (big cells that would
    leave workers short, see :func:`partitioner.builders.fresh.fresh_build`); ``only``: split just
    these hot cells (indices), not every hot cell.
    """
    hot = np.flatnonzero(grid.weight > cap) if only is None else np.asarray(only, dtype=np.int64)
    extra = np.zeros(0, dtype=np.int64) if also is None else np.setdiff1d(also, hot)
    taken = np.union1d(hot, extra).astype(np.int64)
    if len(taken) == 0:
        return HotSplit([], 0, [], taken)
    refined = counts.refinement_cells()
    tree = _Finer(refined) if len(refined.x) else None
    regions: list[Region] = []
    liquid: list[Liquid] = []
    qks = arrays_to_quadkeys(grid.x[hot], grid.y[hot], grid.zoom)
    for q, i in zip(qks, hot.tolist(), strict=True):
        pieces, hashed = _split_one(q, float(grid.weight[i]), (int(grid.x[i]), int(grid.y[i]), grid.zoom), tree, cap)
        regions += pieces
        liquid += [h._replace(cell=i) if h.quadkey == q else h for h in hashed]
    for q, i in zip(arrays_to_quadkeys(grid.x[extra], grid.y[extra], grid.zoom), extra.tolist(), strict=True):
        liquid.append(Liquid(q, float(grid.weight[i]), i))
    return HotSplit(regions, len(hot), liquid, taken)


class _Finer:
    """The refinement rows in quadtree (Morton) order: the rows under a cell are one run, found by two searches."""

    def __init__(self, cells: Cells) -> None:
        self.cells = cells
        self.top = int(cells.z.max())
        start, _ = square_spans(cells.x, cells.y, cells.z, self.top)
        self.order = np.argsort(start, kind="stable")
        self.start = start[self.order]

    def under(self, x: int, y: int, z: int) -> Cells:
        """The refinement rows strictly below tile ``(x, y, z)``."""
        lo, hi = square_spans(np.array([x]), np.array([y]), min(z, self.top), self.top)
        i0, i1 = np.searchsorted(self.start, [int(lo[0]), int(hi[0])])
        rows = self.order[i0:i1]
        c = self.cells
        rows = rows[c.z[rows] > z]
        return Cells(c.x[rows], c.y[rows], c.z[rows], c.weight[rows])


def _split_one(qk: str, load: float, tile: tuple[int, int, int], tree: _Finer | None, cap: float
               ) -> tuple[list[Region], list[Liquid]]:
    """Split one hot cell: by its finer rows when present, else by entity hash (a liquid cell)."""
    children = tree.under(*tile) if tree is not None else None
    if children is None or len(children.x) == 0:
        return [], [Liquid(qk, load)]
    sub = Counts.from_tiles(Tiles(children.x, children.y, children.z), children.weight, f"refinement of {qk!r}")
    grid = sub.grid()
    total = float(grid.weight.sum())
    if total <= 0:
        return [], [Liquid(qk, load)]
    scale = load / total
    return _split_finer(qk, sub, grid._replace(weight=grid.weight * scale), scale, cap)


def _split_finer(qk: str, sub: Counts, grid: Grid, scale: float, cap: float) -> tuple[list[Region], list[Liquid]]:
    """Regions of a hot cell's finer rows ``sub`` (``grid``: their cells scaled to the cell's load)."""
    hot = grid.weight > cap
    out: list[Region] = []
    liquid: list[Liquid] = []
    if hot.any():
        deeper = sub.refinement_cells()
        tree = _Finer(deeper._replace(weight=deeper.weight * scale)) if len(deeper.x) else None
        hot_qks = arrays_to_quadkeys(grid.x[hot], grid.y[hot], grid.zoom)
        for hq, i in zip(hot_qks, np.flatnonzero(hot).tolist(), strict=True):
            pieces, hashed = _split_one(hq, float(grid.weight[i]), (int(grid.x[i]), int(grid.y[i]), grid.zoom),
                                        tree, cap)
            out += pieces
            liquid += hashed
    out += carve_cells(grid.take(~hot & (grid.weight > 0)), cap, bridge_levels=0)
    # the parts of the hot cell with no finer rows still belong to it: list it so it has an owner
    if out:
        biggest = max(range(len(out)), key=lambda i: out[i].load)
        r = out[biggest]
        out[biggest] = Region((qk, *r.quadkeys), r.load)
    else:
        out.append(Region((qk,), 0.0))
    return out, liquid


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
                         f"of the cap {cap!r}")
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
