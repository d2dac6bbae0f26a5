"""A spec as a GeoJSON FeatureCollection (RFC 7946), one feature per partition.

Each partition's geometry is the squares it actually owns (its listed quadkeys minus the
finer cells other partitions list inside them), dissolved into polygons with holes by
:func:`geokernel.geo.rings.square_polygons`: a ``Polygon`` when the area is one
edge-connected piece, else a ``MultiPolygon``. Every feature is valid under OGC rules
(shapely ``is_valid``) and covers exactly its squares; features never overlap except the
shares of a hash-split cell, which all cover that one cell.

Properties: ``id``, ``worker``, ``load`` (the spec's, or the load attributed from a
``Counts`` if one is given), ``utilisation`` (load / max_load), ``split_share`` (1.0
unless hash-split), ``hash_range`` (or null), ``catch_all`` (bool), ``quadkeys``
(number listed), ``squares`` (number of quadtree squares owned).

The collection carries ``version``, ``max_load`` and ``strategy`` as foreign members.

Notes
-----
* **Catch-all.** It owns "everything else", which has no useful polygon: its feature has
  ``"geometry": null`` (allowed by RFC 7946) and ``catch_all: true``.
* **Antimeridian.** A quadkey square never crosses it (tile columns end at +/-180), so
  a region spanning it is a ``MultiPolygon`` with polygons on both sides, split at the
  meridian as RFC 7946 section 3.1.9 asks; no ring crosses +/-180.
* **Poles.** Squares stop at +/-85.0511 (web mercator); exterior rings are counter-
  clockwise and holes clockwise, as RFC 7946 section 3.1.6 asks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from geokernel.geo.rings import tile_polygons
from geokernel.geo.tiles import IntArray, quadkeys_to_arrays
from geokernel.partition_spec.geometry import owned_squares
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.load.counts import Counts
from partitioner.output.metrics import leaf_loads

__all__ = ["owned_squares", "spec_to_geojson", "write_geojson"]


def _geometry(x: IntArray, y: IntArray, z: IntArray, precision: int) -> dict[str, Any] | None:
    """A Polygon for one piece, a MultiPolygon for several, None for no square."""
    polys = [[p.shell, *p.holes] for p in tile_polygons(x, y, z, precision=precision)]
    if not polys:
        return None
    if len(polys) == 1:
        return {"type": "Polygon", "coordinates": polys[0]}
    return {"type": "MultiPolygon", "coordinates": polys}


def spec_to_geojson(spec: Spec, counts: Counts | None = None, *, precision: int = 7) -> dict[str, Any]:
    """Return the spec as a GeoJSON FeatureCollection dict (see the module docstring).

    Parameters
    ----------
    spec : Spec
    counts : Counts, optional
        If given, ``load`` and ``utilisation`` are the load attributed from it (current load);
        else the loads the spec recorded.
    precision : int
        Decimal places of coordinates (7 ~ 1 cm).
    """
    loads = [p.load for p in spec.partitions]
    if counts is not None:
        qks, w = leaf_loads(counts)
        loads = [float(v) for v in SpecIndex(spec).attribute(qks, w)]
    squares = {pid: list(dict.fromkeys(sq)) for pid, sq in owned_squares(spec).items()}  # a square once
    every = [q for p in spec.partitions for q in squares[p.id]]
    x, y, z = quadkeys_to_arrays(every)  # one conversion for all partitions (each owns disjoint squares)
    ends = np.cumsum([len(squares[p.id]) for p in spec.partitions])
    features: list[dict[str, Any]] = []
    for k, (p, load) in enumerate(zip(spec.partitions, loads, strict=True)):
        sq = squares[p.id]
        a, b = int(ends[k]) - len(sq), int(ends[k])
        geometry = None if p.is_catch_all else _geometry(x[a:b], y[a:b], z[a:b], precision)
        features.append({
            "type": "Feature",
            "id": p.id,
            "geometry": geometry,
            "properties": {
                "id": p.id, "worker": p.worker, "load": load, "utilisation": load / spec.max_load,
                "split_share": p.share, "hash_range": list(p.hash_range) if p.hash_range else None,
                "catch_all": p.is_catch_all, "quadkeys": len(p.quadkeys), "squares": len(sq),
            },
        })
    return {"type": "FeatureCollection", "version": spec.version, "max_load": spec.max_load,
            "strategy": spec.strategy, "features": features}


def write_geojson(spec: Spec, path: str | Path, counts: Counts | None = None) -> Path:
    """Write :func:`spec_to_geojson` to ``path`` (compact JSON) and return the path."""
    p = Path(path)
    p.write_text(json.dumps(spec_to_geojson(spec, counts), separators=(",", ":")) + "\n", encoding="utf-8")
    return p
