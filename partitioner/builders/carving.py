"""Grouping cells into compact regions within the cap (compact strategy, steps 2-4).

Cells are labelled with their region in three passes (:func:`region_labels`):

1. **Bridging**: cells lifted ``bridge_levels`` zooms up; a cluster of 8-connected
   coarse cells whose load fits is one region that lists those coarse cells (the empty
   tiles between its clusters included, so it is contiguous).
2. **Components**: the other cells form 8-connected components; one within the cap is
   a region as it is.
3. **Carving**: a component above the cap is cut into pieces (:mod:`partitioner.builders.bisection`),
   with one cut window for all or, under a :class:`~partitioner.builders.cuts.CutBudget`, a
   window per component.

:func:`label_regions` then lists each region's cells as the fewest quadtree squares,
after letting it take the empty cells in its notches and holes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.geo.graph import components, group_indices
from geokernel.geo.shape import coalesce, fill_gaps, is_member, unique_pairs
from geokernel.geo.tiles import FloatArray, IntArray, arrays_to_quadkeys, tile_codes
from partitioner.builders.bisection import carve
from partitioner.builders.cuts import CutBudget, choose_cuts
from partitioner.builders.region import Region
from partitioner.builders.territory import Squares
from partitioner.load.counts import Grid

BRIDGE_LEVELS = 3  # cells within the same or adjacent 8x8 block of grid cells may share a region


class Labels(NamedTuple):
    """What :func:`region_labels` returns."""

    labels: IntArray  # region per cell
    coarse: npt.NDArray[np.bool_]  # per region: it lists coarse (bridged) cells
    n_regions: int
    cut_load: float  # boundary load of the cuts (with a budget; else 0)
    cut_floor: float  # the least cut_load any choice of windows could reach (with a budget; else 0)
    whole: int = 0  # regions 0 .. whole - 1 are whole (bridged clusters and small components); the rest carved pieces


def carve_cells(grid: Grid, cap: float, *, bridge_levels: int = BRIDGE_LEVELS, fill: bool = False,
                blocked: IntArray | None = None, window: float = 0.0,
                budget: CutBudget | None = None) -> list[Region]:
    """Group cells into 8-connected regions of at most ``cap`` load (compact strategy, steps 2-3).

    Parameters
    ----------
    grid : Grid
        Loaded cells (unique) and their load, each within ``cap``.
    fill : bool
        Let regions take the empty cells in their notches and holes
        (:func:`geokernel.geo.shape.fill_gaps`). Only for a build of the whole grid: the
        cells passed must be every loaded cell but ``blocked``.
    blocked : IntArray, optional
        Codes ``x << zoom | y`` of loaded cells handled elsewhere (hot cells), which
        filling must leave alone.
    window : float
        Load that a cut may leave short of an exact multiple of ``cap`` to pass
        through thinner columns (0: exact cuts; see :func:`partitioner.builders.bisection.cut_at`).
    budget : CutBudget, optional
        Instead of one ``window`` for all, pick a window per component: the loosest
        cuts go where they save the most boundary load, as long as all regions
        still pack onto ``budget.workers`` (see :func:`partitioner.builders.cuts.choose_cuts`).

    Notes
    -----
    Nearby clusters are bridged first: grid cells are lifted ``bridge_levels`` zooms
    up, and a cluster of 8-connected coarse cells whose load fits is one region that
    lists those coarse cells (the empty tiles between its clusters included, so it
    is contiguous). Clusters that do not fit fall back to 8-connected components of
    the grid cells, carved when above ``cap``. A region's cells are listed as the
    fewest quadtree squares (four siblings of one region become their parent).
    Vectorised: Python work is per region, not per cell.
    """
    labels = region_labels(grid, cap, bridge_levels, window, budget)
    return label_regions(grid, labels, bridge_levels=bridge_levels, fill=fill, blocked=blocked)


def label_regions(grid: Grid, labels: Labels, *, bridge_levels: int, fill: bool, blocked: IntArray | None
                  ) -> list[Region]:
    """The regions of :func:`region_labels`' labels: gaps filled, cells listed as quadtree squares."""
    squares, loads = label_squares(grid, labels, bridge_levels=bridge_levels, fill=fill, blocked=blocked)
    return squares_to_regions(squares, loads)


