"""Declared crowds: load an operator knows is coming (a match, a concert), reserved before any window shows it.

A stadium crowd ramps onto one tile in a quarter of an hour. With a 10-minute snapshot-to-live latency, the two
windows after the first one that shows it are served by specs built before it showed, so the worker holding the
venue carries its usual load plus most of the crowd (``bench/README.md``, "Sticky rebuilds on a held-out day"):
no forecast that sees only closed windows can keep that worker under 110 % at a cost near the floor. A fixture list
can. A :class:`DeclaredCrowd` says where (a point), when (from the first arrivals to the last departures) and how
much load the crowd adds at its peak; the predictive policy raises the venue's cell to that load in every forecast
whose interval overlaps the crowd (:func:`reserve`), so the spec live when the first fans arrive already gives the
venue a worker with room for them, and the fleet shrinks back once the crowd has left.

The file format (:func:`parse_crowds`) is a JSON list of objects::

    [{"name": "cup final", "lat": 51.5560, "lon": -0.2796, "start": "2026-05-16T14:00:00Z",
      "end": "2026-05-16T18:00:00Z", "load_per_s": 7.5}]

``start`` and ``end`` are ISO 8601 times with a zone (or epoch seconds); ``load_per_s`` is the load the crowd adds at
its peak per second, in the snapshot's units (events per second unless a cost table weighs them); ``name`` is
optional. The deployed controller reads it from the specs bucket (:data:`geokernel.contracts.crowds.CROWDS_KEY`),
``python -m partitioner simulate --crowds FILE`` from a file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.errors import PolicyError
from geokernel.geo.tiles import tile
from partitioner.load.counts import Counts, Tiles

#: the keys an entry may have (any other is refused, so a misspelt ``load_per_s`` is not silently ignored)
FIELDS = ("name", "lat", "lon", "start", "end", "load_per_s")
_REQUIRED = FIELDS[1:]


@dataclass(frozen=True, slots=True)
class DeclaredCrowd:
    """A crowd expected at a point between two times, adding ``load_per_s`` at its peak.

    Parameters
    ----------
    name : str
        For messages and decisions only.
    lat, lon : float
        The venue, in degrees.
    start, end : float
        Epoch seconds: the first arrivals and the last departures (``start < end``).
    load_per_s : float
        The load the crowd adds at its peak, per second (> 0).

    Raises
    ------
    PolicyError
        A coordinate out of range, ``start >= end`` or a load that is not a positive finite number.
    """

    name: str
    lat: float
    lon: float
    start: float
    end: float
    load_per_s: float

    def __post_init__(self) -> None:
        for f in ("lat", "lon", "start", "end", "load_per_s"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise PolicyError(f"crowd {self.name!r}: {f} must be a finite number, got {v!r}")
        if not -90.0 <= self.lat <= 90.0 or not -180.0 <= self.lon <= 180.0:
            raise PolicyError(f"crowd {self.name!r}: lat must be in [-90, 90] and lon in [-180, 180], got "
                              f"{self.lat!r}, {self.lon!r}")
        if not self.start < self.end:
            raise PolicyError(f"crowd {self.name!r}: start must be before end, got {self.start!r} >= {self.end!r}")
        if not self.load_per_s > 0:
            raise PolicyError(f"crowd {self.name!r}: load_per_s must be > 0, got {self.load_per_s!r}")

    def overlaps(self, t0: float, t1: float) -> bool:
        """True when the crowd is (partly) there between ``t0`` and ``t1`` (epoch s)."""
        return self.start < t1 and self.end > t0


def _time(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise PolicyError(f"{what} must be an ISO 8601 time with a zone or epoch seconds, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            t = datetime.fromisoformat(v)
        except ValueError:
            t = None
        if t is not None and t.tzinfo is not None:
            return t.timestamp()
    raise PolicyError(f"{what} must be an ISO 8601 time with a zone or epoch seconds, got {v!r}")


def parse_crowds(text: str | bytes, where: str) -> tuple[DeclaredCrowd, ...]:
    """Parse a JSON list of declared crowds (the module docstring has the format).

    Parameters
    ----------
    text : str or bytes
        The file's content.
    where : str
        Where it came from (a path or an S3 URI), named in every error.

    Returns
    -------
    tuple of DeclaredCrowd
        In file order (an empty list is no crowd).

    Raises
    ------
    PolicyError
        Not JSON, not a list of objects, a missing or unknown key, or a bad value: one line naming ``where``, the
        entry's index and the bad value.
    """
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{where}: declared crowds are not JSON ({exc})") from None
    if not isinstance(data, list):
        raise PolicyError(f"{where}: declared crowds must be a JSON list of objects, got {type(data).__name__}")
    out = []
    for i, e in enumerate(data):
        what = f"{where}: crowd {i}"
        if not isinstance(e, dict):
            raise PolicyError(f"{what} must be an object, got {e!r}")
        unknown = sorted(set(e) - set(FIELDS))
        if unknown:
            raise PolicyError(f"{what}: unknown key {unknown[0]!r} (expected {', '.join(FIELDS)})")
        missing = [k for k in _REQUIRED if k not in e]
        if missing:
            raise PolicyError(f"{what}: missing {missing[0]!r}")
        name = e.get("name", f"crowd {i}")
        if not isinstance(name, str):
            raise PolicyError(f"{what}: name must be a string, got {name!r}")
        try:
            out.append(DeclaredCrowd(name, e["lat"], e["lon"], _time(e["start"], f"{what} start"),
                                     _time(e["end"], f"{what} end"), e["load_per_s"]))
        except PolicyError as exc:
            raise PolicyError(f"{where}: crowd {i}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
    return tuple(out)


def crowds_json(crowds: Sequence[DeclaredCrowd]) -> bytes:
    """The file :func:`parse_crowds` reads back, times as epoch seconds (the fast path keeps its surges so)."""
    return json.dumps([{"name": c.name, "lat": c.lat, "lon": c.lon, "start": c.start, "end": c.end,
                        "load_per_s": c.load_per_s} for c in crowds], indent=1).encode("utf-8")


def _venue_loads(crowds: Sequence[DeclaredCrowd], zoom: int, window_s: float) -> dict[tuple[int, int], float]:
    """Each venue's grid cell (x, y at ``zoom``) -> the load of its crowds per window (crowds on one cell add up)."""
    need: dict[tuple[int, int], float] = {}
    for c in crowds:
        t = tile(c.lon, c.lat, zoom)
        need[(t.x, t.y)] = need.get((t.x, t.y), 0.0) + c.load_per_s * window_s
    return need


