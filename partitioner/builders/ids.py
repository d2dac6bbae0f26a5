"""Partition and worker ids: one allocator for fresh ids, and ids kept from the previous spec.

Ids read ``p0001`` (partitions) and ``w0001`` (workers). A fresh id is one above the
highest number in use, so an id that leaves a spec is never handed to something else
while the previous spec still names it. :func:`match_ids` gives a fresh build the ids of
the previous spec it shares the most load with (the sticky ids that keep workers and
their state in place); what is left gets fresh ids.

Notes
-----
The number of an id is everything after its first character when that is all digits
(``p0012`` and ``w0012`` are both 12); other ids (hand-written specs) never block a number.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from geokernel.geo.tiles import quadkeys_to_arrays
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.builders.region import Placement

PARTITION_PREFIX = "p"
WORKER_PREFIX = "w"

K = TypeVar("K")


@dataclass(frozen=True)
class Ids:
    """The id of each region (``partitions``, per region) and of each worker (``workers``, per worker index)."""

    partitions: tuple[str, ...]
    workers: tuple[str, ...]


def next_number(ids: Iterable[str]) -> int:
    """One above the highest id number in ``ids`` (1 when there is none)."""
    nums = [int(i[1:]) for i in ids if len(i) > 1 and i[1:].isdigit()]
    return max(nums, default=0) + 1


class IdAllocator:
    """Hands out fresh ids ``<prefix>NNNN``, counting up from one above the highest id ``taken``.

    Examples
    --------
    >>> new = IdAllocator("p", ["p0003", "p0007"])
    >>> new(), new()
    ('p0008', 'p0009')
    """

    def __init__(self, prefix: str, taken: Iterable[str] = ()) -> None:
        self._prefix = prefix
        self._taken = {t for t in taken if t}
        self._next = next_number(self._taken)

    def __call__(self) -> str:
        while True:
            ident = f"{self._prefix}{self._next:04d}"
            self._next += 1
            if ident not in self._taken:
                self._taken.add(ident)
                return ident

    def take(self, n: int) -> tuple[str, ...]:
        """``n`` fresh ids in order."""
        return tuple(self() for _ in range(n))


def fill_blanks(ids: Sequence[str], prefix: str, taken: Iterable[str] = ()) -> tuple[str, ...]:
    """Return ``ids`` with each blank (``""``) replaced by a fresh id, in order.

    Fresh ids count up from one above every id in ``taken`` and in ``ids``.
    """
    new = IdAllocator(prefix, [*taken, *ids])
    return tuple(i or new() for i in ids)


def fresh_ids(placement: Placement, order: Sequence[int], n_workers: int) -> Ids:
    """Ids of a build with no previous spec: regions numbered in ``order``, workers by index."""
    pids = [""] * len(placement.regions)
    new = IdAllocator(PARTITION_PREFIX)
    for i in order:
        pids[i] = new()
    return Ids(tuple(pids), IdAllocator(WORKER_PREFIX).take(n_workers))


def match_ids(previous: Spec, placement: Placement) -> Ids:
    """Give fresh regions and workers the previous ids they share the most load with.

    Each region's load is spread evenly over its listed quadkeys, which are located in
    ``previous``; a previous id goes to the region (worker) sharing the most load with it,
    largest overlaps first, each id once. Regions and workers left over get fresh ids.
    """
    prev_parts = previous.partitions
    overlap, woverlap = _overlaps(previous, placement)
    claimed = _claim(overlap, len(placement.regions))
    ids = [prev_parts[o].id if o is not None else "" for o in claimed]
    wids = [w or "" for w in _claim(woverlap, placement.worker_count)]
    return Ids(fill_blanks(ids, PARTITION_PREFIX, (p.id for p in prev_parts)),
               fill_blanks(wids, WORKER_PREFIX, (w.id for w in previous.workers)))


def _overlaps(previous: Spec, placement: Placement
              ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, str], float]]:
    """Load shared by (region, previous partition index) and by (worker index, previous worker id)."""
    regions, workers_of = placement.regions, placement.workers_of
    prev_parts = previous.partitions
    members = [(r_i, q, r.load / len(r.quadkeys)) for r_i, r in enumerate(regions) for q in r.quadkeys if q]
    overlap: dict[tuple[int, int], float] = {}
    woverlap: dict[tuple[int, str], float] = {}
    index = SpecIndex(previous)  # first: a previous spec without a catch-all is an error even with no members
    if not members:
        return overlap, woverlap
    region_of = np.array([m[0] for m in members], dtype=np.int64)
    share = np.array([m[2] for m in members], dtype=np.float64)
    owners = index.locate_tiles(*quadkeys_to_arrays([m[1] for m in members]))
    keep = ~np.isin(owners, index.catch_all_shares)
    pair = region_of[keep] * len(prev_parts) + owners[keep]
    uniq, inv = np.unique(pair, return_inverse=True)
    sums = np.bincount(inv, weights=share[keep])
    for code, load in zip(uniq.tolist(), sums.tolist(), strict=True):
        r_i, o = divmod(code, len(prev_parts))
        overlap[(r_i, o)] = load
        key = (workers_of[r_i], prev_parts[o].worker)
        woverlap[key] = woverlap.get(key, 0.0) + load
    return overlap, woverlap


def _claim(overlap: dict[tuple[int, K], float], n: int) -> list[K | None]:
    """For items ``0 .. n-1``: the key each shares the most load with, largest overlaps first, each key once."""
    out: list[K | None] = [None] * n
    taken: set[K] = set()
    for (k, key), _ in sorted(overlap.items(), key=lambda kv: -kv[1]):
        if out[k] is None and key not in taken:
            out[k] = key
            taken.add(key)
    return out
