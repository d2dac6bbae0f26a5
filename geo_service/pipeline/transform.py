"""The pluggable geo transform and the default: an offline reverse geocoder.

A transform implements :class:`GeoTransform`: ``load_region(quadkeys, buffer_ring)`` once
at warm-up with the worker's region, then ``apply(event)`` per event, returning the
fields it adds to the enriched record. :func:`load_transform` builds one from
``GEO_TRANSFORM`` (``module:Class``, constructed without arguments).

A **stateful** transform (:class:`StatefulTransform`: class attribute ``stateful = True``) keeps a small JSON
value per entity: the worker calls ``apply_stateful(event, state)`` with the entity's state (None the first
time) and stores the :class:`Applied` ``state`` it returns (:class:`geo_service.entity.store.EntityStates`); its
``apply(event)`` is the answer for an entity seen for the first time (``apply_stateful(event, None).fields``).
State lives in the worker serving the entity and follows it to another worker (:mod:`geo_service.entity.handoff`).

**The batch form** (issue #60): a transform may also implement ``apply_batch(events)`` (:class:`BatchTransform`): the
fields of every event of one read batch, in order, as ``apply`` would return them one by one, computed at once (the
reverse geocoder: one KD-tree query for the batch). A stateful one may implement ``prepare_batch(events)`` and
``apply_prepared(event, state, prepared)`` (:class:`PreparedStatefulTransform`): the part of its work that needs no
state, for the whole batch at once, then the stateful rest per event in the worker's order (an entity's events in
the order of its shard, behind the handoff gate). ``apply`` and ``apply_stateful`` stay: a simple transform needs
nothing else, and the worker falls back to them for a batch whose batch call raised (so a bad event is quarantined
alone, as before).

:class:`ReverseGeocoder` (the default) returns the nearest populated place (name,
country, population, great-circle distance in km, GeoNames first-level division key and IANA time zone) from
``geo_service/pipeline/data/places.csv.gz``
(geonames places with >= 1000 people, built by ``geo_service/pipeline/data/build_places.py``).
It keeps **only** the places inside the region's tiles plus ``buffer_ring`` rings of
same-zoom neighbour tiles around each (the catch-all quadkey ``""`` is the whole world),
so its memory scales with the region. Each CSV row starts with the place's zoom-24
quadkey, so a row outside the region is rejected by a string-prefix test before parsing.
Lookups use a KD-tree over unit vectors (chord distance is monotonic in great-circle
distance, so the nearest by chord is the nearest on the sphere).

Notes
-----
``country``, ``admin1`` and ``timezone`` are the nearest *place's*, not those of where the event is: they come from no
boundary or polygon, so near a border, a division's edge or a time-zone line they can be those of the place across it
(docs/TRANSFORM.md, "The default geocoder: what it answers, and where it is wrong").

When the nearest loaded place is farther than the loaded area surely reaches around the point (:mod:`.coverage`),
or the region holds no place (open sea; a few fine cells of countryside), the answer comes from all places (loaded
once, on first need). Places are points: loading them by where they lie is right at every zoom (zones: :mod:`.extent`).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from geo_service.errors import TransformError as TransformError
from geo_service.pipeline.coverage import Coverage
from geo_service.pipeline.places import (
    PLACES_PATH,
    Places,
    distinct_points,
    frozen,
    load_places,
    region_prefixes,
    scan_places,
)

EARTH_RADIUS_KM = 6371.0088


@runtime_checkable
class GeoTransform(Protocol):
    """What the worker needs from a geo transform.

    ``load_region`` is called once before the worker marks itself ready; ``apply`` is
    called for every event (a dict with at least ``event_id``, ``entity_id``, ``lat``,
    ``lon``, already validated) and returns the fields to add to the enriched record.
    """

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None: ...

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]: ...


#: JSON values a stateful transform keeps per entity (what ``json.dumps`` writes without a ``default``).
JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]


@dataclass(frozen=True)
class Applied:
    """What a stateful transform returns for one event.

    Attributes
    ----------
    fields : dict
        The fields to add to the enriched record (as :meth:`GeoTransform.apply` returns them).
    state : JSON value or None
        The entity's new state (stored as JSON, at most :data:`geo_service.entity.store.MAX_STATE_BYTES`); None forgets it.
    """

    fields: dict[str, Any]
    state: JsonValue


@runtime_checkable
class StatefulTransform(GeoTransform, Protocol):
    """A transform that keeps state per entity (``stateful = True``).

    ``apply_stateful(event, state)`` is called for every event in the order the worker reads them (an entity's
    events in the order of its shard) with the entity's last stored state (None for an entity the worker has
    not seen, or whose state was forgotten); it must not change ``state`` in place expecting it to be kept: only
    the returned :attr:`Applied.state` is stored. ``apply(event)`` answers for an entity with no state.
    """

    stateful: bool

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied: ...


@runtime_checkable
class BatchTransform(Protocol):
    """A transform with a batch form: ``apply_batch(events)`` returns, in order, what ``apply`` returns for each."""

    def apply_batch(self, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...


@runtime_checkable
class PreparedStatefulTransform(StatefulTransform, Protocol):
    """A stateful transform that does its state-free part for a whole batch: ``prepare_batch(events)`` (one value per
    event), then ``apply_prepared(event, state, prepared)``, which must equal ``apply_stateful(event, state)``."""

    def prepare_batch(self, events: Sequence[Mapping[str, Any]]) -> Sequence[Any]: ...

    def apply_prepared(self, event: Mapping[str, Any], state: JsonValue, prepared: Any) -> Applied: ...


def batch_form(transform: GeoTransform) -> Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]] | None:
    """``transform.apply_batch`` when it has one (a stateless transform), else None."""
    if stateful_of(transform) is None and isinstance(transform, BatchTransform):
        return transform.apply_batch
    return None


def prepared_form(transform: GeoTransform) -> PreparedStatefulTransform | None:
    """``transform`` when it is stateful and prepares its batches (:class:`PreparedStatefulTransform`), else None."""
    if stateful_of(transform) is not None and isinstance(transform, PreparedStatefulTransform):
        return transform
    return None


def stateful_of(transform: GeoTransform) -> StatefulTransform | None:
    """``transform`` when it declares itself stateful (``stateful = True``), else None (a stateless one)."""
    if getattr(transform, "stateful", False) is True and isinstance(transform, StatefulTransform):
        return transform
    return None


def transform_name(transform: object) -> str:
    """``module:Class`` of ``transform`` (how ``GEO_TRANSFORM`` names it), for messages."""
    cls = type(transform)
    return f"{cls.__module__}:{cls.__qualname__}"


def transform_for_region(current: GeoTransform | None, factory: Callable[[], GeoTransform],
                         quadkeys: Sequence[str], buffer_ring: int) -> tuple[GeoTransform, int]:
    """A transform loaded for ``quadkeys`` and how many reference items it loaded.

    A transform with ``for_region(quadkeys, buffer_ring)`` (the reverse geocoder) builds it from ``current``,
    loading only what the new region adds; any other is built by ``factory`` and loaded whole.
    """
    extend = getattr(current, "for_region", None)
    if current is not None and callable(extend):
        out = extend(quadkeys, buffer_ring)
    else:
        out = factory()
        out.load_region(quadkeys, buffer_ring)
    gained = getattr(out, "gained", None)
    return out, int(gained if gained is not None else getattr(out, "loaded", 0))


def load_transform(spec: str) -> GeoTransform:
    """Build the transform named ``module:Class`` (the ``GEO_TRANSFORM`` value): stateless or stateful.

    Raises
    ------
    TransformError
        The spec is not ``module:Class``, the module or class is missing, the object lacks ``load_region`` and
        ``apply``, or it says ``stateful = True`` without ``apply_stateful``.
    """
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise TransformError(f"GEO_TRANSFORM must be 'module:Class', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TransformError(f"GEO_TRANSFORM {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    cls = getattr(module, class_name, None)
    if cls is None or not callable(cls):
        raise TransformError(f"GEO_TRANSFORM {spec!r}: module {module_name!r} has no class {class_name!r}")
    obj = cls()
    if not isinstance(obj, GeoTransform):
        raise TransformError(f"GEO_TRANSFORM {spec!r}: {class_name!r} lacks load_region(quadkeys, buffer_ring) "
                             f"and apply(event)")
    if getattr(obj, "stateful", False) is True and not callable(getattr(obj, "apply_stateful", None)):
        raise TransformError(f"GEO_TRANSFORM {spec!r}: {class_name!r} says stateful = True but lacks "
                             f"apply_stateful(event, state)")
    return obj


def unit_vectors(lat: npt.ArrayLike, lon: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return (n, 3) unit vectors of points given in degrees."""
    la = np.radians(np.asarray(lat, dtype=np.float64))
    lo = np.radians(np.asarray(lon, dtype=np.float64))
    return np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], axis=-1)


