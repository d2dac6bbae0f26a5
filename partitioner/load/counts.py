"""Load per quadkey: checking and normalising it for the builder.

Input comes as CSV (``quadkey,weight`` for the CLI and benchmarks) or snapshot
rows (``quadkey,events,cost`` from the aggregation job). Both may hold a
*rolled-up quadtree*: rows at several zooms where a deeper row refines the load
of a shallower ancestor. :meth:`Counts.grid` separates the two roles:

* the **grid**: rows at the shallowest zoom present, plus deeper rows with no
  ancestor present, summed up into their ancestor at the grid zoom. Together
  they hold all the load, each cell once;
* the **refinement**: deeper rows under a present ancestor. They are only used
  to split a grid cell hotter than ``max_load`` into finer cells.

Notes
-----
Zoom limits come from :data:`geokernel.geo.tiles.MAX_ZOOM`. A quadkey listed
twice is an error (it names both lines). Weights must be finite and >= 0.
Files and snapshot rows are read by :mod:`partitioner.load.read`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.errors import CountsError
from geokernel.geo.quadtree import tree_keys
from geokernel.geo.shape import is_member
from geokernel.geo.tiles import IntArray, Tile, arrays_to_quadkeys, quadkey, quadkeys_to_arrays, unique_ints
from partitioner.load import rowcheck
from partitioner.load.rollup import nearest_ancestors

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Tiles(NamedTuple):
    """Tile column, row and zoom of each row (parallel arrays, one entry per quadkey)."""

    x: IntArray
    y: IntArray
    z: IntArray


class Grid(NamedTuple):
    """Cells at one zoom holding all the load: tile ``x``, ``y`` and ``weight`` arrays."""

    zoom: int
    x: IntArray
    y: IntArray
    weight: FloatArray

    def take(self, cells: npt.NDArray[np.bool_] | IntArray) -> Grid:
        """Return the cells picked by a mask or an index array (same zoom)."""
        return Grid(self.zoom, self.x[cells], self.y[cells], self.weight[cells])

    def quadkey(self, i: int) -> str:
        """The quadkey of cell ``i``."""
        return quadkey(Tile(int(self.x[i]), int(self.y[i]), self.zoom))


class Cells(NamedTuple):
    """Rows of mixed zooms: tiles and weights (refinement rows, leaves)."""

    x: IntArray
    y: IntArray
    z: IntArray
    weight: FloatArray


def _read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a.setflags(write=False)
    return a


class Counts:
    """Load per quadkey (immutable). ``source`` names where it came from, for errors.

    Built from quadkey strings (``Counts(quadkeys, weights, source)``) or from tile arrays
    (:meth:`from_tiles`); the other form is derived on first use and kept. Derived views
    (the tiles, the grid, the refinement) are computed once per instance.
    """

    def __init__(self, quadkeys: Sequence[str] | None, weights: npt.ArrayLike, source: str = "<counts>", *,
                 tiles: Tiles | None = None) -> None:
        w = _read_only(np.array(weights, dtype=np.float64).reshape(-1))
        if quadkeys is None and tiles is None:
            raise CountsError(f"{source}: counts need quadkeys or tiles")
        n = len(quadkeys) if quadkeys is not None else len(tiles.x) if tiles is not None else 0
        if n != len(w):
            raise CountsError(f"{source}: {n} quadkeys but {len(w)} weights")
        d = self.__dict__
        d["_quadkeys"] = tuple(quadkeys) if quadkeys is not None else None
        d["weights"] = w
        d["source"] = source
        if tiles is not None:
            d["tiles"] = Tiles(*(_read_only(np.asarray(a, dtype=np.int64)) for a in tiles))

    weights: FloatArray
    source: str

    @classmethod
    def from_tiles(cls, tiles: Tiles, weights: npt.ArrayLike, source: str = "<counts>") -> Counts:
        """Counts of the tiles ``tiles`` (no quadkey strings are made until asked for)."""
        return cls(None, weights, source, tiles=tiles)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Counts is immutable (cannot set {name!r})")

    def __repr__(self) -> str:
        return f"Counts({len(self)} rows, total {self.total:.6g}, source={self.source!r})"

    def __len__(self) -> int:
        return len(self.weights)

    @property
    def quadkeys(self) -> tuple[str, ...]:
        """The quadkey of each row (made from the tiles on first use when built from tiles)."""
        qks: tuple[str, ...] | None = self.__dict__["_quadkeys"]
        if qks is None:
            t = self.tiles
            qks = tuple(arrays_to_quadkeys(t.x, t.y, t.z))
            self.__dict__["_quadkeys"] = qks
        return qks

    @cached_property
    def tiles(self) -> Tiles:
        """Tile x, y and zoom of each row (read-only arrays)."""
        return Tiles(*(_read_only(a) for a in quadkeys_to_arrays(self.quadkeys)))

    @property
    def zooms(self) -> tuple[int, ...]:
        """The distinct zooms present, shallowest first."""
        return tuple(int(z) for z in unique_ints(self.tiles.z))

    @property
    def grid_zoom(self) -> int:
        if len(self) == 0:
            raise CountsError(f"{self.source}: no rows")
        return int(self.tiles.z.min())

    @property
    def total(self) -> float:
        """Total load, counting each place once (the grid's sum)."""
        return float(self._tree.grid.weight.sum())

    def grid(self) -> Grid:
        """Return the grid cells (see module docstring); refinement rows are left out."""
        return self._tree.grid

    def grid_pairs(self) -> tuple[IntArray, IntArray]:
        """8-neighbour pairs of the grid cells (indices into :meth:`grid`), found once."""
        return self._grid_pairs

    @cached_property
    def _grid_pairs(self) -> tuple[IntArray, IntArray]:
        # imported here: only measuring needs the pairs (reading counts stays light for the Spark job)
        from geokernel.geo.graph import neighbour_pairs

        g = self.grid()
        return neighbour_pairs(g.x, g.y, g.zoom)

    def refinement(self) -> dict[str, float]:
        """Return the refinement rows (deeper rows under a present ancestor) as quadkey -> weight."""
        rows = np.flatnonzero(self._tree.refined)
        if self.__dict__["_quadkeys"] is not None:
            qks = [self.quadkeys[i] for i in rows.tolist()]
        else:
            t = self.tiles
            qks = arrays_to_quadkeys(t.x[rows], t.y[rows], t.z[rows])
        return dict(zip(qks, self.weights[rows].tolist(), strict=True))

    def refinement_cells(self) -> Cells:
        """The refinement rows as arrays (in row order)."""
        t, rows = self.tiles, self._tree.refined
        return Cells(t.x[rows], t.y[rows], t.z[rows], self.weights[rows])

    def leaves(self) -> Cells:
        """Rows that count every place once: the grid cells and the refinement rows, each row's
        weight minus the weights of its nearest listed descendants (clipped at 0).

        Notes
        -----
        Deeper rows with no listed ancestor are folded into their grid cell (as in
        :meth:`grid`). Single-zoom counts come back as they are.
        """
        return self._leaves

    def scaled(self, factors: npt.ArrayLike) -> Counts:
        """Return a copy with each weight multiplied by ``factors`` (for noise and shifts)."""
        w = self.weights * np.asarray(factors, dtype=np.float64)
        tiles: Tiles | None = self.__dict__.get("tiles")
        return Counts(self.__dict__["_quadkeys"], w, self.source, tiles=tiles)

    # -- the quadtree, computed once ------------------------------------------------
    @cached_property
    def _tree(self) -> _Tree:
        return _split_tree(self.tiles, self.weights)

    @cached_property
    def _leaves(self) -> Cells:
        t = self.tiles
        tree = self._tree
        if not tree.refined.any() and len(unique_ints(t.z)) == 1:
            return Cells(t.x, t.y, t.z, self.weights)
        g = tree.grid
        ref = self.refinement_cells()
        x = np.concatenate([g.x, ref.x])
        y = np.concatenate([g.y, ref.y])
        z = np.concatenate([np.full(len(g.x), g.zoom, dtype=np.int64), ref.z])
        w = np.concatenate([g.weight, ref.weight])
        w -= _nearest_ancestor_sums(x, y, z, w, first_deep=len(g.x), grid_zoom=g.zoom)
        return Cells(x, y, z, np.maximum(w, 0.0))


class _Tree(NamedTuple):
    grid: Grid
    refined: BoolArray  # rows under a present ancestor


def _split_tree(t: Tiles, w: FloatArray) -> _Tree:
    """The grid cells (rows at the shallowest zoom plus orphans summed up) and the refinement mask."""
    if len(w) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Tree(Grid(0, empty, empty, np.zeros(0)), np.zeros(0, dtype=bool))
    gz = int(t.z.min())
    top = t.z == gz
    if top.all():
        g = Grid(gz, *(_read_only(a.copy()) for a in (t.x, t.y, w)))
        return _Tree(g, np.zeros(len(w), dtype=bool))
    keys = np.sort(tree_keys(t.x, t.y, t.z))
    refined = np.zeros(len(w), dtype=bool)
    for a in range(gz, int(t.z.max())):
        rows = np.flatnonzero(~top & (t.z > a) & ~refined)
        shift = t.z[rows] - a
        refined[rows] = is_member(tree_keys(t.x[rows] >> shift, t.y[rows] >> shift, a), keys)
    # rows at the grid zoom and orphans (deeper rows with no ancestor listed) hold the load once
    sel = ~refined
    shift = t.z[sel] - gz
    codes = ((t.x[sel] >> shift) << gz) | (t.y[sel] >> shift)
    uniq, inv = np.unique(codes, return_inverse=True)
    weight = np.bincount(inv, weights=w[sel], minlength=len(uniq))
    g = Grid(gz, _read_only(uniq >> gz), _read_only(uniq & ((1 << gz) - 1)), _read_only(weight))
    return _Tree(g, _read_only(refined))


def _nearest_ancestor_sums(x: IntArray, y: IntArray, z: IntArray, w: FloatArray, *, first_deep: int,
                           grid_zoom: int) -> FloatArray:
    """Per row, the summed weight of the rows (from ``first_deep`` on) whose nearest listed ancestor it is."""
    anc = nearest_ancestors(x, y, z, first_deep=first_deep, grid_zoom=grid_zoom)
    has = anc >= 0
    out: FloatArray = np.bincount(anc[has], weights=w[has], minlength=len(w)).astype(np.float64)
    return out


# ---------------------------------------------------------------------------
# building from pairs
# ---------------------------------------------------------------------------


def counts_from_pairs(pairs: Iterable[tuple[str, float]], source: str = "<pairs>") -> Counts:
    """Build :class:`Counts` from (quadkey, weight) pairs, checking every value.

    Raises
    ------
    CountsError
        On a bad quadkey, a negative/NaN/infinite weight, a duplicate quadkey or no rows;
        the message names the value and its position in ``source``.
    """
    qks: list[str] = []
    ws: list[float] = []
    first_seen: dict[str, int] = {}
    for i, (q, w) in enumerate(pairs):
        where = f"{source} row {i + 1}"
        qks.append(rowcheck.check_quadkey(q, where))
        ws.append(rowcheck.check_weight(w, where))
        if q in first_seen:
            raise CountsError(f"{where}: quadkey {q!r} already given at row {first_seen[q] + 1}")
        first_seen[q] = i
    if not qks:
        raise CountsError(f"{source}: no rows (expected at least one quadkey with a weight)")
    return Counts(tuple(qks), np.array(ws, dtype=np.float64), source)
