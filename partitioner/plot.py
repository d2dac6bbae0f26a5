"""PNG pictures of a spec: the partition map with utilisation bars, and old-vs-new mismatch bars.

The only module of :mod:`partitioner` that imports matplotlib (Agg backend, no display);
the CLI imports it lazily, so the library itself never needs matplotlib.

* :func:`plot_spec`: left, the partitions on a web-mercator map (x = longitude, y =
  mercator latitude, so squares stay square), cells coloured by worker, partition
  outlines, a light graticule, zoomed to the data, with an optional grey heat underlay
  of the counts; right, one utilisation bar per worker with the ``max_load`` line (the
  seed's allocation bar chart).
* :func:`plot_mismatch`: per worker of an old spec, the load it planned and the load it
  gets under new counts, against the ``max_load`` line (the seed's "264%" chart).

Notes
-----
* **Antimeridian.** Cells are drawn where they are; data on both sides of +/-180 makes
  the view span the world (the map does not re-centre across the antimeridian).
* **Poles.** The map stops at the mercator limit +/-85.0511.
* The PNG's pixel size is exactly ``size`` x ``dpi`` (no tight bounding box).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import Colormap

from partitioner.counts import Counts
from partitioner.geometry import owned_squares, region_cells
from partitioner.index import SpecIndex
from partitioner.metrics import SpecMetrics, evaluate
from partitioner.spec import Spec
from partitioner.tiles import MAX_LAT, quadkeys_to_arrays

FloatArray = npt.NDArray[np.float64]
MAX_DRAWN_CELLS = 400_000  # outlines beyond this many cells are drawn at a coarser zoom


def merc_y(lat: npt.ArrayLike) -> FloatArray:
    """Web-mercator y of latitudes, in degree-like units (equal to longitude scale)."""
    la = np.radians(np.clip(np.asarray(lat, dtype=np.float64), -MAX_LAT, MAX_LAT))
    return np.asarray(np.degrees(np.log(np.tan(np.pi / 4 + la / 2))), dtype=np.float64)


def _tile_edges(x: npt.NDArray[np.int64], y: npt.NDArray[np.int64], z: npt.NDArray[np.int64]
                ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """West, east, south and north of tiles in map units (lon, mercator-y degrees)."""
    n = (1 << z).astype(np.float64)
    west = x / n * 360.0 - 180.0
    east = (x + 1) / n * 360.0 - 180.0
    north = 180.0 - y / n * 360.0
    south = 180.0 - (y + 1) / n * 360.0
    return west, east, south, north


def _rects(west: FloatArray, east: FloatArray, south: FloatArray, north: FloatArray) -> FloatArray:
    return np.stack([np.stack([west, south], 1), np.stack([east, south], 1), np.stack([east, north], 1),
                     np.stack([west, north], 1)], 1)


def _worker_colours(spec: Spec) -> dict[str, tuple[float, float, float, float]]:
    cmap: Colormap = plt.get_cmap("tab20")
    return {w.id: cmap(k % 20) for k, w in enumerate(spec.workers)}


def _graticule(ax: Axes, x0: float, x1: float, y0: float, y1: float) -> None:
    span = max(x1 - x0, 1e-6)
    step = next((s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60) if span / s <= 10), 90.0)
    for lon in np.arange(math.floor(x0 / step) * step, x1 + step, step):
        ax.axvline(lon, color="0.85", lw=0.5, zorder=0)
    lat0 = math.degrees(math.atan(math.sinh(math.radians(y0))))
    lat1 = math.degrees(math.atan(math.sinh(math.radians(y1))))
    lats = np.arange(math.floor(lat0 / step) * step, lat1 + step, step)
    lats = lats[np.abs(lats) <= MAX_LAT]
    ys = merc_y(lats)
    for y in ys:
        ax.axhline(y, color="0.85", lw=0.5, zorder=0)
    ax.set_yticks(ys[(ys >= y0) & (ys <= y1)])
    ax.set_yticklabels([f"{v:g}" for v, yy in zip(lats, ys, strict=True) if y0 <= yy <= y1])
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude (web mercator)")


def _outline_segments(spec: Spec, index: SpecIndex, zoom: int) -> FloatArray:
    """Edges between cells of different regions (or a region and nothing), at ``zoom``."""
    regions = [i for i, p in enumerate(spec.partitions) if not p.is_catch_all and p.hash_range is None]
    lab, x, y = region_cells(spec, index, regions, zoom)
    while len(lab) > MAX_DRAWN_CELLS and zoom > 1:
        zoom -= 1
        lab, x, y = region_cells(spec, index, regions, zoom)
    if len(lab) == 0:
        return np.zeros((0, 2, 2))
    n = 1 << zoom
    key = (x << zoom) | y
    order = np.argsort(key, kind="stable")
    skey = key[order]
    w, e, s, nn = _tile_edges(x, y, np.full(len(x), zoom, dtype=np.int64))
    segs: list[FloatArray] = []
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        nx, ny = (x + dx) % n, y + dy
        ok = (ny >= 0) & (ny < n)
        nkey = (nx << zoom) | np.where(ok, ny, 0)
        pos = np.minimum(np.searchsorted(skey, nkey), len(skey) - 1)
        same = ok & (skey[pos] == nkey) & (lab[order[pos]] == lab)
        b = ~same
        if dx == 1:
            a, c = np.stack([e, s], 1), np.stack([e, nn], 1)
        elif dx == -1:
            a, c = np.stack([w, s], 1), np.stack([w, nn], 1)
        elif dy == 1:  # tile y grows southwards
            a, c = np.stack([w, s], 1), np.stack([e, s], 1)
        else:
            a, c = np.stack([w, nn], 1), np.stack([e, nn], 1)
        segs.append(np.stack([a[b], c[b]], 1))
    return np.concatenate(segs)


def _extent(edges: list[FloatArray]) -> tuple[float, float, float, float]:
    """Data extent (west, east, south, north in map units) with a 4 % margin; the world if no data."""
    if edges:
        xs = np.concatenate(edges[0::4] + edges[1::4])
        ys = np.concatenate(edges[2::4] + edges[3::4])
        x0, x1, y0, y1 = float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())
    else:
        x0, x1, y0, y1 = -180.0, 180.0, -180.0, 180.0
    pad = 0.04 * max(x1 - x0, y1 - y0, 1e-4)
    return x0 - pad, x1 + pad, y0 - pad, y1 + pad


def plot_spec(spec: Spec, path: str | Path, counts: Counts | None = None, *, title: str | None = None,
              size: tuple[float, float] = (14.0, 7.0), dpi: int = 100) -> Path:
    """Draw the partition map and the per-worker utilisation bars to a PNG.

    Parameters
    ----------
    spec : Spec
    path : str or Path
        Output PNG.
    counts : Counts, optional
        Drawn as a grey log-scaled heat underlay; utilisation bars then use this load.
    title : str, optional
    size, dpi
        Figure size in inches and resolution: the PNG is ``size * dpi`` pixels.

    Returns
    -------
    Path
        ``path``.
    """
    index = SpecIndex(spec)
    colours = _worker_colours(spec)
    fig = plt.figure(figsize=size, dpi=dpi)
    try:
        ax = fig.add_axes((0.05, 0.08, 0.55, 0.84))
        bx = fig.add_axes((0.67, 0.14, 0.31, 0.78))
        squares = owned_squares(spec)
        qks: list[str] = []
        fc: list[tuple[float, float, float, float]] = []
        for p in spec.partitions:
            qks += squares[p.id]
            fc += [colours[p.worker]] * len(squares[p.id])
        extent: list[FloatArray] = []
        if counts is not None:
            cx, cy, cz = quadkeys_to_arrays(counts.quadkeys)
            cw, ce, cs, cn = _tile_edges(cx, cy, cz)
            heat = np.log1p(np.asarray(counts.weights, dtype=np.float64))
            shade = plt.get_cmap("Greys")(0.15 + 0.85 * heat / max(float(heat.max()), 1e-9))
            ax.add_collection(PolyCollection(list(_rects(cw, ce, cs, cn)), facecolors=shade, edgecolors="none",
                                             zorder=1))
            extent += [cw, ce, cs, cn]
        if qks:
            x, y, z = quadkeys_to_arrays(qks)
            w, e, s, n = _tile_edges(x, y, z)
            extent += [w, e, s, n]
        x0, x1, y0, y1 = _extent(extent)
        if qks:
            zoom = int(counts.grid_zoom) if counts is not None else int(z.max())
            cell_px = 360.0 / (1 << zoom) / (x1 - x0) * 0.55 * size[0] * dpi
            if cell_px >= 2.0:
                ax.add_collection(PolyCollection(list(_rects(w, e, s, n)), facecolors=fc, edgecolors="none",
                                                 alpha=0.55 if counts is not None else 0.85, zorder=2))
                segs = _outline_segments(spec, index, zoom)
                ax.add_collection(LineCollection(list(segs), colors="0.1", linewidths=0.6, zorder=3))
            else:  # cells smaller than a pixel: dots coloured by worker, no outlines
                ax.scatter((w + e) / 2, (s + n) / 2, s=1.5, c=fc, marker="s", linewidths=0, zorder=2)
            split = sorted({p.quadkeys[0] for p in spec.partitions if p.hash_range is not None})
            if split:  # hot cells shared by entity hash: hatched, outlined in red
                hx, hy, hz = quadkeys_to_arrays(split)
                ax.add_collection(PolyCollection(list(_rects(*_tile_edges(hx, hy, hz))), facecolors="none",
                                                 edgecolors="crimson", hatch="////", linewidths=1.0, zorder=4))
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal", adjustable="box")
        _graticule(ax, x0, x1, y0, y1)
        ax.set_title(title or f"spec v{spec.version} ({spec.strategy or 'spec'}): "
                     f"{len(spec.partitions) - 1} regions on {len(spec.workers)} workers")
        metrics = evaluate(spec, counts) if counts is not None else None
        _utilisation_bars(bx, spec, metrics, colours)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)


def _utilisation_bars(ax: Axes, spec: Spec, metrics: SpecMetrics | None,
                      colours: dict[str, tuple[float, float, float, float]]) -> None:
    if metrics is not None:
        ids = [w.id for w in metrics.workers]
        util = np.array([w.utilisation for w in metrics.workers])
    else:
        ids = [w.id for w in spec.workers]
        util = np.array([w.load / spec.max_load for w in spec.workers])
    order = np.argsort(-util, kind="stable")
    pos = np.arange(len(ids))
    ax.bar(pos, 100 * util[order], color=[colours[ids[k]] for k in order], edgecolor="0.3", linewidth=0.3)
    ax.axhline(100, color="crimson", lw=1.2, ls="--", label=f"max_load {spec.max_load:g}")
    ax.set_ylabel("utilisation (% of max_load)")
    ax.set_xlabel("workers, busiest first")
    if len(ids) <= 30:
        ax.set_xticks(pos)
        ax.set_xticklabels([ids[k] for k in order], rotation=90, fontsize=7)
    ax.set_ylim(0, max(110.0, 105 * float(util.max()) if len(util) else 110.0))
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("worker utilisation" + (" under given counts" if metrics is not None else ""))


def plot_mismatch(old: Spec, counts: Counts, path: str | Path, *, title: str | None = None,
                  size: tuple[float, float] = (12.0, 5.0), dpi: int = 100) -> Path:
    """Bars per worker of ``old``: the load it planned vs the load ``counts`` puts on it.

    Workers over ``max_load`` under the new load are labelled with their utilisation
    (the seed's "Partition 2: 2257 -> 6602 points (264% utilized)").
    """
    m = evaluate(old, counts)
    planned = np.array([w.planned_load for w in m.workers])
    actual = np.array([w.load for w in m.workers])
    order = np.argsort(-actual, kind="stable")
    pos = np.arange(len(order))
    fig = plt.figure(figsize=size, dpi=dpi)
    try:
        ax = fig.add_axes((0.08, 0.15, 0.9, 0.75))
        ax.bar(pos - 0.2, planned[order], width=0.4, color="0.65", label=f"planned (spec v{old.version})")
        ax.bar(pos + 0.2, actual[order], width=0.4, color="tab:orange", label="under new load")
        ax.axhline(old.max_load, color="crimson", lw=1.2, ls="--", label=f"max_load {old.max_load:g}")
        for k, i in enumerate(order):
            if m.workers[i].utilisation > 1.0:
                ax.annotate(f"{100 * m.workers[i].utilisation:.0f}%", (k + 0.2, actual[i]), ha="center",
                            va="bottom", fontsize=7)
        if len(order) <= 40:
            ax.set_xticks(pos)
            ax.set_xticklabels([m.workers[i].id for i in order], rotation=90, fontsize=7)
        ax.set_ylabel("load")
        ax.set_title(title or f"spec v{old.version} under {counts.source}: max worker "
                     f"{100 * m.max_utilisation:.0f}% of max_load")
        ax.legend(fontsize=8)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)
