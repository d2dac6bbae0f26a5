"""The deploy plan: what a swap from spec n to spec n+1 keeps, starts and stops (pure: no AWS).

:func:`plan_swap` compares two specs slot by slot (a slot is a worker id; the sticky partitioner keeps
ids from one version to the next):

* **kept** slots are in both specs. In ``carry`` mode the process holding slot ``w`` in version n also
  claims ``v(n+1)#w`` and loads only what the slot gains; each :class:`SlotChange` lists the cells it
  gains and loses and the partitions it gains and loses.
* **started** slots get a fresh worker: the slots only in n+1 (``carry``), or every slot of n+1 (``whole``).
* **stopped** slots' workers drain n and exit: the slots only in n (``carry``), or every slot of n (``whole``).

A *cell* is one entry of a spec's listing: a quadkey, plus the hash range of a hot cell split by entity
(label ``<quadkey>/<lo>-<hi>``; the catch-all ``""`` is labelled ``*``). An entry of n+1 **moves** when
some part of its area had another worker in n: the worker of the longest entry of n that is a prefix of
it (the owner of everything the entry covers that n lists no finer), or of any entry of n listed inside
it that n+1 does not carve out with a finer entry of its own, among the shares whose hash ranges overlap.
So a region that is only re-listed with other squares (coalesced or split into children) by the same
worker does not move.

The plan is stored in the control table as ``pk="plan"`` (:func:`plan_item`: the record
:class:`~geokernel.contracts.plan.PlanItem`, read back by the controller and the local report) with a
:class:`~geokernel.contracts.plan.PlanStatus`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.plan import PlanItem, PlanStatus, SwapMode
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec
from lambdas.runtime.config import parse_swap_mode

FULL_RANGE = (0, HASH_BUCKETS)


@dataclass(frozen=True)
class Cell:
    """One listed entry of a spec: a quadkey and the entity-hash range it covers (all of it unless split)."""

    quadkey: str
    lo: int = 0
    hi: int = HASH_BUCKETS

    @property
    def label(self) -> str:
        base = self.quadkey or "*"
        return base if (self.lo, self.hi) == FULL_RANGE else f"{base}/{self.lo}-{self.hi}"

    def overlaps(self, other: Cell) -> bool:
        return self.lo < other.hi and other.lo < self.hi


@dataclass(frozen=True)
class SlotChange:
    """A slot of both specs: what its worker gains and loses (cell labels and partition ids, sorted)."""

    worker_id: str
    gains: tuple[str, ...] = ()
    losses: tuple[str, ...] = ()
    gained_partitions: tuple[str, ...] = ()
    lost_partitions: tuple[str, ...] = ()

    @property
    def unchanged(self) -> bool:
        return not (self.gains or self.losses or self.gained_partitions or self.lost_partitions)


@dataclass(frozen=True)
class DeployPlan:
    """A swap from ``from_version`` (None on the first deploy) to ``to_version``; see the module docstring."""

    from_version: int | None
    to_version: int
    mode: SwapMode
    kept: tuple[SlotChange, ...]
    started: tuple[str, ...]
    stopped: tuple[str, ...]
    moved_cells: tuple[str, ...]
    old_slots: int
    new_slots: int

    @property
    def kept_ids(self) -> tuple[str, ...]:
        return tuple(k.worker_id for k in self.kept)

    @property
    def peak_workers(self) -> int:
        """Workers running while both versions are up: every old one plus the started ones."""
        return self.old_slots + len(self.started)

    def summary(self) -> str:
        return (f"v{self.from_version}->v{self.to_version} ({self.mode}): {len(self.kept)} kept, "
                f"{len(self.started)} started, {len(self.stopped)} stopped, {len(self.moved_cells)} cells moved")


def spec_cells(spec: Spec) -> dict[Cell, str]:
    """Every listed entry of ``spec`` and its worker."""
    out: dict[Cell, str] = {}
    for p in spec.partitions:
        for q in p.quadkeys:
            out[_cell(p, q)] = p.worker
    return out


def _cell(p: Partition, quadkey: str) -> Cell:
    lo, hi = p.hash_range if p.hash_range is not None else FULL_RANGE
    return Cell(quadkey, lo, hi)


class _Listing:
    """One spec's entries by quadkey: longest listed prefix, shares of a quadkey, entries listed inside one."""

    def __init__(self, cells: Mapping[Cell, str]) -> None:
        self.by_quadkey: dict[str, list[tuple[Cell, str]]] = {}
        for cell, worker in cells.items():
            self.by_quadkey.setdefault(cell.quadkey, []).append((cell, worker))
        self._sorted = sorted(self.by_quadkey)

    def longest_prefix(self, quadkey: str) -> str:
        """The longest listed quadkey that is a prefix of (or equal to) ``quadkey`` (the catch-all at worst)."""
        for n in range(len(quadkey), -1, -1):
            if quadkey[:n] in self.by_quadkey:
                return quadkey[:n]
        return ""

    def inside(self, quadkey: str) -> Iterable[str]:
        """Listed quadkeys strictly inside ``quadkey`` (they start with it and are longer)."""
        keys = self._sorted
        # walk from the first key after ``quadkey`` (no slice: copying the sorted tail on every call made a swap's
        # plan quadratic in the listed entries, about 525 s of CPU at 4M quadkeys, bench/bench_spec_memory.py)
        for i in range(bisect.bisect_right(keys, quadkey), len(keys)):
            if not keys[i].startswith(quadkey):
                return
            yield keys[i]

    def workers(self, quadkey: str, cell: Cell) -> set[str]:
        return {w for c, w in self.by_quadkey.get(quadkey, []) if c.overlaps(cell)}

    def has_inside(self, quadkey: str) -> bool:
        i = bisect.bisect_right(self._sorted, quadkey)
        return i < len(self._sorted) and self._sorted[i].startswith(quadkey)


