"""Gathering small regions by place: each worker's small regions become one run along the Hilbert curve.

Best-fit packing (:mod:`partitioner.builders.packing`) fills workers by load alone, so on sparse data a
worker's small regions (islands of load, a town or two each) come from all over the world: hundreds
of regions per worker that no coarser square can join. :func:`gather` keeps every worker's load
but hands the small regions out again in the order of the Hilbert curve through their first
cells: each worker takes the next run of the curve, so its islands lie near each other and a few
quadtree squares around them hold no one else's load (:mod:`partitioner.builders.territory`).

Notes
-----
* Only the regions passed as ``movable`` move; every other region keeps its worker.
* A worker takes the next regions of the curve until it reaches the small load it had (its
  *target*), within the cap; a region that does not fit is skipped (it goes to the next worker),
  looking at most :data:`LOOK_AHEAD` regions ahead. Each worker may overshoot its target by up to one
  small region, and the overshoots add up along the sweep, so a worker late in the sweep can end
  with less small load than it had (never more than the cap). The last worker takes what is left;
  what still does not fit goes to the worker with the most room, any worker (a new worker only if
  none has room and no smaller region can make way).
* The Hilbert curve (unlike the Z-order of quadkeys) never jumps: neighbours along it are
  neighbours on the map, and every quadtree square is one stretch of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from geokernel.geo.tiles import IntArray

LOOK_AHEAD = 256  # regions a worker looks past one that does not fit, for ones that do


def hilbert(x: IntArray, y: IntArray, zoom: int) -> IntArray:
    """Position of each tile ``(x, y)`` at ``zoom`` along the Hilbert curve through the ``2^zoom`` grid.

    Notes
    -----
    The classic bit-by-bit conversion, vectorised over the tiles (one pass per zoom level). Tiles
    next to each other along the curve share an edge; at zoom 0 every position is 0.
    """
    x = np.asarray(x, dtype=np.int64).copy()
    y = np.asarray(y, dtype=np.int64).copy()
    d = np.zeros(len(x), dtype=np.int64)
    n = np.int64(1) << zoom
    s = n >> 1
    while s > 0:
        rx = (x & s) > 0
        ry = (y & s) > 0
        d += s * s * ((3 * rx.astype(np.int64)) ^ ry.astype(np.int64))
        flip = ~ry & rx
        x = np.where(flip, n - 1 - x, x)
        y = np.where(flip, n - 1 - y, y)
        swap = ~ry
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        s >>= 1
    return d


def curve_keys(x: IntArray, y: IntArray, z: IntArray, top: int) -> IntArray:
    """Hilbert position at zoom ``top`` of the first (top-left) cell of each square ``(x, y, z)`` (``z <= top``)."""
    z = np.asarray(z, dtype=np.int64)
    return hilbert(np.asarray(x, dtype=np.int64) << (top - z), np.asarray(y, dtype=np.int64) << (top - z), top)


def gather(workers_of: Sequence[int], loads: Sequence[float], movable: Sequence[int], keys: Sequence[int],
           cap: float) -> list[int]:
    """Hand the ``movable`` regions out again along the curve, each worker keeping about its load.

    Parameters
    ----------
    workers_of : sequence of int
        Worker of every region (``0 .. n - 1``).
    loads : sequence of float
        Load of every region.
    movable : sequence of int
        Indices of the regions that may move (small whole regions).
    keys : sequence of int
        Position along the curve of every region (of its first cell).
    cap : float
        No worker passes this load (unless it already did).

    Returns
    -------
    list of int
        The worker of every region; workers keep their indices (one more only if the regions
        left at the end fit nowhere).

    Notes
    -----
    Workers take their runs in the order of the curve position of their heaviest fixed region
    (their *home*; a worker without one by its first small region), so a run tends to start near the
    home. In the sweep, a worker with no small load takes none (leftovers may still go to it).
    """
    out = list(workers_of)
    if not movable:
        return out
    n = max(out) + 1
    wload = [0.0] * n
    target = [0.0] * n
    home_load = [-1.0] * n
    home = [-1] * n
    moving = set(movable)
    for i, (w, ld) in enumerate(zip(out, loads, strict=True)):
        wload[w] += ld
        if i in moving:
            target[w] += ld
        elif ld > home_load[w]:
            home_load[w], home[w] = ld, keys[i]
    for i in movable:  # a worker without a fixed region is at home where its first small region is
        w = out[i]
        if home_load[w] < 0 and (home[w] < 0 or keys[i] < home[w]):
            home[w] = keys[i]
    room = [cap - (wload[w] - target[w]) for w in range(n)]
    order = [movable[k] for k in np.argsort(np.asarray([keys[i] for i in movable], dtype=np.int64), kind="stable")]
    sweep = [w for w in sorted(range(n), key=lambda w: (home[w], w)) if target[w] > 0]
    left = _sweep(order, loads, sweep, target, room, out)
    _place_left(left, loads, room, out, cap, movable)
    return out


def _sweep(order: list[int], loads: Sequence[float], sweep: list[int], target: list[float], room: list[float],
           out: list[int]) -> list[int]:
    """Give each worker of ``sweep`` the next run of ``order``; return the regions no worker took."""
    carry: list[int] = []  # regions skipped by earlier workers, in curve order, taken first
    pos = 0
    for k, w in enumerate(sweep):
        last = k == len(sweep) - 1
        got = 0.0
        skipped: list[int] = []
        queue = carry
        carry_at = 0
        while got < target[w] or last:
            if carry_at < len(queue):
                i = queue[carry_at]
                carry_at += 1
            elif pos < len(order):
                i = order[pos]
                pos += 1
            else:
                break
            ld = loads[i]
            if got + ld > room[w] + 1e-9:
                skipped.append(i)
                if len(skipped) > LOOK_AHEAD:
                    break
                continue
            out[i] = w
            got += ld
            if not last and got >= target[w]:
                break
        room[w] -= got
        carry = skipped + queue[carry_at:]
    return carry + order[pos:]


def _place_left(left: list[int], loads: Sequence[float], room: list[float], out: list[int], cap: float,
                movable: Sequence[int]) -> None:
    """Put each region left over on the worker with the most room (largest first).

    Where none has room, a smaller movable region makes way: it leaves a worker whose room and its load
    together take the region, and is placed in turn (it ends: every step places more load than it takes back).
    Only when no region can make way does a new worker start.
    """
    on: dict[int, list[int]] = {}
    waiting = set(left)
    for j in movable:
        if j not in waiting:
            on.setdefault(out[j], []).append(j)
    pending = sorted(left, key=lambda i: loads[i])
    while pending:
        i = pending.pop()
        w = max(range(len(room)), key=room.__getitem__)
        if room[w] + 1e-9 < loads[i]:
            way = _make_way(loads[i], loads, room, on)
            if way is None:
                room.append(cap)
                w = len(room) - 1
            else:
                w, j = way
                on[w].remove(j)
                room[w] += loads[j]
                pending.append(j)
        out[i] = w
        room[w] -= loads[i]
        on.setdefault(w, []).append(i)


def _make_way(need: float, loads: Sequence[float], room: list[float], on: dict[int, list[int]]
              ) -> tuple[int, int] | None:
    """``(worker, region)``: the smallest movable region lighter than ``need`` whose leaving makes room for it."""
    best: tuple[float, int, int] | None = None
    for w, regions in on.items():
        short = need - room[w] - 1e-9
        for j in regions:
            ld = loads[j]
            if short <= ld < need and (best is None or ld < best[0]):
                best = (ld, w, j)
    return None if best is None else (best[1], best[2])
