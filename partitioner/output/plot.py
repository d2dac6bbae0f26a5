"""PNG pictures of a spec: the partition map with per-worker load bars, and old-vs-new mismatch bars.

The only modules of :mod:`partitioner` that import matplotlib are this one (Agg backend,
no display); the CLI imports it lazily, so the library itself never needs matplotlib.

* :func:`plot_spec`: left, the partitions on a web-mercator map (x = longitude, y =
  mercator latitude, so squares stay square) over the bundled basemap (coastlines and
  country borders, :mod:`partitioner.output.basemap`), zoomed to the data; when it is zoomed in,
  a small world map above the bars marks where the view is. Each worker has one colour, different from the
  workers it borders and the same across spec versions where the neighbours allow
  (:mod:`partitioner.output.mapcolours`); lines are drawn where the worker changes, not around
  every cell; workers are labelled when there are at most 40. Right, one bar per worker:
  its load as a percentage of the cap, with the cap line. The title says which spec is
  drawn under which load.
* :func:`plot_mismatch`: per worker of an old spec, the load it planned and the load it
  gets under new counts, against the cap (the "264% utilized" of a mismatch report).

Notes
-----
* **Antimeridian.** When the data is closer together across +/-180 than across the rest
  of the world, the view is re-centred: longitudes west of the widest empty band are drawn
  shifted by 360 degrees (ticks still read -180..180), so a region spanning the meridian
  is drawn in one piece.
* **Poles.** The map stops at the mercator limit +/-85.0511.
* **Dense maps.** Cells smaller than two pixels are drawn as coloured dots without border
  lines; border lines thin out as they grow in number.
* The PNG's pixel size is exactly ``size`` x ``dpi`` (no tight bounding box).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")

import matplotlib.patheffects as pe
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter

from geokernel.geo.tiles import MAX_LAT, quadkeys_to_arrays
from geokernel.partition_spec.geometry import owned_squares
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.load.counts import Counts
from partitioner.output.basemap import basemap_lines
from partitioner.output.mapcolours import colour_slots, worker_borders
from partitioner.output.metrics import SpecMetrics, evaluate

FloatArray = npt.NDArray[np.float64]
Colour = tuple[float, float, float, float]
MAX_DRAWN_CELLS = 400_000  # border lines beyond this many cells are measured at a coarser zoom
MAX_LABELLED_WORKERS = 40
# Qualitative colours that stay apart on white and from each other (tab10 without its grey, plus navy,
# gold and plum of tab20b): neighbours never share one while a worker has fewer than 12 neighbours.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#393b79", "#e7ba52", "#7b4173")
MAP_BOX = (0.05, 0.08, 0.55, 0.80)  # figure fraction of the map axes
INSET_BOX = (0.67, 0.66, 0.31, 0.24)  # the world inset, above the bars
BARS_BOX, BARS_BOX_LOW = (0.67, 0.14, 0.31, 0.74), (0.67, 0.14, 0.31, 0.42)


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


class Cells(NamedTuple):
    """Owned squares in map units (shifted for the view), with their worker and colour."""

    west: FloatArray
    east: FloatArray
    south: FloatArray
    north: FloatArray
    worker: list[str]


def _lon_cut(west: FloatArray, east: FloatArray) -> float:
    """Longitude where the view starts: -180, or the east end of the widest empty band when starting there
    narrows the view by more than a quarter (data gathered around +/-180 rather than spread over the world)."""
    if len(west) == 0:
        return -180.0
    order = np.argsort(west, kind="stable")
    w, e = west[order], np.maximum.accumulate(east[order])
    span = float(e[-1] - w[0])
    if len(w) > 1:
        gaps = w[1:] - e[:-1]
        k = int(np.argmax(gaps))
        if 360.0 - float(gaps[k]) < 0.75 * span:
            return float(w[k + 1])
    return -180.0


def _shift(lon: FloatArray, cut: float) -> FloatArray:
    return np.where(lon < cut, lon + 360.0, lon)


def _cells(spec: Spec) -> Cells:
    squares = owned_squares(spec)
    qks: list[str] = []
    workers: list[str] = []
    for p in spec.partitions:
        qks += squares[p.id]
        workers += [p.worker] * len(squares[p.id])
    x, y, z = quadkeys_to_arrays(qks)
    w, e, s, n = _tile_edges(x, y, z)
    return Cells(w, e, s, n, workers)


def _extent(xs: list[FloatArray], ys: list[FloatArray]) -> tuple[float, float, float, float]:
    """Data extent (x0, x1, y0, y1 in map units) with a margin, at least ~2 degrees wide; the world if no data."""
    if not xs or not sum(len(v) for v in xs):
        return -180.0, 180.0, merc_y(-MAX_LAT).item(), merc_y(MAX_LAT).item()
    x0, x1 = float(min(v.min() for v in xs)), float(max(v.max() for v in xs))
    y0, y1 = float(min(v.min() for v in ys)), float(max(v.max() for v in ys))
    pad = 0.06 * max(x1 - x0, y1 - y0, 1e-4)
    return x0 - pad, x1 + pad, max(y0 - pad, -180.0), min(y1 + pad, 180.0)


def _lat_of(y: float) -> float:
    return math.degrees(math.atan(math.sinh(math.radians(y))))


def _axes_labels(ax: Axes, x0: float, x1: float, y0: float, y1: float) -> None:
    """Graticule, degree ticks (longitudes wrapped to -180..180) and axis labels."""
    span = max(x1 - x0, y1 - y0, 1e-6)
    step = next((s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60) if span / s <= 8), 90.0)
    ax.set_xticks(np.arange(math.ceil(x0 / step) * step, x1 + 1e-9, step))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{(v + 180.0) % 360.0 - 180.0:g}°"))
    lats = np.arange(math.ceil(_lat_of(y0) / step) * step, _lat_of(y1) + 1e-9, step)
    lats = lats[np.abs(lats) <= MAX_LAT]
    ax.set_yticks(merc_y(lats))
    ax.set_yticklabels([f"{v:g}°" for v in lats])
    ax.grid(color="0.88", lw=0.5, zorder=0)
    ax.set_axisbelow(True)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude (web-mercator scale)")


def _basemap(ax: Axes, box: tuple[float, float, float, float], cut: float, lw: float = 0.6) -> None:
    lines = basemap_lines(box, (0.0, 360.0) if cut > -180.0 else (0.0,))
    ax.add_collection(LineCollection(list(lines.coast), colors="0.45", linewidths=lw, zorder=1))
    ax.add_collection(LineCollection(list(lines.borders), colors="0.65", linewidths=0.6 * lw, zorder=1))


def _underlay(ax: Axes, counts: Counts, cut: float) -> tuple[FloatArray, FloatArray]:
    """Grey log-scaled heat of the counts (under the colours); return its x and y edges for the extent."""
    cx, cy, cz = quadkeys_to_arrays(counts.quadkeys)
    cw, ce, cs, cn = _tile_edges(cx, cy, cz)
    dx = _shift((cw + ce) / 2, cut) - (cw + ce) / 2
    cw, ce = cw + dx, ce + dx
    heat = np.log1p(np.asarray(counts.weights, dtype=np.float64))
    shade = plt.get_cmap("Greys")(0.15 + 0.85 * heat / max(float(heat.max()), 1e-9))
    ax.add_collection(PolyCollection(list(_rects(cw, ce, cs, cn)), facecolors=shade, edgecolors="none", zorder=1.5))
    return np.concatenate([cw, ce]), np.concatenate([cs, cn])


def _borders(ax: Axes, spec: Spec, zoom: int, cut: float) -> frozenset[tuple[str, str]]:
    """Lines where the worker changes (thinner as they grow in number); return the neighbouring worker pairs."""
    b = worker_borders(spec, SpecIndex(spec), zoom, max_cells=MAX_DRAWN_CELLS)
    if len(b.segments):
        n = float(1 << b.zoom)
        seg = b.segments.astype(np.float64)
        lon = np.stack([seg[:, 0], seg[:, 2]], 1) / n * 360.0 - 180.0
        mid = lon.mean(axis=1)
        lon += (_shift(mid, cut) - mid)[:, None]
        lat = 180.0 - np.stack([seg[:, 1], seg[:, 3]], 1) / n * 360.0
        lw = 0.9 if len(seg) < 3_000 else 0.5 if len(seg) < 30_000 else 0.3
        ax.add_collection(LineCollection(list(np.stack([lon, lat], 2)), colors="0.1", linewidths=lw, zorder=3))
    return b.pairs


def _labels(ax: Axes, spec: Spec, cells: Cells, x: FloatArray, colours: dict[str, str], dots: bool) -> None:
    """Name the workers (at most MAX_LABELLED_WORKERS): each id at the median of its squares' centres, or,
    when the cells are dots scattered over a wide map, a legend of the worker colours."""
    if len(spec.workers) > MAX_LABELLED_WORKERS:
        return
    if dots:
        handles, names = ax.get_legend_handles_labels()  # the split-cell marker, if any, stays in the legend
        handles = [Rectangle((0, 0), 1, 1, color=colours[w.id]) for w in spec.workers] + handles
        ax.legend(handles, [w.id for w in spec.workers] + names, loc="lower left", fontsize=7, title="worker",
                  title_fontsize=7, ncol=1 + len(spec.workers) // 12, framealpha=0.9)
        return
    wk = np.array(cells.worker)
    ym = (cells.south + cells.north) / 2
    split = {p.worker for p in spec.partitions if p.hash_range is not None}
    for w in spec.workers:
        sel = wk == w.id
        if sel.any():  # a worker sharing a hot cell is labelled above it, clear of the cell's marker
            ax.annotate(w.id, (float(np.median(x[sel])), float(np.median(ym[sel]))),
                        xytext=(0, 10 if w.id in split else 0), textcoords="offset points", fontsize=7,
                        ha="center", va="center", fontweight="bold", zorder=5,
                        path_effects=[pe.withStroke(linewidth=2.5, foreground="white")])


def _inset(fig: Figure, view: tuple[float, float, float, float], cut: float) -> bool:
    """A small world map with the view's rectangle above the bars, when the view is zoomed in; True if drawn."""
    x0, x1, y0, y1 = view
    if x1 - x0 > 120.0:
        return False
    ins = fig.add_axes(INSET_BOX)
    wx0 = cut if cut > -180.0 else -180.0
    world = (wx0, wx0 + 360.0, float(merc_y(-60.0)), float(merc_y(80.0)))
    _basemap(ins, world, cut, lw=0.3)
    ins.add_patch(Rectangle((x0, y0), max(x1 - x0, 3.0), max(y1 - y0, 3.0), fill=False, ec="crimson", lw=1.2))
    ins.set_xlim(world[0], world[1])
    ins.set_ylim(world[2], world[3])
    ins.set_xticks([])
    ins.set_yticks([])
    ins.set_facecolor("white")
    ins.set_aspect("equal", adjustable="box", anchor="C")
    ins.set_title("where the map is", fontsize=9)
    return True