def label_squares(grid: Grid, labels: Labels, *, bridge_levels: int, fill: bool, blocked: IntArray | None,
                  unfilled: npt.NDArray[np.bool_] | None = None) -> tuple[Squares, FloatArray]:
    """The squares each region of :func:`region_labels`' labels lists (gaps filled), and each region's load.

    ``unfilled``: a mask over the labels whose regions claim no gaps (their cells still block the others'); the
    fresh build passes the small islands that become territories, whose growth covers their gaps anyway.
    """
    n = labels.n_regions
    x, y, zoom, lab_of = grid.x, grid.y, grid.zoom, labels.labels
    loads: FloatArray = np.asarray(np.bincount(lab_of, weights=grid.weight, minlength=n) if n else np.zeros(0),
                                   dtype=np.float64)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Squares(empty, empty, empty, empty), loads
    is_coarse = labels.coarse[lab_of]
    b = bridge_levels if is_coarse.any() else 0  # no bridged region (e.g. a grid above zoom bridge_levels + 2)
    c_lab, c_code = unique_pairs(lab_of[is_coarse], ((x[is_coarse] >> b) << (zoom - b)) | (y[is_coarse] >> b))
    cx = np.stack([c_lab, c_code >> (zoom - b), c_code & ((1 << (zoom - b)) - 1)], axis=1)
    fx, fy, fl = x[~is_coarse], y[~is_coarse], lab_of[~is_coarse]
    if fill and len(fx):
        claims = np.ones(len(fx), dtype=bool) if unfilled is None else ~unfilled[fl]
        stay = tile_codes(fx[~claims], fy[~claims], zoom)
        also = stay if blocked is None else np.concatenate([blocked, stay])
        gx, gy, gl = fill_gaps(fx[claims], fy[claims], fl[claims], zoom,
                               blocked=_blocked_cells(cx[:, 1:], zoom - b, b, also, zoom))
        fx, fy, fl = np.concatenate([fx, gx]), np.concatenate([fy, gy]), np.concatenate([fl, gl])
    sx, sy, sz, sl = coalesce(fx, fy, zoom, fl)
    return Squares(np.concatenate([cx[:, 1], sx]), np.concatenate([cx[:, 2], sy]),
                   np.concatenate([np.full(len(cx), zoom - b, dtype=np.int64), sz]),
                   np.concatenate([cx[:, 0], sl])), loads


def squares_to_regions(squares: Squares, loads: FloatArray) -> list[Region]:
    """One region per item ``0 .. len(loads) - 1``: its squares as quadkeys (coarsest first, then by x, y)."""
    n = len(loads)
    if n == 0:
        return []
    order = np.lexsort((squares.y, squares.x, squares.z, squares.item))
    qks = np.array(arrays_to_quadkeys(squares.x[order], squares.y[order], squares.z[order]), dtype=object)
    bounds = np.searchsorted(squares.item[order], np.arange(n + 1)).tolist()
    load_list = loads.tolist()
    return [Region(tuple(qks[bounds[r]:bounds[r + 1]]), float(load_list[r])) for r in range(n)]


def _blocked_cells(coarse_xy: IntArray, coarse_zoom: int, levels: int, blocked: IntArray | None, zoom: int
                   ) -> Callable[[IntArray, IntArray], npt.NDArray[np.bool_]]:
    """``(x, y) -> mask`` of cells inside a listed coarse cell or among the ``blocked`` codes."""
    coarse_codes = np.sort((coarse_xy[:, 0] << coarse_zoom) | coarse_xy[:, 1])
    blocked_codes = np.sort(blocked) if blocked is not None else None

    def is_blocked(bx: IntArray, by: IntArray) -> npt.NDArray[np.bool_]:
        return is_member(((bx >> levels) << coarse_zoom) | (by >> levels), coarse_codes) | is_member(
            (bx << zoom) | by, blocked_codes)

    return is_blocked


