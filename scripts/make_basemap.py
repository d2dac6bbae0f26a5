"""Regenerate partitioner/data/basemap_50m.npz from world-atlas's countries-50m.json (one-off, needs npm).

    cd /tmp && npm pack world-atlas@2.0.2 && tar xzf world-atlas-2.0.2.tgz
    .venv/bin/python scripts/make_basemap.py /tmp/package/countries-50m.json partitioner/data/basemap_50m.npz

world-atlas (ISC) is Natural Earth 1:50m admin-0 countries (public domain) as TopoJSON. An arc
used by one country is a coastline, an arc shared by two a land border. Points are stored as
integer thousandths of a degree, as deltas (they compress well); ``partitioner.output.basemap`` reads them.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np


def main(src: str, dst: str) -> None:
    topo = json.loads(Path(src).read_text(encoding="utf-8"))
    (sx, sy), (tx, ty) = topo["transform"]["scale"], topo["transform"]["translate"]
    arcs = []
    for arc in topo["arcs"]:
        q = np.cumsum(np.asarray(arc, dtype=np.int64), axis=0)
        arcs.append(np.stack([q[:, 0] * sx + tx, q[:, 1] * sy + ty], 1))
    uses: Counter[int] = Counter()

    def walk(a: Any) -> None:
        if isinstance(a, int):
            uses[a if a >= 0 else ~a] += 1
        else:
            for b in a:
                walk(b)

    for g in topo["objects"]["countries"]["geometries"]:
        walk(g.get("arcs", []))
    out = {}
    for name, want in (("coast", 1), ("border", 2)):
        lines = [arcs[i] for i in range(len(arcs)) if uses[i] == want]
        q = np.round(np.concatenate(lines) * 1000).astype(np.int32)
        out[name + "_dxy"] = np.diff(q, axis=0, prepend=np.zeros((1, 2), dtype=np.int32)).astype(np.int32)
        out[name + "_start"] = np.cumsum([0] + [len(line) for line in lines[:-1]]).astype(np.int32)
        print(f"{name}: {len(lines)} lines, {len(q)} points")
    np.savez_compressed(dst, **out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