def chord_to_km(chord: float) -> float:
    """Great-circle distance in km for a chord length on the unit sphere."""
    return 2.0 * EARTH_RADIUS_KM * math.asin(min(1.0, chord / 2.0))


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km (reference formula, used by tests and calibration)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2.0 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


class ReverseGeocoder:
    """Nearest populated place from offline data, loaded for one region plus a buffer ring.

    Examples
    --------
    >>> g = ReverseGeocoder()
    >>> g.load_region(["120220011"], buffer_ring=1)   # a zoom-9 tile over Paris
    >>> g.apply({"lat": 48.8566, "lon": 2.3522})["place"]
    'Paris 04 Hôtel-de-Ville'
    """

    def __init__(self, path: Path = PLACES_PATH) -> None:
        self.path = path
        self.prefixes: tuple[str, ...] = ()
        self.places: Places | None = None
        self.coverage = Coverage(())
        self._tree: cKDTree | None = None
        self._population: list[int] = []
        self.gained = 0  # places added by the last load (all of them, or only the gained ones in for_region)

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Load the places of the region's tiles plus ``buffer_ring`` rings around each."""
        self.prefixes = region_prefixes(quadkeys, buffer_ring)
        self._use(load_places(self.prefixes, self.path))
        self.gained = self.loaded

    def for_region(self, quadkeys: Sequence[str], buffer_ring: int) -> ReverseGeocoder:
        """A new geocoder for another region that keeps this one's places inside it and parses only the rest.

        This one is left unchanged (it keeps serving while the new one is built). ``gained`` of the result is
        the number of places it added: those of the tiles (plus buffer) this one did not cover.
        """
        if self.places is None:
            fresh = ReverseGeocoder(self.path)
            fresh.load_region(quadkeys, buffer_ring)
            return fresh
        out = ReverseGeocoder(self.path)
        out.prefixes = region_prefixes(quadkeys, buffer_ring)
        old = self.places
        keep = np.fromiter((q.startswith(out.prefixes) for q in old.quadkey), dtype=bool, count=len(old))
        gained = scan_places(out.prefixes, self.prefixes, self.path)
        idx = np.flatnonzero(keep)
        out._use(Places(lat=frozen(np.concatenate([old.lat[idx], gained.lat])),
                        lon=frozen(np.concatenate([old.lon[idx], gained.lon])),
                        name=tuple(old.name[i] for i in idx) + gained.name,
                        country=tuple(old.country[i] for i in idx) + gained.country,
                        population=frozen(np.concatenate([old.population[idx], gained.population])),
                        quadkey=tuple(old.quadkey[i] for i in idx) + gained.quadkey,
                        admin1=tuple(old.admin1[i] for i in idx) + gained.admin1,
                        timezone=tuple(old.timezone[i] for i in idx) + gained.timezone))
        out.gained = out.loaded - len(idx)  # places sharing a point with another count once (distinct_points)
        return out

    def _use(self, places: Places) -> None:
        places = distinct_points(places)
        self.places, self.coverage = places, Coverage(self.prefixes)
        self._tree = cKDTree(unit_vectors(places.lat, places.lon)) if len(places) else None
        self._population = places.population.tolist()

    @property
    def loaded(self) -> int:
        """Number of places held in memory."""
        return 0 if self.places is None else len(self.places)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``place``, ``country``, ``place_population``, ``distance_km``, ``admin1`` and ``timezone`` of the
        nearest place (all None when the file has no place).

        ``admin1`` is GeoNames' key of the place's first-level division, ``"<country code>.<admin1 code>"`` as GeoNames
        writes it (``"GB.ENG"``, ``"US.CA"``, ``"FR.11"``), None when GeoNames gives the place no admin1 code;
        ``timezone`` is its IANA time zone name (``"Europe/London"``), None when it has none.
        """
        if self.places is None:
            raise TransformError("ReverseGeocoder.apply called before load_region")
        if self._tree is None:  # no place in the region: ask all places, unless all were loaded (there is none)
            nothing = {"place": None, "country": None, "place_population": None, "distance_km": None,
                       "admin1": None, "timezone": None}
            return nothing if self.prefixes == ("",) else _world(self.path).apply(event)
        lat, lon = float(event["lat"]), float(event["lon"])
        chord, i = self._tree.query(unit_vectors(lat, lon))
        if not self.coverage.covers(lon, lat, chord_to_km(float(chord))):  # may lie outside: ask all places
            return _world(self.path).apply(event)
        i = int(i)
        return {"place": self.places.name[i], "country": self.places.country[i],
                "place_population": int(self.places.population[i]),
                "distance_km": round(chord_to_km(float(chord)), 3),
                "admin1": self.places.admin1[i] or None, "timezone": self.places.timezone[i] or None}

    def apply_batch(self, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`apply` of every event, with one KD-tree query for them all (the same answers, in order)."""
        if self.places is None:
            raise TransformError("ReverseGeocoder.apply_batch called before load_region")
        if self._tree is None or not events:
            return [self.apply(e) for e in events]
        n = len(events)
        lat = np.fromiter((float(e["lat"]) for e in events), dtype=np.float64, count=n)
        lon = np.fromiter((float(e["lon"]) for e in events), dtype=np.float64, count=n)
        chords, found = self._tree.query(unit_vectors(lat, lon))
        names, countries, pops = self.places.name, self.places.country, self._population
        admin1s, zones = self.places.admin1, self.places.timezone
        km = [chord_to_km(c) for c in chords.tolist()]
        covered = self.coverage.covers_many(lon, lat, np.array(km))
        out: list[dict[str, Any]] = []
        outside: list[int] = []
        for k, (d, i, ok) in enumerate(zip(km, found.tolist(), covered, strict=True)):
            if not ok:  # may lie outside the loaded area: ask all places (below, at once)
                outside.append(k)
                out.append({})
                continue
            out.append({"place": names[i], "country": countries[i], "place_population": pops[i],
                        "distance_km": round(d, 3), "admin1": admin1s[i] or None, "timezone": zones[i] or None})
        if outside:
            for k, fields in zip(outside, _world(self.path).apply_batch([events[k] for k in outside]), strict=True):
                out[k] = fields
        return out


@functools.lru_cache(maxsize=2)
def _world(path: Path) -> ReverseGeocoder:
    """A geocoder holding every place of ``path`` (built on first need, shared by the process's slots)."""
    world = ReverseGeocoder(path)
    world.load_region([""], 0)
    return world