def _covered(quadkey: str, listings: Sequence[_Listing], strict: bool) -> bool:
    """True when entries of ``listings`` inside ``quadkey`` (or at it, unless ``strict``) cover its whole square."""
    if not strict and any(quadkey in lst.by_quadkey for lst in listings):
        return True
    if not any(lst.has_inside(quadkey) for lst in listings):
        return False
    return all(_covered(quadkey + d, listings, strict=False) for d in "0123")


def _other_owners(cell: Cell, here: _Listing, there: _Listing) -> set[str]:
    """Workers that own, in the other spec (``there``), some part of what ``cell`` owns in its own (``here``).

    The part ``cell`` owns is its square minus the entries ``here`` lists inside it. In ``there`` that part
    belongs to the longest listed prefix of the square, and to the entries listed inside the square whose
    own longest prefix ``here`` is the square itself (the others fall in a finer entry of ``here``). An owner
    counts only where some area is left: not when the entries either spec lists inside the square (or inside
    the inner entry) cover it completely.
    """
    q = cell.quadkey
    owners = set() if _covered(q, (here, there), strict=True) else there.workers(there.longest_prefix(q), cell)
    for inner in there.inside(q):
        if here.longest_prefix(inner) == q and not _covered(inner, (here, there), strict=True):
            owners |= there.workers(inner, cell)
    return owners


def _moved(cells: Mapping[Cell, str], here: _Listing, there: _Listing) -> dict[Cell, str]:
    """The entries of ``cells`` some part of which had another worker in the other spec."""
    return {c: w for c, w in cells.items() if _other_owners(c, here, there) - {w}}


def _by_worker(cells: Iterable[tuple[Cell, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c, w in cells:
        out.setdefault(w, []).append(c.label)
    return {w: sorted(labels) for w, labels in out.items()}


def plan_swap(old: Spec | None, new: Spec, mode: SwapMode | str = SwapMode.CARRY) -> DeployPlan:
    """Plan the swap from ``old`` (None: nothing deployed yet) to ``new``; see the module docstring.

    Parameters
    ----------
    old, new : Spec
    mode : SwapMode or str
        ``carry`` or ``whole``.

    Returns
    -------
    DeployPlan

    Notes
    -----
    A first deploy starts every slot and moves nothing. In ``whole`` mode nothing is kept (every slot of
    ``new`` starts, every slot of ``old`` stops) but the cells that change worker are the same as in
    ``carry`` mode: they describe the specs, not the fleet.
    """
    swap = mode if isinstance(mode, SwapMode) else parse_swap_mode(mode, "swap mode")
    new_ids = [w.id for w in new.workers]
    if old is None:
        return DeployPlan(None, new.version, swap, (), tuple(new_ids), (), (), 0, len(new_ids))
    old_ids = [w.id for w in old.workers]
    old_cells, new_cells = spec_cells(old), spec_cells(new)
    old_listing, new_listing = _Listing(old_cells), _Listing(new_cells)
    gained = _moved(new_cells, new_listing, old_listing)
    lost = _moved(old_cells, old_listing, new_listing)
    moved = tuple(sorted(c.label for c in gained))
    if swap is SwapMode.WHOLE:
        return DeployPlan(old.version, new.version, swap, (), tuple(new_ids), tuple(old_ids), moved, len(old_ids),
                          len(new_ids))
    gains, losses = _by_worker(gained.items()), _by_worker(lost.items())
    old_set = set(old_ids)
    kept = tuple(_slot_change(w, old, new, gains.get(w, []), losses.get(w, [])) for w in new_ids if w in old_set)
    new_set = set(new_ids)
    return DeployPlan(old.version, new.version, swap, kept, tuple(w for w in new_ids if w not in old_set),
                      tuple(w for w in old_ids if w not in new_set), moved, len(old_ids), len(new_ids))


def _slot_change(wid: str, old: Spec, new: Spec, gains: Sequence[str], losses: Sequence[str]) -> SlotChange:
    before = {p.id for p in old.partitions_of(wid)}
    after = {p.id for p in new.partitions_of(wid)}
    return SlotChange(wid, tuple(gains), tuple(losses), tuple(sorted(after - before)), tuple(sorted(before - after)))


def plan_from_item(item: Mapping[str, Any]) -> DeployPlan:
    """The plan a ``pk="plan"`` item records (:class:`~geokernel.contracts.plan.PlanItem`), without the specs:
    slot ids and counts (no cell labels).

    Raises
    ------
    ValueError
        If the item lacks a field or has a bad value (a :class:`~geokernel.contracts.errors.ContractError`
        naming it).
    """
    stored = PlanItem.from_item(item)
    kept = stored.kept
    return DeployPlan(stored.from_version, stored.to_version, stored.mode, tuple(SlotChange(w) for w in kept),
                      stored.started, stored.stopped, (), len(kept) + len(stored.stopped),
                      len(kept) + len(stored.started))


def plan_item(plan: DeployPlan, status: PlanStatus, at: float) -> dict[str, Any]:
    """The control item ``pk="plan"`` (``pk`` excluded) of ``plan`` with ``status``, updated at ``at``."""
    return PlanItem(plan.from_version, plan.to_version, plan.mode, plan.kept_ids, plan.started, plan.stopped,
                    len(plan.moved_cells), {k.worker_id: len(k.gains) for k in plan.kept}, status, at).to_item()
