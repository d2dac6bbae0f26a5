"""The fast path's delta: move (or split) only the surging cells of a signal, built on the newest published spec.

A router's :class:`~geokernel.contracts.surge.SurgeSignal` names a worker heading past its cap and the cells that took
it there. :func:`relieve` takes the newest published spec (``desired``, which may already be newer than the spec the
signal was measured under) and, for each cell, steepest first:

1. **projects** the cell to when the window path can take over (``reach_s``: its snapshot-to-live latency and a
   window), ``now + slope x reach_s``, at most ``fill`` x the cap; a cell whose load now is already more (a crowd
   bigger than one worker shows that in a later signal) is projected only as far as the signal looked (its
   ``horizon_s``), and split for that;
2. **keeps it** where the newest spec has room for that projection on the cell's worker (a spec published after
   the signal's may have moved it already), where the cell is split by entity hash (its shares are sized by the
   window path), or where it has its worker nearly to itself (``ALONE`` of the cap besides it) and its load now fits
   ``fill``: another worker would give it no more room;
3. else **moves it**, as a partition of its own listing the cell (its old partition keeps the rest: the longest
   prefix wins), to the fullest other worker with room for the projection within ``fill`` (best fit; a worker's
   load is the larger of what the spec planned and what the signal measured), else to a new worker; a cell whose
   load now is more than ``fill`` x the cap is split by entity hash into equal shares, the first kept on its worker
   when it has that worker nearly to itself, the others on workers with room or new ones.

Every other partition and worker keeps its id and place, so a carry swap moves only the surging cells. Each moved cell
is also returned as a surge to reserve (the declared crowds' form, :class:`~partitioner.control.crowds.DeclaredCrowd`,
``hold_s`` long): the window path sizes for it as for a declared crowd until its own windows show the crowd, so the
next spec it builds, on windows from before the surge, does not pack the cell back.

Notes
-----
* Listings finer than the cell inside it that belong to the worker the cell leaves are dropped from their partitions
  (the moved cell's listing covers them); those of other workers stay (the longest prefix wins).
* The spec it returns has no ``source.window_end``: it was built from no snapshot, and the deployer records no
  snapshot-to-live sample for it (the window path forecasts for that latency).
* None when no cell needs to move (the reasons say why).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from geokernel.contracts.surge import SurgeCell, SurgeSignal
from geokernel.geo.tiles import bounds, quadkey_to_tile
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec, Worker, shard_hash_key
from partitioner.builders.ids import PARTITION_PREFIX, WORKER_PREFIX, IdAllocator
from partitioner.control.crowds import DeclaredCrowd

#: A cell has its worker nearly to itself when the worker carries at most this share of the cap besides it.
ALONE = 0.1


@dataclass(frozen=True)
class Move:
    """One cell moved: from which worker to which (several: split by hash), at what projected load per window."""

    quadkey: str
    source: str
    targets: tuple[str, ...]
    load: float
    new_workers: int


@dataclass(frozen=True, eq=False)
class Relief:
    """What :func:`relieve` decided: the spec to publish (None: nothing to move), the moves, the surges to reserve."""

    spec: Spec | None
    moves: tuple[Move, ...]
    reasons: tuple[str, ...]
    surges: tuple[DeclaredCrowd, ...] = ()


@dataclass
class _Plan:
    """The spec being changed: partitions by id (in order), worker loads, ids handed out."""

    parts: dict[str, Partition]
    loads: dict[str, float]  # per worker, the larger of its plan and what the signal measured (targets' room)
    measured: dict[str, float]  # per worker the signal measured, that load
    new_part: IdAllocator
    new_worker: IdAllocator
    added: list[str] = field(default_factory=list)

    def put(self, p: Partition) -> None:
        self.parts[p.id] = p

    def set_load(self, pid: str, load: float) -> None:
        p = self.parts[pid]
        self.parts[pid] = Partition(p.id, p.worker, p.quadkeys, max(0.0, load), p.hash_range)


def relieve(desired: Spec, signal: SurgeSignal, *, fill: float, reach_s: float, hold_s: float, now: float,
            stream_name: str | None = None, taken: Iterable[str] = ()) -> Relief:
    """Move the signal's surging cells off the worker they overload, on ``desired`` (see the module docstring).

    Parameters
    ----------
    desired : Spec
        The newest published spec: the relief is its next version (``desired.version + 1``).
    signal : SurgeSignal
    fill : float
        The share of the cap a worker may be planned to (the window path's fill), in (0, 1].
    reach_s, hold_s : float
        How far each cell is projected, and how long it is reserved for the window path (seconds, >= 0).
    now : float
        Epoch seconds (the spec's ``created_at``).
    stream_name : str, optional
        The relief version's geo stream.
    taken : iterable of str
        Worker ids a new worker must not take (the live spec's, when older than ``desired``).

    Returns
    -------
    Relief
    """
    if not 0 < fill <= 1 or reach_s < 0 or hold_s < 0:
        raise ValueError(f"fill must be in (0, 1] and reach_s, hold_s >= 0, got {fill!r}, {reach_s!r}, {hold_s!r}")
    room = fill * desired.max_load
    measured = dict(signal.loads) if signal.loads else {}
    plan = _Plan({p.id: p for p in desired.partitions},
                 {w.id: max(w.load, measured.get(w.id, 0.0)) for w in desired.workers}, measured,
                 IdAllocator(PARTITION_PREFIX, [p.id for p in desired.partitions]),
                 IdAllocator(WORKER_PREFIX, [*(w.id for w in desired.workers), *measured, *taken]))
    index = SpecIndex(desired)
    moves: list[Move] = []
    reasons: list[str] = []
    for cell in signal.cells:
        load = max(cell.now, cell.projected(signal.horizon_s) if cell.now > room else
                   min(cell.projected(reach_s), room))
        why = _keep(index, desired, plan, cell, load, room)
        if why:
            reasons.append(why)
            continue
        moves.append(_move(index, desired, plan, cell, load, room))
    head = (f"surge on {signal.worker} of v{signal.version} (measured {_pct(signal.measured, signal.cap)}, projected "
            f"{_pct(signal.projected, signal.cap)} in {signal.horizon_s:.0f} s)")
    if not moves:
        return Relief(None, (), (f"{head}: nothing to move on v{desired.version}: " + "; ".join(reasons),))
    spec = _spec(desired, plan, now, stream_name, signal, moves)
    lines = [f"move {m.quadkey} ({_pct(m.load, desired.max_load)} projected) from {m.source} to "
             f"{', '.join(m.targets)}" + (f" ({m.new_workers} new)" if m.new_workers else "") for m in moves]
    crowds = tuple(_surge(m, signal, now, hold_s) for m in moves)
    return Relief(spec, tuple(moves), (f"{head}: " + "; ".join(lines + reasons),), crowds)


def _keep(index: SpecIndex, desired: Spec, plan: _Plan, cell: SurgeCell, load: float, room: float) -> str:
    """Why ``cell`` stays where ``desired`` has it ("" when it must move)."""
    t = quadkey_to_tile(cell.quadkey)
    owner = int(index.catch_all_as_group(index.locate_groups_xy(np.array([t.x]), np.array([t.y]), t.z))[0])
    if owner < 0:
        return f"{cell.quadkey} is split by entity hash (its shares are the window path's)"
    part = desired.partitions[owner]
    src = part.worker
    besides = _besides(desired, plan, part, cell)
    if besides + load <= room:
        return f"{cell.quadkey} fits on {src} ({_pct(besides + load, desired.max_load)})"
    if besides <= ALONE * desired.max_load and cell.now <= room:
        return f"{cell.quadkey} has {src} to itself ({_pct(cell.now, desired.max_load)} now)"
    return ""


def _besides(desired: Spec, plan: _Plan, part: Partition, cell: SurgeCell) -> float:
    """What the cell's worker carries besides the cell: the larger of its plan without the cell (the partition's load
    when it lists the cell alone, a relief's or a reservation's projection; else the cell's load before the surge)
    and what the signal measured on it less the cell now (when the signal measured that worker)."""
    src = part.worker
    planned = desired.worker(src).load - (part.load if part.quadkeys == (cell.quadkey,) else cell.base)
    measured = plan.measured.get(src)
    return max(0.0, planned, (measured - cell.now) if measured is not None else 0.0)


def _alone(desired: Spec, plan: _Plan, part: Partition, cell: SurgeCell) -> bool:
    """Does the cell's worker carry at most :data:`ALONE` of the cap besides ``cell``?"""
    return _besides(desired, plan, part, cell) <= ALONE * desired.max_load


def _move(index: SpecIndex, desired: Spec, plan: _Plan, cell: SurgeCell, load: float, room: float) -> Move:
    """Take ``cell`` out of its partition (and its worker's finer listings inside it) and place it."""
    t = quadkey_to_tile(cell.quadkey)
    owner = int(index.locate_groups_xy(np.array([t.x]), np.array([t.y]), t.z)[0])
    src_part = desired.partitions[owner]
    src = src_part.worker
    lab, x, y, z = index.listed
    inside = np.flatnonzero((z > t.z) & ((x >> np.maximum(z - t.z, 0)) == t.x) & ((y >> np.maximum(z - t.z, 0)) == t.y))
    gone = {(int(lab[i]), _qk(desired, int(lab[i]), int(x[i]), int(y[i]), int(z[i]))) for i in inside.tolist()
            if desired.partitions[int(lab[i])].worker == src and desired.partitions[int(lab[i])].hash_range is None}
    for pi, qk in sorted(gone):
        p = plan.parts[desired.partitions[pi].id]
        rest = tuple(q for q in p.quadkeys if q != qk)
        if rest:
            plan.put(Partition(p.id, p.worker, rest, p.load, p.hash_range))
        else:
            del plan.parts[p.id]
    shares = max(1, math.ceil(load / room)) if cell.now > room else 1
    stay = shares > 1 and _alone(desired, plan, src_part, cell)
    cur = plan.parts.get(src_part.id)
    alone = cur is not None and cur.quadkeys == (cell.quadkey,) and cur.hash_range is None
    if cur is not None and not alone:
        rest = tuple(q for q in cur.quadkeys if q != cell.quadkey)
        plan.put(Partition(cur.id, cur.worker, rest or cur.quadkeys, max(0.0, cur.load - cell.base), cur.hash_range))
    plan.loads[src] = max(0.0, plan.loads[src] - cell.now)
    edges = [k * HASH_BUCKETS // shares for k in range(shares + 1)]
    targets, fresh = [], 0
    for k in range(shares):
        piece = load / shares if shares > 1 else load
        host: str | None = src if stay and k == 0 else _best_fit(plan.loads, piece, room, exclude=src)
        if host is None:
            host = plan.new_worker()
            plan.loads[host] = 0.0
            plan.added.append(host)
            fresh += 1
        plan.loads[host] += piece
        pid = src_part.id if alone and k == 0 else plan.new_part()
        plan.put(Partition(pid, host, (cell.quadkey,), piece, (edges[k], edges[k + 1]) if shares > 1 else None))
        targets.append(host)
    return Move(cell.quadkey, src, tuple(t for t in targets if t != src) or (src,), load, fresh)


def _qk(desired: Spec, pi: int, x: int, y: int, z: int) -> str:
    """The quadkey partition ``pi`` lists for tile (x, y, z)."""
    for q in desired.partitions[pi].quadkeys:
        if len(q) == z:
            t = quadkey_to_tile(q)
            if t.x == x and t.y == y:
                return q
    raise ValueError(f"partition {desired.partitions[pi].id!r} lists no tile ({x!r}, {y!r}, {z!r})")


def _best_fit(loads: Mapping[str, float], piece: float, room: float, *, exclude: str) -> str | None:
    """The fullest worker (other than ``exclude``) that stays within ``room`` with ``piece`` more, None if none."""
    fits = [(v, w) for w, v in loads.items() if w != exclude and v + piece <= room]
    return max(fits)[1] if fits else None


def _spec(desired: Spec, plan: _Plan, now: float, stream_name: str | None, signal: SurgeSignal,
          moves: list[Move]) -> Spec:
    """The relief version: ``desired``'s partitions as changed, worker loads summed, shard keys for the new count."""
    parts = tuple(plan.parts.values())
    sums: dict[str, float] = {}
    for p in parts:
        sums[p.worker] = sums.get(p.worker, 0.0) + p.load
    ids = [w.id for w in desired.workers if w.id in sums] + [w for w in plan.added if w in sums]
    old = {w.id: w for w in desired.workers}
    keyed = len(ids) != len(desired.workers) or any(w not in old for w in ids)
    workers = tuple(Worker(w, sums[w], shard_hash_key(k, len(ids)) if keyed else old[w].hash_key,
                           () if keyed else old[w].hash_keys) for k, w in enumerate(ids))
    source: dict[str, Any] = {k: v for k, v in desired.source.items() if k != "window_end"}
    source["relief"] = {"signal": signal.key, "worker": signal.worker, "measured_under": signal.version,
                        "cells": [m.quadkey for m in moves], "at": signal.at}
    return desired.replace(version=desired.version + 1, previous_version=desired.version, partitions=parts,
                           workers=workers, created_at=datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           stream_name=stream_name, source=source)


def _surge(m: Move, signal: SurgeSignal, now: float, hold_s: float) -> DeclaredCrowd:
    """The moved cell as a surge for the window path to reserve (a declared crowd at the cell's centre)."""
    b = bounds(quadkey_to_tile(m.quadkey))
    return DeclaredCrowd(f"surge {m.quadkey} (v{signal.version} {signal.worker})", 0.5 * (b.south + b.north),
                         0.5 * (b.west + b.east),
                         now, now + max(hold_s, 1.0), m.load / signal.window_s)


def merge_surges(kept: Iterable[DeclaredCrowd], new: Iterable[DeclaredCrowd], now: float) -> tuple[DeclaredCrowd, ...]:
    """The surges to reserve from ``now``: ``kept`` without those that ended or that a ``new`` one replaces (the same
    cell: the same point), then ``new``.

    Notes
    -----
    A cell relieved twice (signalled under two versions) is reserved once, at its latest projection: declared crowds
    on one cell add up, and two reservations of one crowd made the window path split it over two workers (a local
    run, 2026-12-07).
    """
    fresh = tuple(new)
    points = {(c.lat, c.lon) for c in fresh}
    return (*(c for c in kept if c.end > now and (c.lat, c.lon) not in points), *fresh)


def _pct(load: float, cap: float) -> str:
    return f"{100.0 * load / cap:.0f}%" if cap > 0 else "-"
