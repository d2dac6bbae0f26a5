"""8-neighbour adjacency and connected components of grid cells (vectorised).

Notes
-----
Cells are tiles at one zoom given as ``x``/``y`` arrays. Adjacency wraps across
the antimeridian (column ``n - 1`` touches column 0) and never across the poles.
At zoom 0 and 1 wrapping would make a tile its own neighbour; those self-edges
are dropped.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from partitioner.geo.tiles import IntArray, unique_ints

# the four "forward" offsets; with their mirror images they make the 8-neighbourhood
_FORWARD = ((1, 0), (0, 1), (1, 1), (1, -1))


def neighbour_pairs(x: IntArray, y: IntArray, zoom: int) -> tuple[IntArray, IntArray]:
    """Return index pairs ``(i, j)`` of 8-adjacent cells among the given ones (each pair once).

    Notes
    -----
    The neighbours are looked up from the cells in code order (``x << zoom | y``), so the
    searched codes come nearly sorted and each binary search starts near the last one's
    end: several times faster than searching in input order on millions of cells. Pairs
    come grouped by offset, in code order of ``i`` within a group.
    """
    n = 1 << zoom
    codes = (x << zoom) | y
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    sx, sy = sorted_codes >> zoom, sorted_codes & (n - 1)
    src: list[IntArray] = []
    dst: list[IntArray] = []
    for dx, dy in _FORWARD:
        ny = sy + dy
        ok = (ny >= 0) & (ny < n)
        ncodes = (((sx + dx) % n) << zoom) | np.where(ok, ny, 0)
        pos = np.minimum(np.searchsorted(sorted_codes, ncodes), len(sorted_codes) - 1)
        at = np.flatnonzero(ok & (sorted_codes[pos] == ncodes))
        i, j = order[at], order[pos[at]]
        keep = i != j
        src.append(i[keep])
        dst.append(j[keep])
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def components(x: IntArray, y: IntArray, zoom: int) -> tuple[int, IntArray]:
    """Return ``(count, labels)``: 8-connected components of the given cells."""
    return components_of_pairs(len(x), *neighbour_pairs(x, y, zoom))


def components_of_pairs(m: int, i: IntArray, j: IntArray) -> tuple[int, IntArray]:
    """Return ``(count, labels)``: connected components of ``m`` nodes joined by the pairs ``(i, j)``."""
    if m == 0:
        return 0, np.zeros(0, dtype=np.int64)
    root = component_roots(m, i, j)
    firsts = unique_ints(root)
    return len(firsts), np.searchsorted(firsts, root).astype(np.int64)


def component_roots(m: int, i: IntArray, j: IntArray) -> IntArray:
    """The smallest node of each node's connected component (``m`` nodes joined by the pairs ``(i, j)``).

    Notes
    -----
    Vectorised union by minimum with pointer jumping: each round hooks every root that has a pair to a smaller
    root onto the smallest such root, then points every node at its root. Pointers only ever decrease, so there
    is no cycle; it ends when every pair joins one root, in about ``log2`` of the longest chain of roots rounds.
    Labelling components by the rank of their smallest node gives the labels SciPy's ``connected_components``
    gives (it labels components in order of their first node), without importing SciPy (0.2 s of every start).
    """
    parent = np.arange(m, dtype=np.int64)
    a, b = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    while len(a):
        ra, rb = parent[a], parent[b]
        differ = ra != rb
        if not differ.any():
            break
        a, b, ra, rb = a[differ], b[differ], ra[differ], rb[differ]  # pairs already joined never matter again
        np.minimum.at(parent, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return parent


def sub_pairs(keep: IntArray, m: int, i: IntArray, j: IntArray) -> tuple[IntArray, IntArray]:
    """The pairs among the nodes ``keep`` (of ``0..m-1``), renumbered to positions in ``keep``."""
    pos = np.full(m, -1, dtype=np.int64)
    pos[keep] = np.arange(len(keep))
    a, b = pos[i], pos[j]
    ok = (a >= 0) & (b >= 0)
    return a[ok], b[ok]


def group_indices(labels: npt.NDArray[np.int64], count: int) -> list[IntArray]:
    """Return, for each label ``0..count-1``, the indices carrying it."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(count + 1))
    return [order[bounds[k]:bounds[k + 1]] for k in range(count)]


def boundary_mask(labels: IntArray, i: IntArray, j: IntArray) -> npt.NDArray[np.bool_]:
    """Mask of the nodes with a pair ``(i, j)`` to a node of another label (the cells on a boundary).

    ``labels`` gives the owner of each node (a region, a worker); ``i``, ``j`` are neighbour
    pairs such as :func:`neighbour_pairs` returns. A node with no pair is never on a boundary.
    """
    differ = labels[i] != labels[j]
    edge = np.zeros(len(labels), dtype=bool)
    edge[i[differ]] = True
    edge[j[differ]] = True
    return edge

