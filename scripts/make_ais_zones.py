"""Regenerate transforms/data/ais_zones.csv: geofences where the ships of the built-in AIS logs go.

    .venv/bin/python scripts/make_ais_zones.py transforms/data/ais_zones.csv

The shipped zones (airports, city centres) lie away from the ships of ``builtin:nyharbor`` and ``builtin:uscoastal``,
so a replay of them with a geofence transform fills ``zones`` and ``transitions`` in no event (the report's ORACLE
section says so). These zones are drawn from the logs themselves: the cells of 0.03 degrees that the most distinct
ships pass through (harbour entrances, channels, berths), at least 0.15 degrees apart, each a circle of
:data:`RADIUS_KM` around the mean position of the points in its cell, so ships enter and leave them. Radius 1.5 km:
inside the buffer ring's safe size with the defaults (3 km up to 72 degrees of latitude; transforms/geofence_state.py).
Use them with ``GEOFENCES_CSV=transforms/data/ais_zones.csv``.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from local.recorded import builtin_log, builtin_path, read_recorded

CELL_DEG = 0.03
APART_DEG = 0.15
RADIUS_KM = 1.5
PER_LOG = {"nyharbor": 8, "uscoastal": 32}


def hotspots(name: str, count: int) -> list[tuple[float, float, int]]:
    """``(lat, lon, distinct ships)`` of the ``count`` busiest cells of ``builtin:name``, ``APART_DEG`` apart."""
    spec = builtin_log(f"builtin:{name}")
    assert spec is not None
    log = read_recorded(builtin_path(spec), spec.columns, time_unit=spec.time_unit)
    lat, lon = np.asarray(log.lat), np.asarray(log.lon)
    ships = np.unique(np.asarray(log.entity_id), return_inverse=True)[1]
    cy, cx = np.floor(lat / CELL_DEG).astype(np.int64), np.floor(lon / CELL_DEG).astype(np.int64)
    cell = cy * 100_000 + cx
    pairs = np.unique(np.stack([cell, ships]), axis=1)
    cells, distinct = np.unique(pairs[0], return_counts=True)
    picked: list[tuple[float, float, int]] = []
    for i in np.argsort(-distinct, kind="stable"):
        inside = cell == cells[i]
        y, x = float(lat[inside].mean()), float(lon[inside].mean())
        if all(abs(y - py) >= APART_DEG or abs(x - px) >= APART_DEG for py, px, _ in picked):
            picked.append((y, x, int(distinct[i])))
        if len(picked) == count:
            break
    return picked


def main(out: str) -> int:
    rows = []
    for name, count in PER_LOG.items():
        for k, (y, x, n) in enumerate(hotspots(name, count), 1):
            rows.append((f"AIS-{name[:2].upper()}{k:02d}", f"{abs(y):.2f}{'N' if y >= 0 else 'S'} "
                         f"{abs(x):.2f}{'E' if x >= 0 else 'W'}: {n} ships of builtin:{name}", f"{y:.5f}", f"{x:.5f}",
                         f"{RADIUS_KM:g}"))
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "lat", "lon", "radius_km"])
        w.writerows(rows)
    print(f"wrote {len(rows)} zones to {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1]))