def _source_name(source: str) -> str:
    """The last part of a counts source path; the folder for a snapshot's ``_manifest.json``."""
    parts = [p for p in source.split("/") if p]
    if len(parts) > 1 and parts[-1].startswith("_"):
        return parts[-2]
    return parts[-1] if parts else source


def _title(spec: Spec, counts: Counts | None, title: str | None) -> str:
    load = f"load from {_source_name(counts.source)}" if counts is not None else "the load it was built for"
    what = f"map: spec v{spec.version} ({spec.strategy or 'spec'}) under {load}; cap {spec.max_load:g} per worker"
    head = title or (f"spec v{spec.version} under new load" if counts is not None else f"spec v{spec.version}")
    return (f"{head}: {len(spec.partitions) - 1} regions on {len(spec.workers)} workers\n{what}"
            if title is None else f"{head}\n{what}")


def _draw_cells(ax: Axes, cells: Cells, x_shift: FloatArray, colours: dict[str, str], cell_px: float,
                faded: bool) -> None:
    fc = [colours[w] for w in cells.worker]
    w, e = cells.west + x_shift, cells.east + x_shift
    if cell_px >= 2.0:
        ax.add_collection(PolyCollection(list(_rects(w, e, cells.south, cells.north)), facecolors=fc,
                                         edgecolors="none", alpha=0.6 if faded else 0.8, zorder=2))
    else:  # cells smaller than two pixels: dots four pixels wide, coloured by worker, no border lines
        size_pt = (4.0 * 72.0 / ax.figure.dpi) ** 2
        ax.scatter((w + e) / 2, (cells.south + cells.north) / 2, s=size_pt, c=fc, marker="s", linewidths=0,
                   zorder=2)


