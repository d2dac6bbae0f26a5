"""A spec over a row of zoom-12 cells, as the meter and the relief see one, and Poisson intervals of its load."""

from __future__ import annotations

import numpy as np

from geokernel.geo.tiles import Tile, quadkey
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key
from geokernel.surge.meter import Interval, interval

ZOOM = 12
CAP = 1000.0
WINDOW_S = 300.0
BASE = (2000, 1300)


def cell(i: int) -> tuple[int, int]:
    """The tile (x, y) of cell ``i`` of the row."""
    return BASE[0] + 2 * i, BASE[1]


def code(i: int) -> int:
    x, y = cell(i)
    return (x << ZOOM) | y


def qk(i: int) -> str:
    return quadkey(Tile(*cell(i), ZOOM))


def row_spec(loads: list[list[float]], version: int = 3, max_load: float = CAP) -> Spec:
    """Worker ``k`` holds one partition per load of ``loads[k]``, each listing one cell of the row (in order); the
    catch-all rides on the last worker."""
    parts, workers, i = [], [], 0
    for k, ws in enumerate(loads):
        wid = f"w{k + 1:04d}"
        for w in ws:
            parts.append(Partition(f"p{i + 1:04d}", wid, (qk(i),), float(w)))
            i += 1
        workers.append(Worker(wid, float(sum(ws)), shard_hash_key(k, len(loads))))
    parts.append(Partition(f"p{i + 1:04d}", workers[-1].id, ("",), 0.0))
    return Spec(version, max_load, tuple(parts), tuple(workers), stream_name=f"g-v{version}",
                source={"grid_zoom": ZOOM, "window_s": WINDOW_S, "total_load": float(sum(map(sum, loads)))})


def poisson(rng: np.random.Generator, rates: dict[int, float], start: float, end: float) -> Interval:
    """An interval of Poisson counts: ``rates`` is cell index -> load per window (the interval is a share of it)."""
    share = (end - start) / WINDOW_S
    idx = sorted(rates)
    counts = rng.poisson([rates[i] * share for i in idx]).astype(float)
    return interval(start, end, [code(i) for i in idx], counts)
