"""How good is a spec for a given load: utilisation and shape.

:func:`evaluate` attributes load per quadkey to a spec's partitions with
:meth:`geokernel.partition_spec.index.SpecIndex.attribute` (longest prefix wins; a hash-split
cell's load is shared by hash range), so it measures a spec under the load it was
built from *and* an old spec under new load (the mismatch report of the published
greedy algorithm, "Partition 2: 2257 -> 6602 points (264% utilized)").
:mod:`partitioner.output.compare` measures how much load keeps its partition and worker
between two specs. Shapes are measured by :mod:`geokernel.partition_spec.geometry`;
:mod:`partitioner.output.render` prints the partition table, a worker table and a summary.

Definitions
-----------
utilisation
    ``load / max_load`` per partition and per worker.
lower bound
    ``ceil(total / max_load)`` (at least 1): no spec can use fewer workers
    (:func:`partitioner.load.bound.lower_bound`, the one the builders aim at).
contiguity
    every region (a partition that is neither the catch-all nor a hash-split share)
    is 8-connected over its cells at the *geometry zoom* (normally the counts' grid
    zoom): its listed cells minus the finer cells other partitions list inside them
    (:func:`geokernel.partition_spec.geometry.owned_squares`), deeper listed cells coarsened to that zoom. Empty cells a
    region lists to bridge gaps count as part of it.
compactness
    ``P^2 / (4 pi A)`` per region in tile units: ``A`` = cells of the region, ``P`` =
    cell edges on its boundary. A square of k x k cells scores ``4 / pi`` ~ 1.27, a
    line of n cells ``(2n + 2)^2 / (4 pi n)``; lower is more compact.
boundary-load share
    share of the total load on loaded grid cells that have a loaded 8-neighbour owned
    by a different worker (the load that needs a neighbour's data in a buffer ring).

Notes
-----
* **Antimeridian.** Adjacency wraps in x (column ``2^z - 1`` touches column 0), never
  in y: a region spanning the antimeridian is contiguous, one touching the pole
  rows has boundary edges there.
* **Zoom limits.** Shapes are measured on the quadtree squares a region owns, without
  expanding them (cost ~ the squares' perimeters). If their rings would exceed
  :data:`geokernel.partition_spec.geometry.GEOMETRY_BUDGET` cells, geometry is measured at the deepest coarser zoom that
  fits (``SpecMetrics.geometry_zoom`` says which).
* **Rolled-up counts.** With refinement rows (a quadtree), load is attributed at the
  leaves: each row keeps its weight minus its children's, so nothing counts twice.
  Geometry and the boundary share use grid cells; a grid cell whose refined pieces
  belong to several partitions counts for the owner of its grid-zoom prefix.
* Hash-split cells count, for the boundary share, as owned by the worker of the share
  with the lowest hash range.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from geokernel.geo.graph import boundary_mask
from geokernel.geo.tiles import FloatArray, IntArray, arrays_to_quadkeys
from geokernel.partition_spec.geometry import Shapes, geometry_zoom, square_shapes
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.load.bound import lower_bound
from partitioner.load.counts import Counts


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (a measure that does not exist, e.g. no region) as None: valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _flat(record: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a dict, values as they are (no recursion, no copies)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True)
class PartitionMetrics:
    """One partition under the evaluated load (``planned_load`` is what the spec recorded)."""

    id: str
    worker: str
    planned_load: float
    load: float
    utilisation: float
    share: float
    is_catch_all: bool
    cells: int
    components: int
    compactness: float | None  # None for the catch-all and hash-split shares

    @property
    def is_region(self) -> bool:
        return not self.is_catch_all and self.share == 1.0


@dataclass(frozen=True)
class WorkerMetrics:
    """One worker under the evaluated load."""

    id: str
    planned_load: float
    load: float
    utilisation: float
    partitions: tuple[str, ...]


@dataclass(frozen=True)
class SpecMetrics:
    """Everything :func:`evaluate` measures; see the module docstring for definitions."""

    version: int
    strategy: str
    max_load: float
    source: str
    grid_zoom: int
    geometry_zoom: int
    total: float
    lower_bound: int
    partitions: tuple[PartitionMetrics, ...]
    workers: tuple[WorkerMetrics, ...]
    max_utilisation: float
    mean_utilisation: float
    median_utilisation: float
    max_partition_utilisation: float
    contiguous: bool
    non_contiguous: tuple[str, ...]
    median_compactness: float
    boundary_load_share: float
    unlisted_load: float  # load that only the catch-all owns
    spec_bytes: int = 0  # size of the spec's JSON as the CLI writes it (0: not measured)

    @property
    def worker_count(self) -> int:
        return len(self.workers)

    @property
    def regions_per_worker(self) -> tuple[float, int]:
        """Median and largest number of regions a worker owns (the catch-all not counted)."""
        catch_all = {p.id for p in self.partitions if p.is_catch_all}
        per = [sum(1 for pid in w.partitions if pid not in catch_all) for w in self.workers]
        return (float(np.median(per)), max(per)) if per else (0.0, 0)

    @property
    def region_count(self) -> int:
        return sum(1 for p in self.partitions if not p.is_catch_all)

    @property
    def waste_ratio(self) -> float:
        """Workers per lower-bound worker (1.0 is perfect packing)."""
        return self.worker_count / self.lower_bound

    @property
    def over_max(self) -> tuple[WorkerMetrics, ...]:
        """Workers above ``max_load`` under this load, worst first."""
        over = [w for w in self.workers if w.utilisation > 1.0 + 1e-9]
        return tuple(sorted(over, key=lambda w: -w.utilisation))

    @property
    def mismatch(self) -> float:
        """Max worker utilisation of this load on this spec (the "264% utilized" of a mismatch report)."""
        return self.max_utilisation

    def to_dict(self) -> dict[str, Any]:
        """Every field and derived measure as JSON-ready values (non-finite floats as None).

        Notes
        -----
        Built field by field, one level deep (every field is a plain value, a tuple of strings or a tuple of the
        flat records above; tuples become lists in ``_json_safe``), without ``dataclasses.asdict``'s recursion and
        deep copies.
        """
        d = _flat(self)
        d["partitions"] = [_flat(p) for p in self.partitions]
        d["workers"] = [_flat(w) for w in self.workers]
        median_regions, max_regions = self.regions_per_worker
        d.update(worker_count=self.worker_count, region_count=self.region_count, waste_ratio=self.waste_ratio,
                 mismatch=self.mismatch, median_regions_per_worker=median_regions,
                 max_regions_per_worker=max_regions)
        safe: dict[str, Any] = _json_safe(d)
        return safe

    def to_json(self) -> str:
        """:meth:`to_dict` as the text ``--json`` writes: one key per line, each partition and worker on a line of
        its own (readable, and written by the C encoder: ``indent`` would use Python's pure-Python one)."""
        rows = []
        for key, value in self.to_dict().items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                inner = ",\n  ".join(json.dumps(item) for item in value)
                rows.append(f"{json.dumps(key)}: [\n  {inner}\n ]")
            else:
                rows.append(f"{json.dumps(key)}: {json.dumps(value)}")
        return "{\n " + ",\n ".join(rows) + "\n}\n"


# ---------------------------------------------------------------------------
# load attribution
# ---------------------------------------------------------------------------


def leaf_loads(counts: Counts) -> tuple[tuple[str, ...], FloatArray]:
    """Return quadkeys and weights that count every place once (:meth:`partitioner.load.counts.Counts.leaves`).

    Single-zoom counts come back as they are. For a rolled-up quadtree (refinement
    rows under grid cells) each row keeps its weight minus the weights of its nearest
    listed descendants (clipped at 0), so attributing the rows at their own zoom puts
    refined load where the finer cells say and the rest where the coarse cell is.

    Notes
    -----
    Deeper rows with no listed ancestor are folded into their grid cell, as
    :meth:`partitioner.load.counts.Counts.grid` does.
    """
    if len(counts.zooms) == 1:
        return counts.quadkeys, np.asarray(counts.weights, dtype=np.float64)
    leaves = counts.leaves()
    return tuple(arrays_to_quadkeys(leaves.x, leaves.y, leaves.z)), leaves.weight


# ---------------------------------------------------------------------------
# boundary load
# ---------------------------------------------------------------------------


def boundary_load_share(spec: Spec, index: SpecIndex, counts: Counts, grid_owner: IntArray | None = None) -> float:
    """Share of load on loaded grid cells with a loaded 8-neighbour of another worker.

    ``grid_owner``: the partition of each grid cell, if already located (else it is).
    """
    grid = counts.grid()
    loaded = grid.weight > 0
    total = float(grid.weight[loaded].sum())
    if total <= 0 or np.count_nonzero(loaded) < 2:
        return 0.0
    worker_ids = {wk.id: k for k, wk in enumerate(spec.workers)}
    part_worker = np.array([worker_ids.get(p.worker, -1) for p in spec.partitions], dtype=np.int64)
    if grid_owner is None:
        grid_owner = index.locate_xy(grid.x, grid.y, grid.zoom)
    i, j = counts.grid_pairs()
    both = loaded[i] & loaded[j]
    edge = boundary_mask(part_worker[grid_owner], i[both], j[both])
    return float(grid.weight[edge & loaded].sum()) / total


# ---------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------


def evaluate(spec: Spec, counts: Counts) -> SpecMetrics:
    """Measure ``spec`` under the load ``counts``.

    Parameters
    ----------
    spec : Spec
        Any spec (the one built from ``counts`` or an older one: then the loads show the
        mismatch between what the spec planned and what arrives now).
    counts : Counts
        Load per quadkey (single zoom or a rolled-up quadtree).

    Returns
    -------
    SpecMetrics

    Notes
    -----
    Utilisation statistics are over workers. The catch-all and hash-split shares are not
    regions: they are skipped by contiguity and compactness. ``median_compactness`` is NaN
    when the spec has no region with cells.
    """
    index = SpecIndex(spec)
    leaves = counts.leaves()
    owners = index.locate_groups_tiles(leaves.x, leaves.y, leaves.z)
    loads = index.attribute_owners(owners, leaves.weight)
    # single-zoom counts: the leaves are the grid cells, in the same order
    grid_owner = index.resolve(owners) if len(counts.zooms) == 1 else None
    total = float(leaves.weight.sum())
    grid_zoom = counts.grid_zoom
    catch_all = [p.is_catch_all for p in spec.partitions]
    regions = [i for i, p in enumerate(spec.partitions) if not catch_all[i] and p.hash_range is None]
    gzoom = geometry_zoom(spec, grid_zoom, regions, index)
    shapes = square_shapes(spec, regions, gzoom, index)
    comps = shapes.components
    cap = spec.max_load
    parts = _partition_metrics(spec, loads, shapes, regions, catch_all)
    by_worker: dict[str, list[PartitionMetrics]] = defaultdict(list)
    for pm in parts:
        by_worker[pm.worker].append(pm)
    worker_load = {w.id: float(sum(pm.load for pm in by_worker[w.id])) for w in spec.workers}
    workers = tuple(
        WorkerMetrics(id=w.id, planned_load=w.load, load=worker_load[w.id], utilisation=worker_load[w.id] / cap,
                      partitions=tuple(pm.id for pm in by_worker[w.id]))
        for w in spec.workers
    )
    utils = np.array([w.utilisation for w in workers]) if workers else np.zeros(1)
    region_compact = [pm.compactness for pm in parts if pm.compactness is not None]
    non_contig = tuple(spec.partitions[i].id for i in regions if comps[i] > 1)
    return SpecMetrics(
        version=spec.version, strategy=spec.strategy, max_load=cap, source=counts.source, grid_zoom=grid_zoom,
        geometry_zoom=gzoom, total=total, lower_bound=lower_bound(total, cap), partitions=parts, workers=workers,
        max_utilisation=float(utils.max()), mean_utilisation=float(utils.mean()),
        median_utilisation=float(np.median(utils)),
        max_partition_utilisation=max((pm.utilisation for pm in parts), default=0.0),
        contiguous=not non_contig, non_contiguous=non_contig,
        median_compactness=float(np.median(region_compact)) if region_compact else float("nan"),
        boundary_load_share=boundary_load_share(spec, index, counts, grid_owner),
        unlisted_load=index.unlisted_load(loads),
    )


def _partition_metrics(spec: Spec, loads: FloatArray, shapes: Shapes, regions: list[int], catch_all: list[bool]
                       ) -> tuple[PartitionMetrics, ...]:
    """One record per partition (plain Python numbers: the arrays are converted once, not per element)."""
    cap = spec.max_load
    is_region = np.zeros(len(spec.partitions), dtype=bool)
    is_region[regions] = True
    load, area, comps, compact = (a.tolist() for a in (loads, shapes.cells, shapes.components, shapes.compactness))
    measured = (is_region & (shapes.cells > 0)).tolist()
    return tuple(
        PartitionMetrics(id=p.id, worker=p.worker, planned_load=p.load, load=load[i], utilisation=load[i] / cap,
                         share=p.share, is_catch_all=catch_all[i], cells=int(area[i]), components=int(comps[i]),
                         compactness=compact[i] if measured[i] else None)
        for i, p in enumerate(spec.partitions)
    )
