"""Fast point -> partition lookup over a spec (longest quadkey prefix wins).

:class:`SpecIndex` is what the router, the workers and the metrics use. It keeps
one sorted array of tile codes per zoom level the spec lists and resolves a
batch of points with one ``searchsorted`` per level, deepest level first, so a
lookup costs ``O(levels * log n)`` in NumPy rather than a Python loop per point.

Notes
-----
* Points are located at :data:`LOOKUP_ZOOM` (the deepest zoom any spec may list is
  bounded by it); a spec listing a deeper quadkey is rejected.
* Split hot cells resolve by :func:`partitioner.spec.entity_bucket` of the
  entity id; without entity ids the bucket defaults to 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from partitioner.errors import SpecError
from partitioner.spec import HASH_BUCKETS, Partition, Spec, entity_bucket
from partitioner.tiles import IntArray, quadkeys_to_arrays, tile_codes, tiles_xy

LOOKUP_ZOOM = 24


class SpecIndex:
    """Vectorised longest-prefix lookup of points, tiles or quadkeys in a spec."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.partitions: tuple[Partition, ...] = spec.partitions
        self.catch_all_index = next((i for i, p in enumerate(spec.partitions) if p.is_catch_all), -1)
        if self.catch_all_index < 0:
            raise SpecError(f"spec v{spec.version!r} has no catch-all partition")
        # owner per (zoom, code): >= 0 partition index, < 0 split-group -(g+1)
        plain_qks: list[str] = []
        plain_owner: list[int] = []
        groups: dict[str, list[tuple[int, int, int]]] = {}
        for i, p in enumerate(spec.partitions):
            for q in p.quadkeys:
                if q == "":
                    continue
                if len(q) > LOOKUP_ZOOM:
                    raise SpecError(f"partition {p.id!r} quadkey {q!r} is deeper than zoom {LOOKUP_ZOOM}")
                if p.hash_range is not None:
                    groups.setdefault(q, []).append((p.hash_range[0], p.hash_range[1], i))
                else:
                    plain_qks.append(q)
                    plain_owner.append(i)
        self._group_lo: list[IntArray] = []
        self._group_part: list[IntArray] = []
        for g, (q, members) in enumerate(sorted(groups.items())):
            members.sort()
            self._group_lo.append(np.array([m[0] for m in members], dtype=np.int64))
            self._group_part.append(np.array([m[2] for m in members], dtype=np.int64))
            plain_qks.append(q)
            plain_owner.append(-(g + 1))
        x, y, z = quadkeys_to_arrays(plain_qks)
        owner = np.array(plain_owner, dtype=np.int64)
        self._codes: dict[int, IntArray] = {}
        self._owner: dict[int, IntArray] = {}
        for zoom, sel in by_zoom(z):
            codes = tile_codes(x[sel], y[sel], zoom)
            order = np.argsort(codes, kind="stable")
            self._codes[zoom] = codes[order]
            self._owner[zoom] = owner[sel][order]
        self.zooms: list[int] = sorted(self._codes, reverse=True)

    # ------------------------------------------------------------------
    def locate_xy(self, x: npt.ArrayLike, y: npt.ArrayLike, zoom: int,
                  buckets: npt.ArrayLike | None = None) -> IntArray:
        """Return the partition index of each tile (x, y) at ``zoom``.

        Only spec levels at or above ``zoom`` are consulted, so a coarse tile
        goes to the owner of its own prefix (finer holes inside it are ignored).
        """
        xa = np.asarray(x, dtype=np.int64)
        ya = np.asarray(y, dtype=np.int64)
        out = self._locate_groups(xa, ya, zoom)
        split = out < 0
        if split.any():
            b = np.zeros(xa.shape, dtype=np.int64) if buckets is None else np.asarray(buckets, dtype=np.int64)
            for pos_i in np.nonzero(split)[0]:
                g = -int(out[pos_i]) - 1
                k = int(np.searchsorted(self._group_lo[g], b[pos_i], side="right")) - 1
                out[pos_i] = self._group_part[g][max(k, 0)]
        return out

    def locate_tiles(self, x: IntArray, y: IntArray, z: IntArray) -> IntArray:
        """Return the partition index of each tile (x, y) at its own zoom ``z`` (zooms may differ).

        Each tile resolves as :meth:`locate_xy` at its zoom; a split hot cell gives its
        bucket-0 share.
        """
        out = np.empty(len(x), dtype=np.int64)
        for zoom, sel in by_zoom(z):
            out[sel] = self.locate_xy(x[sel], y[sel], zoom)
        return out

    def locate(self, lon: npt.ArrayLike, lat: npt.ArrayLike,
               entity_ids: Sequence[str] | None = None) -> IntArray:
        """Return the partition index of each point (lon/lat already validated)."""
        x, y = tiles_xy(lon, lat, LOOKUP_ZOOM)
        buckets = None
        if entity_ids is not None and self._group_lo:
            buckets = np.fromiter((entity_bucket(e) for e in entity_ids), dtype=np.int64, count=len(entity_ids))
        return self.locate_xy(x, y, LOOKUP_ZOOM, buckets)

    def locate_one(self, lon: float, lat: float, entity_id: str = "") -> Partition:
        """Return the partition owning one point (and entity, for split cells)."""
        i = int(self.locate(np.array([lon]), np.array([lat]), [entity_id])[0])
        return self.partitions[i]

    def attribute(self, quadkeys: Sequence[str], weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Return the load each partition receives from per-quadkey weights.

        A weight in a split hot cell is shared among its partitions in proportion
        to their hash ranges (entities are assumed uniform over buckets).
        """
        w = np.asarray(weights, dtype=np.float64)
        loads = np.zeros(len(self.partitions), dtype=np.float64)
        if len(quadkeys) == 0:
            return loads
        x, y, z = quadkeys_to_arrays(quadkeys)
        for zoom, sel in by_zoom(z):
            owners = self._locate_groups(x[sel], y[sel], zoom)
            plain = owners >= 0
            np.add.at(loads, owners[plain], w[sel][plain])
            for g in np.unique(owners[~plain]):
                gi = -int(g) - 1
                total = float(w[sel][owners == g].sum())
                his = np.append(self._group_lo[gi][1:], HASH_BUCKETS)
                shares = (his - self._group_lo[gi]) / HASH_BUCKETS
                np.add.at(loads, self._group_part[gi], total * shares)
        return loads

    def group_members(self, group: int) -> IntArray:
        """Return the partition indices sharing split cell ``group`` (ordered by hash range)."""
        return self._group_part[group]

    def locate_groups_xy(self, x: IntArray, y: IntArray, zoom: int) -> IntArray:
        """Like :meth:`locate_xy` but a split hot cell gives ``-(group + 1)`` instead of one share."""
        return self._locate_groups(np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64), zoom)

    def _locate_groups(self, x: IntArray, y: IntArray, zoom: int) -> IntArray:
        out = np.full(x.shape, self.catch_all_index, dtype=np.int64)
        unresolved = np.ones(x.shape, dtype=bool)
        for z in self.zooms:
            if z > zoom:
                continue
            shift = zoom - z
            codes = ((x >> shift) << z) | (y >> shift)
            table = self._codes[z]
            pos_c = np.minimum(np.searchsorted(table, codes), len(table) - 1)
            hit = unresolved & (table[pos_c] == codes)
            out[hit] = self._owner[z][pos_c[hit]]
            unresolved &= ~hit
        return out


def by_zoom(z: IntArray) -> Iterator[tuple[int, npt.NDArray[np.bool_]]]:
    """Yield ``(zoom, mask)`` for each distinct zoom in ``z``, shallowest first."""
    for zoom in np.unique(z):
        yield int(zoom), z == zoom