def _grid_loads(counts: Counts, cells: dict[tuple[int, int], float], zoom: int) -> dict[tuple[int, int], float]:
    """The grid load of those of ``cells`` (x, y at the grid ``zoom``) that the counts hold."""
    grid = counts.grid()
    venues = np.array([(cx << zoom) | cy for cx, cy in cells], dtype=np.int64)
    at = np.isin((grid.x << zoom) | grid.y, venues)
    return {(int(x), int(y)): float(w) for x, y, w in zip(grid.x[at], grid.y[at], grid.weight[at], strict=True)}


def reserve(counts: Counts, crowds: Sequence[DeclaredCrowd], t0: float, t1: float, window_s: float
            ) -> tuple[Counts, tuple[DeclaredCrowd, ...]]:
    """Raise each venue's cell to its crowd's load per window wherever a crowd overlaps ``t0..t1``.

    Parameters
    ----------
    counts : Counts
        A forecast (a rolled-up quadtree: the grid and deeper refinement rows).
    crowds : sequence of DeclaredCrowd
    t0, t1 : float
        The interval the spec would serve (epoch s).
    window_s : float
        Seconds per window: a crowd adds ``load_per_s * window_s`` to a window's count.

    Returns
    -------
    (Counts, tuple of DeclaredCrowd)
        The forecast with room for the crowds (``counts`` itself when none overlaps), and the crowds reserved for.

    Notes
    -----
    The venue's cell is the grid cell (the coarsest zoom) holding the point. It is raised to the crowd's load,
    not added to: once the crowd shows in the windows, the forecast already holds it and is kept when larger.
    Every row inside the cell (the grid row and its refinement) is scaled by one factor, so the refinement keeps
    its proportions; a cell without load gets the crowd's load on its grid row (a new row when it has none). Two
    crowds on one cell at once add up. Empty ``counts`` (no grid to place a venue on) are returned unchanged.
    """
    active = tuple(c for c in crowds if c.overlaps(t0, t1))
    if not active or len(counts) == 0:
        return counts, ()
    zoom = counts.grid_zoom
    need = _venue_loads(active, zoom, window_s)
    rows = counts.tiles
    shift = rows.z - zoom
    ax, ay = rows.x >> shift, rows.y >> shift
    have = _grid_loads(counts, need, zoom)
    w = np.array(counts.weights, dtype=np.float64)
    extra: list[tuple[int, int, float]] = []
    for (cx, cy), load in need.items():
        now = have.get((cx, cy), 0.0)
        inside = (ax == cx) & (ay == cy)
        if now >= load:
            continue
        if now > 0:
            w[inside] *= load / now
            continue
        own = np.flatnonzero(inside & (rows.z == zoom))
        if len(own):
            w[own[0]] = load
        else:
            extra.append((cx, cy, load))
    x, y, z = rows.x, rows.y, rows.z
    if extra:
        x = np.concatenate([x, np.array([e[0] for e in extra], dtype=x.dtype)])
        y = np.concatenate([y, np.array([e[1] for e in extra], dtype=y.dtype)])
        z = np.concatenate([z, np.full(len(extra), zoom, dtype=z.dtype)])
        w = np.concatenate([w, np.array([e[2] for e in extra])])
    return Counts.from_tiles(Tiles(x, y, z), w, counts.source), active


def venue_codes(crowds: Sequence[DeclaredCrowd], zoom: int, t0: float, t1: float) -> npt.NDArray[np.int64]:
    """Tile codes (``x << zoom | y``) at ``zoom`` of the venues of the crowds there (partly) between ``t0`` and ``t1``.

    Notes
    -----
    Sorted and unique; empty when no crowd overlaps. The predictive policy leaves these tiles out of its forecast
    error (:meth:`partitioner.control.predictive.PredictivePolicy.headroom`): a declared crowd's load is reserved,
    not forecast, so the error its ramps make says nothing about the forecast elsewhere.
    """
    codes = []
    for c in crowds:
        if c.overlaps(t0, t1):
            t = tile(c.lon, c.lat, zoom)
            codes.append((t.x << zoom) | t.y)
    return np.unique(np.array(codes, dtype=np.int64))
