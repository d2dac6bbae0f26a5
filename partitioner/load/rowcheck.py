"""The one-row checks of load rows and their one-line errors, and the row-by-row reader they belong to.

:mod:`partitioner.load.counts` reads files vectorised; when a row is bad it runs the one-row check
here on the first bad line only, so the message (naming file, line and value) is the one a
row-by-row reader gives. Files that are not plain CSV (quoted fields, non-ASCII text) are read
row by row with the ``csv`` module (:func:`csv_rows`) through the same checks.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator

import numpy as np

from geokernel.errors import CountsError, InvalidQuadkeyError
from geokernel.geo.tiles import IntArray, arrays_to_quadkeys, parse_quadkey
from geokernel.partition_spec.index import LOOKUP_ZOOM
from partitioner.load import csvscan

BoolArray = csvscan.BoolArray
RowCheck = Callable[[list[str], str], tuple[str, float]]


def raise_first(bad: BoolArray, data: bytes, rows: csvscan.Lines, source: str, check: RowCheck) -> None:
    """Raise the one-row check's error for the first bad row (in file order), if any."""
    if not bad.any():
        return
    i = int(np.argmax(bad))
    where = f"{source} line {int(rows.number[i])}"
    text = csvscan.line_text(data, rows, i)
    check(text.split(","), where)
    raise CountsError(f"{where}: cannot read row {text!r}")  # the vectorised and one-row checks disagree


def check_one_zoom(qk: csvscan.Quadkeys, rows: csvscan.Lines, source: str) -> None:
    odd = qk.z != qk.z[0]
    if odd.any():
        i = int(np.argmax(odd))
        q = arrays_to_quadkeys(qk.x[i:i + 1], qk.y[i:i + 1], int(qk.z[i]))[0]
        raise CountsError(f"{source} line {int(rows.number[i])}: quadkey {q!r} is zoom {len(q)} but line "
                          f"{int(rows.number[0])} is zoom {int(qk.z[0])}; mixed zooms are not allowed here")


def check_unique(qk: csvscan.Quadkeys, keys: IntArray, rows: csvscan.Lines, source: str) -> None:
    """Raise for the first row (in file order) repeating an earlier row's quadkey, naming both lines."""
    order = np.argsort(keys, kind="stable")
    repeat = np.flatnonzero(keys[order][1:] == keys[order][:-1]) + 1
    if len(repeat) == 0:
        return
    # the first row of a run of equal keys is the first occurrence (stable sort keeps file order)
    run_start = np.maximum.accumulate(np.where(np.concatenate([[True], keys[order][1:] != keys[order][:-1]]),
                                               np.arange(len(order)), 0))
    later = order[repeat]
    k = int(np.argmin(later))
    i, first = int(later[k]), int(order[run_start[repeat[k]]])
    q = arrays_to_quadkeys(qk.x[i:i + 1], qk.y[i:i + 1], int(qk.z[i]))[0]
    raise CountsError(f"{source} line {int(rows.number[i])}: quadkey {q!r} already given on line "
                      f"{int(rows.number[first])}")


def counts_row(row: list[str], where: str) -> tuple[str, float]:
    """Check one ``quadkey,weight`` row (fields as the csv module gives them)."""
    if len(row) != 2:
        raise CountsError(f"{where}: expected 2 fields 'quadkey,weight', got {row!r}")
    return check_quadkey(row[0].strip(), where), parse_number(row[1], where, "weight")


def snapshot_row(row: list[str], where: str, use_cost: bool) -> tuple[str, float]:
    """Check one ``quadkey,events[,cost]`` row; the weight is the cost when used and present."""
    if len(row) < 2:
        raise CountsError(f"{where}: expected 'quadkey,events[,cost]', got {row!r}")
    q = check_quadkey(row[0].strip(), where)
    w = parse_number(row[1], where, "events")
    if use_cost and len(row) > 2 and row[2].strip():
        w = parse_number(row[2], where, "cost")
    return q, w


def csv_rows(text: str, source: str) -> tuple[list[str] | None, Iterator[tuple[int, list[str]]]]:
    """The header and ``(line number, fields)`` of every later row, by the csv module."""
    reader = csv.reader(io.StringIO(text))

    def failed(exc: csv.Error) -> CountsError:
        return CountsError(f"{source} line {reader.line_num}: {exc}")

    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise failed(exc) from None

    def rows() -> Iterator[tuple[int, list[str]]]:
        try:
            yield from enumerate(reader, start=2)
        except csv.Error as exc:
            raise failed(exc) from None

    return header, rows()


def check_quadkey(q: object, where: str) -> str:
    """Check the quadkey of a load row: a quadkey, not the root (empty), at most :data:`LOOKUP_ZOOM` deep."""
    try:
        qk = parse_quadkey(q, where)
    except InvalidQuadkeyError as exc:
        raise CountsError(str(exc)) from exc
    if not qk:
        raise CountsError(f"{where}: empty quadkey (the whole world); a load row names a tile of zoom 1 to "
                          f"{LOOKUP_ZOOM}")
    if len(qk) > LOOKUP_ZOOM:
        raise CountsError(f"{where}: quadkey {qk!r} is zoom {len(qk)}; load rows go down to zoom {LOOKUP_ZOOM} "
                          "(the deepest zoom a spec may list)")
    return qk


def bad_zoom(z: IntArray) -> BoolArray:
    """Rows whose quadkey :func:`check_quadkey` refuses for its zoom (the root, or deeper than LOOKUP_ZOOM)."""
    bad: BoolArray = (z == 0) | (z > LOOKUP_ZOOM)
    return bad


def parse_number(text: str, where: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise CountsError(f"{where}: {what} {text.strip()!r} is not a number") from None
    return check_weight(v, where, what)


def check_weight(v: object, where: str, what: str = "weight") -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise CountsError(f"{where}: {what} {v!r} is not a number")
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        raise CountsError(f"{where}: {what} {v!r} is not finite")
    if f < 0:
        raise CountsError(f"{where}: {what} {v!r} is negative")
    return f