class ComponentMemo:
    """Connected components of subsets of one grid's cells, each subset's found once.

    The two carves of a fresh build (:func:`partitioner.builders.fresh.fresh_placement`) mostly bridge the
    same clusters, so they look for the components of the same cells: on millions of cells a second
    search costs seconds.
    """

    def __init__(self, grid: Grid) -> None:
        self._grid = grid
        self._found: list[tuple[IntArray, tuple[int, IntArray]]] = []

    def of(self, cells: IntArray) -> tuple[int, IntArray]:
        """``(count, labels)``: the 8-connected components of the cells ``cells`` (indices into the grid)."""
        for known, result in self._found:
            if np.array_equal(known, cells):
                return result
        g = self._grid
        result = components(g.x[cells], g.y[cells], g.zoom)
        self._found.append((cells, result))
        return result


def region_labels(grid: Grid, cap: float, bridge_levels: int, window: float, budget: CutBudget | None,
                  memo: ComponentMemo | None = None) -> Labels:
    """Label every cell with its region (bridged cluster, small component or carved piece).

    ``memo``: components already found on ``grid`` (by another call on the same grid).
    """
    labels = np.full(len(grid.x), -1, dtype=np.int64)
    if len(grid.x) == 0:
        return Labels(labels, np.zeros(0, dtype=bool), 0, 0.0, 0.0)
    n_bridged, rest = 0, np.arange(len(grid.x))
    if bridge_levels > 0 and grid.zoom - bridge_levels >= 2:
        n_bridged, rest = _bridge(grid, cap, bridge_levels, labels)
    n_labels, big = _small_components(grid, cap, rest, labels, n_bridged, memo or ComponentMemo(grid))
    n_whole = n_labels
    cut_load = cut_floor = 0.0
    if big:
        if budget is None:
            carved = [carve(c, grid, cap, window=window) for c in big]
        else:
            placed = np.bincount(labels[labels >= 0], weights=grid.weight[labels >= 0], minlength=n_labels)
            carved, cut_load, cut_floor = choose_cuts(big, grid, cap, budget, [*budget.other_loads, *placed.tolist()])
        for pieces in carved:
            for piece in pieces:
                labels[piece] = n_labels
                n_labels += 1
    coarse = np.concatenate([np.ones(n_bridged, dtype=bool), np.zeros(n_labels - n_bridged, dtype=bool)])
    return Labels(labels, coarse, n_labels, cut_load, cut_floor, n_whole)


def _bridge(grid: Grid, cap: float, levels: int, labels: IntArray) -> tuple[int, IntArray]:
    """Label the cells of each coarse cluster that fits (labels 0 ..); return their count and the other cells."""
    x, y, cz = grid.x, grid.y, grid.zoom - levels
    codes = ((x >> levels) << cz) | (y >> levels)
    uniq, inv = np.unique(codes, return_inverse=True)
    n_clusters, cluster_of_coarse = components(uniq >> cz, uniq & ((1 << cz) - 1), cz)
    cluster = cluster_of_coarse[inv]
    fits = np.bincount(cluster, weights=grid.weight, minlength=n_clusters) <= cap
    remap = np.full(n_clusters, -1, dtype=np.int64)
    ok = np.nonzero(fits)[0]
    remap[ok] = np.arange(len(ok))
    in_fit = fits[cluster]
    labels[in_fit] = remap[cluster[in_fit]]
    return len(ok), np.nonzero(~in_fit)[0]


def _small_components(grid: Grid, cap: float, rest: IntArray, labels: IntArray, n_labels: int, memo: ComponentMemo
                      ) -> tuple[int, list[IntArray]]:
    """Label each component of the cells ``rest`` that fits (from ``n_labels`` on); return the count and the others."""
    if len(rest) == 0:
        return n_labels, []
    n, lab = memo.of(rest)
    comp_load = np.bincount(lab, weights=grid.weight[rest], minlength=n)
    small = comp_load <= cap
    remap = np.full(n, -1, dtype=np.int64)
    sm = np.nonzero(small)[0]
    remap[sm] = n_labels + np.arange(len(sm))
    sel = small[lab]
    labels[rest[sel]] = remap[lab[sel]]
    big = rest[~sel]
    if len(big) == 0:
        return n_labels + len(sm), []
    groups = group_indices(lab[~sel], n)
    return n_labels + len(sm), [big[groups[comp]] for comp in np.nonzero(~small)[0]]