def _hash_split(ax: Axes, spec: Spec, cut: float) -> None:
    split = sorted({p.quadkeys[0] for p in spec.partitions if p.hash_range is not None})
    if split:  # hot cells shared by entity hash: hatched, outlined in red
        hx, hy, hz = quadkeys_to_arrays(split)
        w, e, s, n = _tile_edges(hx, hy, hz)
        dx = _shift(w, cut) - w
        ax.add_collection(PolyCollection(list(_rects(w + dx, e + dx, s, n)), facecolors="none", edgecolors="crimson",
                                         hatch="////", linewidths=1.0, zorder=4))
        # a marker too: a split cell is often a few pixels wide
        ax.scatter((w + e) / 2 + dx, (s + n) / 2, s=60, marker="x", color="crimson", linewidths=1.5, zorder=6,
                   label="hot cell shared by entity hash")
        ax.legend(loc="upper right", fontsize=7, framealpha=0.9)


def plot_spec(spec: Spec, path: str | Path, counts: Counts | None = None, *, title: str | None = None,
              size: tuple[float, float] = (14.0, 7.0), dpi: int = 100) -> Path:
    """Draw the partition map and the per-worker load bars to a PNG.

    Parameters
    ----------
    spec : Spec
    path : str or Path
        Output PNG.
    counts : Counts, optional
        The load to draw the spec under: a grey log-scaled heat underlay, and the bars
        show this load. Without it, the loads the spec recorded.
    title : str, optional
        First title line; a second line always says which spec is drawn under which load.
    size, dpi
        Figure size in inches and resolution: the PNG is ``size * dpi`` pixels.

    Returns
    -------
    Path
        ``path``.
    """
    cells = _cells(spec)
    cut = _lon_cut(cells.west, cells.east)
    x_shift = _shift(cells.west, cut) - cells.west
    fig = plt.figure(figsize=size, dpi=dpi)
    try:
        ax = fig.add_axes(MAP_BOX)
        xs, ys = [cells.west + x_shift, cells.east + x_shift], [cells.south, cells.north]
        if counts is not None:
            ux, uy = _underlay(ax, counts, cut)
            xs.append(ux)
            ys.append(uy)
        x0, x1, y0, y1 = _extent(xs, ys)
        _basemap(ax, (x0, x1, y0, y1), cut)
        pairs: frozenset[tuple[str, str]] = frozenset()
        if len(cells.worker):
            zoom = int(counts.grid_zoom) if counts is not None else max(len(q) for p in spec.partitions
                                                                         for q in p.quadkeys)
            cell_px = 360.0 / (1 << zoom) / (x1 - x0) * MAP_BOX[2] * size[0] * dpi
            if cell_px >= 2.0:
                pairs = _borders(ax, spec, zoom, cut)
            colours = {w: PALETTE[k] for w, k in colour_slots([w.id for w in spec.workers], pairs,
                                                              len(PALETTE)).items()}
            _draw_cells(ax, cells, x_shift, colours, cell_px, counts is not None)
            _hash_split(ax, spec, cut)
            _labels(ax, spec, cells, (cells.west + cells.east) / 2 + x_shift, colours, cell_px < 2.0)
        else:
            colours = {w.id: PALETTE[0] for w in spec.workers}
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal", adjustable="box")
        _axes_labels(ax, x0, x1, y0, y1)
        ax.set_title(_title(spec, counts, title), fontsize=10)
        bx = fig.add_axes(BARS_BOX_LOW if _inset(fig, (x0, x1, y0, y1), cut) else BARS_BOX)
        _load_bars(bx, spec, evaluate(spec, counts) if counts is not None else None, colours)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)


