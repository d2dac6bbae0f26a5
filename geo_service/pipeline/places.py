"""The reverse geocoder's places: the offline GeoNames file, read for a region's quadkey prefixes only.

``geo_service/pipeline/data/places.csv.gz`` holds the places with >= 1000 people (built by
``geo_service/pipeline/data/build_places.py``; each row ``quadkey,lat,lon,name,country,population,admin1,timezone``, the
last two GeoNames' first-level division key, such as ``GB.ENG``, and IANA time zone, such as ``Europe/London``, empty when
GeoNames gives none). Each CSV row starts with the place's zoom-24 quadkey, so a row outside
the region is rejected by a string-prefix test before parsing (:func:`scan_places`); :func:`region_prefixes` gives the
prefixes of a region plus its buffer ring (:class:`geo_service.pipeline.transform.ReverseGeocoder` loads them).
"""

from __future__ import annotations

import csv
import functools
import gzip
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from geo_service.errors import TransformError
from geokernel.geo.tiles import Tile, parse_quadkey, quadkey, quadkey_to_tile

PLACES_PATH = Path(__file__).with_name("data") / "places.csv.gz"
PLACES_HEADER = "quadkey,lat,lon,name,country,population,admin1,timezone"


def ring_tiles(t: Tile, ring: int) -> list[Tile]:
    """Return ``t`` and every tile within ``ring`` tiles of it at the same zoom (x wraps, y does not)."""
    n = 1 << t.z
    out: set[Tile] = set()
    for dy in range(-ring, ring + 1):
        y = t.y + dy
        if not 0 <= y < n:
            continue
        for dx in range(-ring, ring + 1):
            out.add(Tile((t.x + dx) % n, y, t.z))
    return sorted(out)


def region_prefixes(quadkeys: Iterable[str], buffer_ring: int) -> tuple[str, ...]:
    """Return the minimal set of quadkey prefixes covering the region plus its buffer ring.

    ``""`` (the catch-all) covers the world. A prefix covered by a shorter one is dropped.
    """
    if buffer_ring < 0:
        raise TransformError(f"buffer_ring must be >= 0, got {buffer_ring!r}")
    prefixes: set[str] = set()
    for i, q in enumerate(quadkeys):
        qk = parse_quadkey(q, f"region quadkey #{i}")
        if qk == "":
            return ("",)
        prefixes.update(quadkey(t) for t in ring_tiles(quadkey_to_tile(qk), buffer_ring))
    kept: list[str] = []
    for p in sorted(prefixes, key=lambda s: (len(s), s)):
        if not any(p.startswith(k) for k in kept):
            kept.append(p)
    return tuple(sorted(kept))


@dataclass(frozen=True)
class Places:
    """Places loaded for one region (parallel arrays). ``admin1`` is GeoNames' key of the place's first-level
    division (``"GB.ENG"``), ``timezone`` its IANA time zone (``"Europe/London"``); each ``""`` when GeoNames has none."""

    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    name: tuple[str, ...]
    country: tuple[str, ...]
    population: npt.NDArray[np.int64]
    quadkey: tuple[str, ...]
    admin1: tuple[str, ...]
    timezone: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.name)


def load_places(prefixes: Sequence[str], path: Path = PLACES_PATH) -> Places:
    """Read the places whose quadkey starts with one of ``prefixes`` from the gzip CSV at ``path``.

    Results are cached per (prefixes, path) in the process (a few entries), so several
    in-process workers of one region share one immutable copy.

    Raises
    ------
    TransformError
        If the file is missing, has the wrong header, or a kept row is malformed (names the line).
    """
    return _load_places(tuple(prefixes), Path(path))


@functools.lru_cache(maxsize=4)
def _load_places(want: tuple[str, ...], path: Path) -> Places:
    return scan_places(want, (), path)


def scan_places(want: Sequence[str], exclude: Sequence[str], path: Path = PLACES_PATH) -> Places:
    """Parse the places whose quadkey starts with one of ``want`` and with none of ``exclude`` (not cached).

    A carried-over worker passes the prefixes it already holds as ``exclude``, so only the places it gains
    are parsed (:meth:`ReverseGeocoder.for_region`).
    """
    want, exclude = tuple(want), tuple(exclude)
    lat: list[float] = []
    lon: list[float] = []
    names: list[str] = []
    countries: list[str] = []
    pops: list[int] = []
    qks: list[str] = []
    admin1s: list[str] = []
    zones: list[str] = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            header = f.readline().strip()
            if header != PLACES_HEADER:
                raise TransformError(f"{str(path)!r}: header must be {PLACES_HEADER!r}, got {header!r} "
                                     f"(rebuild it: python -m geo_service.pipeline.data.build_places)")
            numbered = ((n, line) for n, line in enumerate(f, start=2)
                        if line.startswith(want) and not (exclude and line.startswith(exclude)))
            for n, line in numbered:
                row = next(csv.reader([line]))
                try:
                    qk, la, lo, name, cc, pop, admin1, zone = row
                    lat.append(float(la))
                    lon.append(float(lo))
                    pops.append(int(pop))
                except ValueError as exc:
                    raise TransformError(f"{str(path)!r} line {n}: bad place row {line.rstrip()!r}") from exc
                names.append(name)
                countries.append(cc)
                qks.append(qk)
                admin1s.append(admin1)
                zones.append(zone)
    except OSError as exc:
        raise TransformError(f"cannot read places file {str(path)!r}: {exc}") from exc
    return Places(lat=frozen(np.array(lat, dtype=np.float64)), lon=frozen(np.array(lon, dtype=np.float64)),
                  name=tuple(names), country=tuple(countries), population=frozen(np.array(pops, dtype=np.int64)),
                  quadkey=tuple(qks), admin1=tuple(admin1s), timezone=tuple(zones))


def frozen(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a.setflags(write=False)
    return a


def distinct_points(places: Places) -> Places:
    """``places`` with one place per coordinate pair: the most populous (then the first name) of places that share
    their coordinates (the data has a few), so the nearest place of a point never depends on which places a region
    loaded (a KD-tree breaks such ties by its build order)."""
    if len(places) < 2:
        return places
    names = np.array(places.name, dtype=object)
    order = np.lexsort((names, -places.population, places.lon, places.lat))
    lat, lon = places.lat[order], places.lon[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (lat[1:] != lat[:-1]) | (lon[1:] != lon[:-1])
    if first.all():
        return places
    keep = np.sort(order[first])
    return Places(lat=frozen(places.lat[keep]), lon=frozen(places.lon[keep]),
                  name=tuple(places.name[i] for i in keep), country=tuple(places.country[i] for i in keep),
                  population=frozen(places.population[keep]), quadkey=tuple(places.quadkey[i] for i in keep),
                  admin1=tuple(places.admin1[i] for i in keep), timezone=tuple(places.timezone[i] for i in keep))


