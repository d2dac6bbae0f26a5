"""Tracktable's text trajectory files (``.traj``) as the CSV the recorded-log reader takes.

``tracktable-data`` ships its larger AIS recordings as ``.traj``: one trajectory per line, comma-separated::

    *T*, <uuid>, <domain>, <points>, <trajectory properties (0)>, *P*, <domain>, 2, 1, 1, <point properties (0)>,
    then per point: <object id>, <YYYY-MM-DD HH:MM:SS>, <longitude>, <latitude>

:func:`traj_to_csv` writes every point as a row of the US MarineCadastre AIS column layout the built-in
``nyharbor`` log has (``MMSI,BaseDateTime,LON,LAT``), so the same column mapping reads both. Only the layout above
(no properties) is taken; any other line is an error naming the file and line, and nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from local.errors import LocalRunError

HEADER = "MMSI,BaseDateTime,LON,LAT"
_FIXED = 11  # fields before the first point


class TrajError(LocalRunError, ValueError):
    """A ``.traj`` line is not in the layout this reader takes."""


def traj_rows(line: str, where: str) -> list[str]:
    """The CSV rows of one trajectory line (``where``: ``file:line`` for the error)."""
    f = line.rstrip("\r\n").split(",")
    if len(f) < _FIXED or f[0] != "*T*" or f[5] != "*P*" or f[4] != "0" or f[10] != "0" or not f[3].isdigit():
        raise TrajError(f"{where}: not a trajectory without properties (*T*,id,domain,N,0,*P*,domain,2,1,1,0,...): "
                        f"{line[:80]!r}")
    n, pts = int(f[3]), f[_FIXED:]
    if len(pts) != 4 * n:
        raise TrajError(f"{where}: {n} points announced, {len(pts) / 4:g} found")
    return [f"{pts[k]},{pts[k + 1].replace(' ', 'T')},{pts[k + 2]},{pts[k + 3]}" for k in range(0, 4 * n, 4)]


def traj_to_csv(src: Path, dst: Path) -> int:
    """Write the points of ``src`` to ``dst`` as CSV (atomically: a bad line leaves ``dst`` as it was); return rows."""
    rows = [HEADER]
    with src.open(encoding="utf-8") as fh:
        for no, line in enumerate(fh, start=1):
            if line.strip():
                rows += traj_rows(line, f"{src}:{no}")
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tmp.replace(dst)
    return len(rows) - 1
