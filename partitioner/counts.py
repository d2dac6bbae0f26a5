"""Load per quadkey: reading, checking and normalising it for the builder.

Input comes as CSV (``quadkey,weight`` for the CLI and benchmarks) or snapshot
rows (``quadkey,events,cost`` from the aggregation job). Both may hold a
*rolled-up quadtree*: rows at several zooms where a deeper row refines the load
of a shallower ancestor. :meth:`Counts.grid` separates the two roles:

* the **grid**: rows at the shallowest zoom present, plus deeper rows with no
  ancestor present, summed up into their ancestor at the grid zoom. Together
  they hold all the load, each cell once;
* the **refinement**: deeper rows under a present ancestor. They are only used
  to split a grid cell hotter than ``max_load`` into finer cells.

Notes
-----
Zoom limits come from :data:`partitioner.tiles.MAX_ZOOM`. A quadkey listed
twice is an error (it names both lines). Weights must be finite and >= 0.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from partitioner.errors import CountsError, InvalidQuadkeyError
from partitioner.tiles import IntArray, parse_quadkey, quadkeys_to_arrays

FloatArray = npt.NDArray[np.float64]


class Grid(NamedTuple):
    """Cells at one zoom holding all the load: tile ``x``, ``y`` and ``weight`` arrays."""

    zoom: int
    x: IntArray
    y: IntArray
    weight: FloatArray

    def take(self, cells: npt.NDArray[np.bool_] | IntArray) -> Grid:
        """Return the cells picked by a mask or an index array (same zoom)."""
        return Grid(self.zoom, self.x[cells], self.y[cells], self.weight[cells])


@dataclass(frozen=True, eq=False)
class Counts:
    """Load per quadkey (immutable). ``source`` names where it came from, for errors."""

    quadkeys: tuple[str, ...]
    weights: FloatArray
    source: str = "<counts>"

    def __post_init__(self) -> None:
        self.weights.setflags(write=False)

    def __len__(self) -> int:
        return len(self.quadkeys)

    @property
    def zooms(self) -> tuple[int, ...]:
        """The distinct zooms present, shallowest first."""
        return tuple(sorted({len(q) for q in self.quadkeys}))

    @property
    def grid_zoom(self) -> int:
        if not self.quadkeys:
            raise CountsError(f"{self.source}: no rows")
        return min(map(len, self.quadkeys))

    @property
    def total(self) -> float:
        """Total load, counting each place once (the grid's sum)."""
        return float(self.grid().weight.sum())

    def grid(self) -> Grid:
        """Return the grid cells (see module docstring); refinement rows are left out."""
        gz = self.grid_zoom
        x, y, z = quadkeys_to_arrays(self.quadkeys)
        w = np.asarray(self.weights, dtype=np.float64)
        top = z == gz
        deeper = ~top
        if not deeper.any():
            return Grid(gz, x, y, w.copy())
        # a deeper row is refinement if any ancestor is present; else it adds to its grid cell
        present = {(int(zz), int(xx), int(yy)) for xx, yy, zz in zip(x, y, z, strict=True)}
        orphan = np.zeros(len(x), dtype=bool)
        for i in np.nonzero(deeper)[0]:
            zi, xi, yi = int(z[i]), int(x[i]), int(y[i])
            orphan[i] = not any((a, xi >> (zi - a), yi >> (zi - a)) in present for a in range(gz, zi))
        # among orphans, keep only the shallowest (a deeper orphan under another orphan is its refinement)
        sel = top | orphan
        gx = x[sel] >> (z[sel] - gz)
        gy = y[sel] >> (z[sel] - gz)
        codes = (gx << gz) | gy
        uniq, inv = np.unique(codes, return_inverse=True)
        weight = np.zeros(len(uniq), dtype=np.float64)
        np.add.at(weight, inv, self._orphan_weights(sel, orphan, x, y, z, w))
        return Grid(gz, uniq >> gz, uniq & ((1 << gz) - 1), weight)

    def _orphan_weights(self, sel: npt.NDArray[np.bool_], orphan: npt.NDArray[np.bool_], x: IntArray, y: IntArray,
                        z: IntArray, w: FloatArray) -> FloatArray:
        """Weights of the selected rows, zeroing orphans that refine a shallower orphan."""
        out = w.copy()
        orphan_set = {(int(z[i]), int(x[i]), int(y[i])) for i in np.nonzero(orphan)[0]}
        for i in np.nonzero(orphan)[0]:
            zi, xi, yi = int(z[i]), int(x[i]), int(y[i])
            if any((a, xi >> (zi - a), yi >> (zi - a)) in orphan_set for a in range(self.grid_zoom + 1, zi)):
                out[i] = 0.0
        return out[sel]

    def refinement(self) -> dict[str, float]:
        """Return the refinement rows (deeper rows under a present ancestor) as quadkey -> weight."""
        keys = set(self.quadkeys)
        gz = self.grid_zoom
        out: dict[str, float] = {}
        if len({len(q) for q in keys}) == 1:
            return out
        for q, w in zip(self.quadkeys, self.weights, strict=True):
            if any(q[:k] in keys for k in range(gz, len(q))):
                out[q] = float(w)
        return out

    def scaled(self, factors: npt.ArrayLike) -> Counts:
        """Return a copy with each weight multiplied by ``factors`` (for noise and shifts)."""
        return Counts(self.quadkeys, np.asarray(self.weights * np.asarray(factors, dtype=np.float64)), self.source)


def counts_from_pairs(pairs: Iterable[tuple[str, float]], source: str = "<pairs>") -> Counts:
    """Build :class:`Counts` from (quadkey, weight) pairs, checking every value.

    Raises
    ------
    CountsError
        On a bad quadkey, a negative/NaN/infinite weight, a duplicate quadkey or no rows;
        the message names the value and its position in ``source``.
    """
    qks: list[str] = []
    ws: list[float] = []
    first_seen: dict[str, int] = {}
    for i, (q, w) in enumerate(pairs):
        where = f"{source} row {i + 1}"
        qks.append(_check_quadkey(q, where))
        ws.append(_check_weight(w, where))
        if q in first_seen:
            raise CountsError(f"{where}: quadkey {q!r} already given at row {first_seen[q] + 1}")
        first_seen[q] = i
    if not qks:
        raise CountsError(f"{source}: no rows (expected at least one quadkey with a weight)")
    return Counts(tuple(qks), np.array(ws, dtype=np.float64), source)


def read_counts_csv(path: str | Path, *, allow_mixed_zoom: bool = True) -> Counts:
    """Read a ``quadkey,weight`` CSV file.

    Parameters
    ----------
    path : str or Path
        The file; its header must be exactly ``quadkey,weight``.
    allow_mixed_zoom : bool
        If False, rows at more than one zoom are an error naming the first odd line.

    Raises
    ------
    CountsError
        Unreadable or empty file, bad header, bad quadkey or weight (naming file and line).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CountsError(f"cannot read counts file {str(p)!r}: {exc}") from exc
    return parse_counts_csv(text, str(p), allow_mixed_zoom=allow_mixed_zoom)


def parse_counts_csv(text: str, source: str, *, allow_mixed_zoom: bool = True) -> Counts:
    """Parse ``quadkey,weight`` CSV text; see :func:`read_counts_csv`."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise CountsError(f"{source}: file is empty (expected header 'quadkey,weight')")
    if [h.strip() for h in header] != ["quadkey", "weight"]:
        raise CountsError(f"{source} line 1: header must be 'quadkey,weight', got {','.join(header)!r}")
    pairs: list[tuple[str, float]] = []
    lines: list[int] = []
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{source} line {lineno}"
        if len(row) != 2:
            raise CountsError(f"{where}: expected 2 fields 'quadkey,weight', got {row!r}")
        pairs.append((_check_quadkey(row[0].strip(), where), _parse_number(row[1], where, "weight")))
        lines.append(lineno)
    if not pairs:
        raise CountsError(f"{source}: no data rows after the header")
    if not allow_mixed_zoom:
        z0 = len(pairs[0][0])
        for (q, _), ln in zip(pairs, lines, strict=True):
            if len(q) != z0:
                raise CountsError(f"{source} line {ln}: quadkey {q!r} is zoom {len(q)} but line {lines[0]} is "
                                  f"zoom {z0}; mixed zooms are not allowed here")
    seen: dict[str, int] = {}
    for (q, _), ln in zip(pairs, lines, strict=True):
        if q in seen:
            raise CountsError(f"{source} line {ln}: quadkey {q!r} already given on line {seen[q]}")
        seen[q] = ln
    return Counts(tuple(q for q, _ in pairs), np.array([w for _, w in pairs], dtype=np.float64), source)


def read_snapshot_rows(text: str, source: str, *, use_cost: bool = True) -> Counts:
    """Parse snapshot CSV rows (header ``quadkey,events,cost``) into :class:`Counts`.

    The weight is ``cost`` where the row has one and ``use_cost`` is set, else ``events``
    (seed 004: balance on measured cost, fall back to counts on cold start).
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or [h.strip() for h in header][:2] != ["quadkey", "events"]:
        raise CountsError(f"{source} line 1: header must start 'quadkey,events', got {header!r}")
    has_cost = len(header) > 2 and header[2].strip() == "cost"
    pairs: list[tuple[str, float]] = []
    for lineno, row in enumerate(reader, start=2):
        if not row:
            continue
        where = f"{source} line {lineno}"
        if len(row) < 2:
            raise CountsError(f"{where}: expected 'quadkey,events[,cost]', got {row!r}")
        q = _check_quadkey(row[0].strip(), where)
        w = _parse_number(row[1], where, "events")
        if use_cost and has_cost and len(row) > 2 and row[2].strip():
            w = _parse_number(row[2], where, "cost")
        pairs.append((q, w))
    return counts_from_pairs(pairs, source) if pairs else _empty(source)


def _empty(source: str) -> Counts:
    raise CountsError(f"{source}: snapshot has no rows")


def _check_quadkey(q: object, where: str) -> str:
    try:
        return parse_quadkey(q, where)
    except InvalidQuadkeyError as exc:
        raise CountsError(str(exc)) from exc


def _parse_number(text: str, where: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise CountsError(f"{where}: {what} {text.strip()!r} is not a number") from None
    return _check_weight(v, where, what)


def _check_weight(v: object, where: str, what: str = "weight") -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise CountsError(f"{where}: {what} {v!r} is not a number")
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        raise CountsError(f"{where}: {what} {v!r} is not finite")
    if f < 0:
        raise CountsError(f"{where}: {what} {v!r} is negative")
    return f
