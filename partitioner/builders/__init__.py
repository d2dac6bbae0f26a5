"""Build a partition spec from load per quadkey: :func:`build_spec` and :func:`build_with_report`.

They check the arguments, look the strategy up in :mod:`~partitioner.builders.registry` and hand the
:class:`~partitioner.builders.protocol.Builder` one :class:`~partitioner.builders.protocol.BuildRequest`.
Two strategies: ``compact`` (the default, :mod:`~partitioner.builders.compact`) and ``seed`` (the greedy
baseline, :mod:`~partitioner.builders.seed`).

Notes
-----
Every spec covers the whole world: a catch-all partition lists the root quadkey
``""`` and owns every place no region lists (a new hotspot with no history has a
home). The catch-all is hosted by the least-loaded worker.

Modules of the compact strategy: :mod:`~partitioner.builders.hot` (step 1),
:mod:`~partitioner.builders.carving` and :mod:`~partitioner.builders.bisection` and
:mod:`~partitioner.builders.cuts` (steps 2-4), :mod:`~partitioner.builders.packing` and
:mod:`~partitioner.builders.fresh` (step 5), :mod:`~partitioner.builders.repair` with
:mod:`~partitioner.builders.plan`, :mod:`~partitioner.builders.relieve` and :mod:`~partitioner.builders.shave`
(step 6); :mod:`~partitioner.builders.shares` states a load in the notes as its share of ``max_load``;
:mod:`~partitioner.builders.ids` (partition and worker ids) and :mod:`~partitioner.builders.assemble`
(the spec of a placement) serve both strategies.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from geokernel.errors import BuildError
from geokernel.partition_spec.model import Spec
from partitioner.builders.assemble import SpecHeader
from partitioner.builders.protocol import Builder, BuildReport, BuildRequest
from partitioner.builders.registry import builder
from partitioner.load.bound import lower_bound
from partitioner.load.counts import Counts, Grid

__all__ = ["build_spec", "build_with_report"]


def build_spec(counts: Counts, max_load: float, *, previous: Spec | None = None, strategy: str = "compact",
               version: int | None = None, created_at: str | None = None, stream_name: str | None = None,
               fill: float = 1.0) -> Spec:
    """Build a validated spec; see :func:`build_with_report`."""
    return build_with_report(counts, max_load, previous=previous, strategy=strategy, version=version,
                             created_at=created_at, stream_name=stream_name, fill=fill).spec


def build_with_report(counts: Counts, max_load: float, *, previous: Spec | None = None,
                      strategy: str = "compact", version: int | None = None, created_at: str | None = None,
                      stream_name: str | None = None, fill: float = 1.0) -> BuildReport:
    """Build a spec from ``counts`` under ``max_load`` and say how.

    Parameters
    ----------
    counts : Counts
        Load per quadkey (a rolled-up quadtree is fine, see :mod:`partitioner.load.counts`).
    max_load : float
        Cap on each worker's load (> 0).
    previous : Spec, optional
        The live spec: ids are kept sticky to it (compact strategy).
    strategy : {"compact", "seed"}
    version : int, optional
        Defaults to ``previous.version + 1`` or 1.
    fill : float
        Target utilisation in (0, 1] that regions and workers are packed to; the spec's
        ``max_load`` stays the hard cap. Operations build below 1 (the rebalance
        policy's ``target_fill``) so that routine growth does not trigger the next
        redeploy at once; the benchmarks build at 1.

    Returns
    -------
    BuildReport
        ``spec`` is validated with :func:`geokernel.partition_spec.rules.check` for ``compact``;
        the ``seed`` baseline may break caps (that is its weakness) and lists the
        broken rules in ``problems`` instead of raising.

    Raises
    ------
    BuildError
        On a bad ``max_load``, an unknown strategy or empty counts.
    """
    chosen = _check_arguments(counts, max_load, strategy, fill)
    cap = float(max_load) * float(fill)
    grid = counts.grid()
    header = _header(counts, grid, float(max_load), previous=previous, strategy=strategy, version=version,
                     created_at=created_at, stream_name=stream_name, fill=fill)
    lb = lower_bound(float(grid.weight.sum()), cap)
    return chosen.build(BuildRequest(counts=counts, grid=grid, cap=cap, lower_bound=lb, previous=previous,
                                     header=header))


def _check_arguments(counts: Counts, max_load: float, strategy: str, fill: float) -> Builder:
    """Return the builder of ``strategy``; raise BuildError naming the first bad argument."""
    if isinstance(max_load, bool) or not isinstance(max_load, (int, float)) or not (
            math.isfinite(max_load) and max_load > 0):
        raise BuildError(f"max_load must be a positive finite number, got {max_load!r}")
    chosen = builder(strategy)
    if len(counts) == 0:
        raise BuildError(f"{counts.source}: no load to partition")
    if isinstance(fill, bool) or not isinstance(fill, (int, float)) or not 0 < fill <= 1:
        raise BuildError(f"fill must be a number in (0, 1], got {fill!r}")
    return chosen


def _header(counts: Counts, grid: Grid, hard_cap: float, *, previous: Spec | None, strategy: str,
            version: int | None, created_at: str | None, stream_name: str | None, fill: float) -> SpecHeader:
    """The spec's version, stamp and ``source`` record (total load, lower bound at the hard cap, fill)."""
    if version is None:
        version = previous.version + 1 if previous is not None else 1
    total = float(grid.weight.sum())
    source = {"counts": counts.source, "grid_zoom": grid.zoom, "total_load": total,
              "lower_bound": lower_bound(total, hard_cap), "fill": float(fill)}
    return SpecHeader(version=version, max_load=hard_cap,
                      previous_version=previous.version if previous is not None and previous.version < version else None,
                      created_at=created_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), strategy=strategy,
                      stream_name=stream_name, source=source)
