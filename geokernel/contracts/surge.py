"""The fast path's records: a router's surge signal, and where the partitioner keeps the surges it relieved.

* ``control/surge/v<version:08d>/<worker>-<quadkey>.json`` (:func:`signal_key`) in the specs bucket: one
  :class:`SurgeSignal`, put by a router execution environment whose counts show a worker of the active spec heading
  past its cap (:mod:`geokernel.surge.meter`). The put is conditional (``If-None-Match: *``): of all the environments
  that see the same surge, the first one's signal is the one, and the others' puts fail with ``412`` and are dropped.
  The partitioner Lambda reads it (its S3 notification on :data:`SIGNAL_PREFIX`) and relieves the surge
  (``lambdas.partitioner.surge``). Nothing reads a signal twice; a lifecycle rule may expire them.
* ``control/surges.json`` (:data:`SURGES_KEY`): the surges the partitioner relieved and still holds room for, in the
  declared crowds' format (:mod:`partitioner.control.crowds`); written by the partitioner's fast path only, read by its
  window path, which reserves them as it reserves a declared crowd until they expire.

Loads are per snapshot window (the spec's ``max_load`` units); ``slope`` is the load per window gained per second.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.errors import ContractError

#: Every surge signal's key starts with this (the partitioner's notification filter)
SIGNAL_PREFIX = "control/surge/"
#: The surges the partitioner relieved (declared crowds' format), in the specs bucket
SURGES_KEY = "control/surges.json"
SIGNAL_FORMAT = "geo-rebalancer.surge-signal/1"

_SIGNAL_KEY = re.compile(r"^control/surge/v(?P<version>\d{8,})/(?P<worker>[A-Za-z0-9_.-]+)-(?P<quadkey>[0-3]*)\.json$")
_QUADKEY = re.compile(r"^[0-3]*$")


def signal_key(version: int, worker: str, quadkey: str) -> str:
    """The S3 key of a surge signal: ``control/surge/v<version:08d>/<worker>-<quadkey>.json``.

    ``quadkey`` is the signal's leading cell: one signal per version, worker and leading cell.
    """
    return f"{SIGNAL_PREFIX}v{version:08d}/{worker}-{quadkey}.json"


def parse_signal_key(key: str) -> tuple[int, str, str] | None:
    """``(version, worker, quadkey)`` of a :func:`signal_key`, None for any other key."""
    m = _SIGNAL_KEY.match(key)
    return (int(m["version"]), m["worker"], m["quadkey"]) if m else None


def _number(d: Mapping[str, Any], key: str, what: str, *, low: float | None = 0.0) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (low is not None and v < low):
        bound = "" if low is None else f" >= {low:g}"
        raise ContractError(f"{what}: {key!r} must be a finite number{bound}, got {v!r}")
    return float(v)


@dataclass(frozen=True, slots=True)
class SurgeCell:
    """A grid cell whose load rose: before (``base``), in the last interval (``now``), and its rise per second."""

    quadkey: str
    base: float
    now: float
    slope: float

    def __post_init__(self) -> None:
        if not isinstance(self.quadkey, str) or not _QUADKEY.match(self.quadkey) or not self.quadkey:
            raise ContractError(f"surge cell: quadkey must be a non-empty quadkey, got {self.quadkey!r}")
        for name in ("base", "now", "slope"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise ContractError(f"surge cell {self.quadkey!r}: {name} must be a finite number >= 0, got {v!r}")

    def projected(self, seconds: float) -> float:
        """Its load ``seconds`` from the end of the interval if it goes on rising as it did."""
        return self.now + self.slope * max(0.0, seconds)

    def to_dict(self) -> dict[str, Any]:
        return {"quadkey": self.quadkey, "base": self.base, "now": self.now, "slope": self.slope}

    @classmethod
    def from_dict(cls, d: Any, what: str) -> SurgeCell:
        if not isinstance(d, Mapping):
            raise ContractError(f"{what}: a cell must be an object, got {d!r}")
        return cls(str(d.get("quadkey", "")), _number(d, "base", what), _number(d, "now", what),
                   _number(d, "slope", what))


@dataclass(frozen=True, slots=True)
class SurgeSignal:
    """A worker of spec ``version`` heading past its cap, as one router environment's counts show it.

    Parameters
    ----------
    version, worker : int, str
        The active spec the events were routed by, and the worker.
    at : float
        Epoch seconds: the end of the interval the counts cover.
    window_s : float
        The spec's snapshot window: every load here is per window of that length (the cap's units).
    horizon_s : float
        How far ahead ``projected`` looks (the meter's ``horizon_s``: its interval plus the relief's latency).
    cap, planned, measured, projected : float
        The spec's ``max_load``; the worker's load as the spec planned it, as measured in the last interval, and
        as projected ``horizon_s`` ahead (what made it signal).
    cells : tuple of SurgeCell
        The worker's cells that surged, the steepest first (at least one).
    loads : tuple of (str, float)
        Every worker of the spec with its measured load: where there is room.
    """

    version: int
    worker: str
    at: float
    window_s: float
    horizon_s: float
    cap: float
    planned: float
    measured: float
    projected: float
    cells: tuple[SurgeCell, ...]
    loads: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        what = f"surge signal v{self.version!r} {self.worker!r}"
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ContractError(f"surge signal: version must be an integer >= 1, got {self.version!r}")
        if not isinstance(self.worker, str) or not re.match(r"^[A-Za-z0-9_.-]+$", self.worker):
            raise ContractError(f"surge signal v{self.version}: worker must be an id of letters, digits, '_', '.' "
                                f"or '-', got {self.worker!r}")
        for name in ("at", "window_s", "horizon_s", "cap", "planned", "measured", "projected"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise ContractError(f"{what}: {name} must be a finite number >= 0, got {v!r}")
        if not self.window_s > 0 or not self.cap > 0:
            raise ContractError(f"{what}: window_s and cap must be > 0, got {self.window_s!r}, {self.cap!r}")
        if not self.cells:
            raise ContractError(f"{what}: names no cell")

    @property
    def key(self) -> str:
        """Where it is stored (:func:`signal_key`, its leading cell)."""
        return signal_key(self.version, self.worker, self.cells[0].quadkey)

    def to_dict(self) -> dict[str, Any]:
        return {"format": SIGNAL_FORMAT, "version": self.version, "worker": self.worker, "at": self.at,
                "window_s": self.window_s, "horizon_s": self.horizon_s, "cap": self.cap, "planned": self.planned,
                "measured": self.measured, "projected": self.projected,
                "cells": [c.to_dict() for c in self.cells], "loads": [[w, v] for w, v in self.loads]}

    def to_bytes(self) -> bytes:
        """UTF-8 JSON (round trip with :meth:`from_bytes`)."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "surge signal") -> SurgeSignal:
        """Decode :meth:`to_bytes`; :class:`ContractError` naming ``where``, the field and the bad value."""
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ContractError(f"{where}: not UTF-8 JSON ({exc})") from None
        if not isinstance(d, dict) or d.get("format") != SIGNAL_FORMAT:
            raise ContractError(f"{where}: not a {SIGNAL_FORMAT} object: {str(d)[:80]!r}")
        cells, loads = d.get("cells"), d.get("loads")
        if not isinstance(cells, list) or not isinstance(loads, list):
            raise ContractError(f"{where}: 'cells' and 'loads' must be lists, got {cells!r:.60}, {loads!r:.60}")
        pairs = []
        for e in loads:
            if (not isinstance(e, list) or len(e) != 2 or not isinstance(e[0], str) or isinstance(e[1], bool)
                    or not isinstance(e[1], int | float) or not math.isfinite(e[1])):
                raise ContractError(f"{where}: a load must be [worker, number], got {e!r}")
            pairs.append((e[0], float(e[1])))
        version = d.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ContractError(f"{where}: 'version' must be an integer, got {version!r}")
        return cls(version, str(d.get("worker", "")), _number(d, "at", where), _number(d, "window_s", where),
                   _number(d, "horizon_s", where), _number(d, "cap", where), _number(d, "planned", where),
                   _number(d, "measured", where), _number(d, "projected", where),
                   tuple(SurgeCell.from_dict(c, where) for c in cells), tuple(pairs))
