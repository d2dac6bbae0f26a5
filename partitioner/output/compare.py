"""Two specs compared: the load that keeps its partition and worker, and the ids added, removed or changed.

:func:`stability` measures, under a load, how much of it keeps its partition id and worker id from
one spec to the next (what a swap does not have to move); :func:`spec_diff` lists the partition and
worker ids that were added, removed or changed. :mod:`partitioner.output.render` prints both.

Notes
-----
Cells are the leaves of the counts (:func:`partitioner.output.metrics.leaf_loads`). A hash-split
cell is kept in proportion to the overlap of hash ranges whose (partition, worker) match (entities
are uniform over buckets).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Spec
from partitioner.load.counts import Counts


@dataclass(frozen=True)
class Stability:
    """Load that keeps its partition id and worker id from ``old`` to ``new`` (by the current counts)."""

    old_version: int
    new_version: int
    total: float
    kept_load: float
    moved_load: float

    @property
    def kept_share(self) -> float:
        return self.kept_load / self.total if self.total > 0 else 1.0

    @property
    def moved_share(self) -> float:
        return self.moved_load / self.total if self.total > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kept_share": self.kept_share, "moved_share": self.moved_share}


@dataclass(frozen=True)
class SpecDiff:
    """Partition and worker ids added, removed, changed (cells, worker or hash range) and unchanged."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    workers_added: tuple[str, ...]
    workers_removed: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in asdict(self).items()}


class _Share(NamedTuple):
    """One partition's hash range ``[lo, hi)`` of a cell (the whole range unless hash-split)."""

    partition: int
    lo: int
    hi: int


def _split_members(spec: Spec) -> dict[str, list[_Share]]:
    """Quadkey of each hash-split cell -> its shares, sorted by ``lo``."""
    groups: dict[str, list[_Share]] = defaultdict(list)
    for i, p in enumerate(spec.partitions):
        if p.hash_range is not None:
            groups[p.quadkeys[0]].append(_Share(i, p.hash_range[0], p.hash_range[1]))
    for members in groups.values():
        members.sort(key=lambda m: m.lo)
    return dict(groups)


def _cell_pieces(spec: Spec, members: dict[str, list[_Share]], i: int) -> list[_Share]:
    p = spec.partitions[i]
    if p.hash_range is None:
        return [_Share(i, 0, HASH_BUCKETS)]
    return members[p.quadkeys[0]]


def stability(old: Spec, new: Spec, counts: Counts) -> Stability:
    """Return the load (by ``counts``) whose place keeps the same partition id and worker id.

    A cell counts as kept when its owner in ``new`` has the same partition id and the same
    worker id as its owner in ``old``. For hash-split cells the kept fraction is the overlap
    of hash ranges whose (partition, worker) match (entities are uniform over buckets).
    Cells are the leaves of the counts (see :func:`partitioner.output.metrics.leaf_loads`).
    """
    leaves = counts.leaves()
    x, y, z, w = leaves.x, leaves.y, leaves.z, leaves.weight
    total = float(w.sum())
    if total <= 0:
        return Stability(old.version, new.version, 0.0, 0.0, 0.0)
    o = SpecIndex(old).locate_tiles(x, y, z)
    n = SpecIndex(new).locate_tiles(x, y, z)
    key_ids: dict[tuple[str, str], int] = {}
    okey = np.array([key_ids.setdefault((p.id, p.worker), len(key_ids)) for p in old.partitions], dtype=np.int64)
    nkey = np.array([key_ids.setdefault((p.id, p.worker), len(key_ids)) for p in new.partitions], dtype=np.int64)
    osplit = np.array([p.hash_range is not None for p in old.partitions], dtype=bool)
    nsplit = np.array([p.hash_range is not None for p in new.partitions], dtype=bool)
    plain = ~osplit[o] & ~nsplit[n]
    kept = float(w[plain & (okey[o] == nkey[n])].sum())
    om, nm = _split_members(old), _split_members(new)
    for c in np.nonzero(~plain)[0]:
        frac = 0
        for oi, olo, ohi in _cell_pieces(old, om, int(o[c])):
            for ni, nlo, nhi in _cell_pieces(new, nm, int(n[c])):
                if okey[oi] == nkey[ni]:
                    frac += max(0, min(ohi, nhi) - max(olo, nlo))
        kept += float(w[c]) * frac / HASH_BUCKETS
    return Stability(old.version, new.version, total, kept, total - kept)


def spec_diff(old: Spec, new: Spec) -> SpecDiff:
    """Compare two specs by id (cells compared as sets; loads are ignored)."""
    oparts = {p.id: p for p in old.partitions}
    nparts = {p.id: p for p in new.partitions}
    changed: list[str] = []
    unchanged: list[str] = []
    for pid in nparts:
        if pid in oparts:
            a, b = oparts[pid], nparts[pid]
            same = set(a.quadkeys) == set(b.quadkeys) and a.worker == b.worker and a.hash_range == b.hash_range
            (unchanged if same else changed).append(pid)
    owids = {w.id for w in old.workers}
    nwids = {w.id for w in new.workers}
    return SpecDiff(added=tuple(p for p in nparts if p not in oparts), removed=tuple(p for p in oparts if p not in nparts),
                    changed=tuple(changed), unchanged=tuple(unchanged),
                    workers_added=tuple(w.id for w in new.workers if w.id not in owids),
                    workers_removed=tuple(w.id for w in old.workers if w.id not in nwids))
