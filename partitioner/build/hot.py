"""Hot cells: grid cells with more load than one worker may carry (compact strategy, step 1).

A hot cell is split into its finer cells when the counts carry refinement rows under
it (recursively: a finer cell that is still hot is split again), else across several
workers by entity hash (:func:`hash_split`: full shares of exactly the cap plus one
remainder share that packs with other work).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from partitioner.build.carving import carve_cells
from partitioner.build.region import Region
from partitioner.counts import Counts, Grid, counts_from_pairs
from partitioner.errors import BuildError
from partitioner.spec import HASH_BUCKETS
from partitioner.tiles import arrays_to_quadkeys


class HotSplit(NamedTuple):
    """The regions the hot cells became, how many cells were hot, and how many of them were hash-split."""

    regions: list[Region]
    cells: int
    hashed: int


def split_hot_cells(counts: Counts, grid: Grid, cap: float) -> HotSplit:
    """Split every grid cell of ``counts`` with a load above ``cap`` (``grid`` is ``counts.grid()``)."""
    hot = np.nonzero(grid.weight > cap)[0]
    if len(hot) == 0:
        return HotSplit([], 0, 0)
    refinement = counts.refinement()
    qks = arrays_to_quadkeys(grid.x[hot], grid.y[hot], grid.zoom)
    regions: list[Region] = []
    hashed = 0
    for q, load in zip(qks, grid.weight[hot], strict=True):
        pieces = _split_one(q, float(load), refinement, cap)
        hashed += sum(1 for p in pieces if p.hash_range is not None and p.hash_range[0] == 0)
        regions += pieces
    return HotSplit(regions, len(hot), hashed)


def _split_one(qk: str, load: float, refinement: dict[str, float], cap: float) -> list[Region]:
    """Split one hot cell: by its finer rows when present, else by entity hash."""
    children = {q: w for q, w in refinement.items() if q.startswith(qk) and len(q) > len(qk)}
    if children:
        sub = counts_from_pairs(sorted(children.items()), source=f"refinement of {qk!r}")
        grid = sub.grid()
        scale = load / float(grid.weight.sum()) if grid.weight.sum() > 0 else 0.0
        if scale > 0:
            return _split_finer(qk, sub, grid._replace(weight=grid.weight * scale), scale, cap)
    return hash_split(qk, load, cap)


def _split_finer(qk: str, sub: Counts, grid: Grid, scale: float, cap: float) -> list[Region]:
    """Regions of a hot cell's finer rows ``sub`` (``grid``: their cells scaled to the cell's load)."""
    hot = grid.weight > cap
    out: list[Region] = []
    if hot.any():
        deeper = {q: w * scale for q, w in sub.refinement().items()}
        hot_qks = arrays_to_quadkeys(grid.x[hot], grid.y[hot], grid.zoom)
        for hq, hl in zip(hot_qks, grid.weight[hot], strict=True):
            out += _split_one(hq, float(hl), deeper, cap)
    out += carve_cells(grid.take(~hot & (grid.weight > 0)), cap, bridge_levels=0)
    # the parts of the hot cell with no finer rows still belong to it: list it so it has an owner
    if out:
        biggest = max(range(len(out)), key=lambda i: out[i].load if out[i].hash_range is None else -1.0)
        if out[biggest].hash_range is None:
            r = out[biggest]
            out[biggest] = Region((qk, *r.quadkeys), r.load)
        else:
            out.append(Region((qk,), 0.0))
    return out


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