def _load_bars(ax: Axes, spec: Spec, metrics: SpecMetrics | None, colours: dict[str, str]) -> None:
    if metrics is not None:
        ids = [w.id for w in metrics.workers]
        util = np.array([w.utilisation for w in metrics.workers])
    else:
        ids = [w.id for w in spec.workers]
        util = np.array([w.load / spec.max_load for w in spec.workers])
    order = np.argsort(-util, kind="stable")
    pos = np.arange(len(ids))
    ax.bar(pos, 100 * util[order], color=[colours[ids[k]] for k in order], edgecolor="0.3", linewidth=0.3)
    ax.axhline(100, color="crimson", lw=1.2, ls="--", label=f"cap: {spec.max_load:g} load per worker")
    ax.set_ylabel("load, % of the cap")
    ax.set_xlabel("workers, busiest first")
    if len(ids) <= 30:
        ax.set_xticks(pos)
        ax.set_xticklabels([ids[k] for k in order], rotation=90, fontsize=7)
    ax.set_ylim(0, max(110.0, 105 * float(util.max()) if len(util) else 110.0))
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("load per worker" + (" under the drawn load" if metrics is not None else " (as built)"), fontsize=10)


def plot_mismatch(old: Spec, counts: Counts, path: str | Path, *, title: str | None = None,
                  size: tuple[float, float] = (12.0, 5.0), dpi: int = 100) -> Path:
    """Bars per worker of ``old``: the load it planned vs the load ``counts`` puts on it.

    Workers over the cap (``max_load``) under the new load are labelled with their load in % of it
    (the greedy baseline's report reads "Partition 2: 2257 -> 6602 points (264% utilized)").
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
        ax.axhline(old.max_load, color="crimson", lw=1.2, ls="--", label=f"cap {old.max_load:g}")
        for k, i in enumerate(order):
            if m.workers[i].utilisation > 1.0:
                ax.annotate(f"{100 * m.workers[i].utilisation:.0f}%", (k + 0.2, actual[i]), ha="center",
                            va="bottom", fontsize=7)
        if len(order) <= 40:
            ax.set_xticks(pos)
            ax.set_xticklabels([m.workers[i].id for i in order], rotation=90, fontsize=7)
        ax.set_ylabel("load per worker")
        ax.set_title(title or f"spec v{old.version} under {counts.source}: busiest worker at "
                     f"{100 * m.max_utilisation:.0f}% of the cap")
        ax.legend(fontsize=8)
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return Path(path)
