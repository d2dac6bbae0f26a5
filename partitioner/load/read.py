"""Reading load: ``quadkey,weight`` CSV files and the aggregation job's snapshot rows, as :class:`Counts`.

Files are read without a Python loop per row (:mod:`partitioner.load.csvscan`): a
plain file (ASCII, unquoted) is split and decoded with NumPy, and a bad row is
reported with the message of the one-row check (:mod:`partitioner.load.rowcheck`)
run on the first bad line only. Other files (quoted
fields, non-ASCII text) go through the ``csv`` module with the same checks.
A :class:`Counts` read this way holds tile arrays; its quadkey strings are made
only if someone asks for them.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from geokernel.contracts.snapshot import SNAPSHOT_HEADER
from geokernel.errors import CountsError
from geokernel.geo.quadtree import tree_keys
from geokernel.geo.tiles import IntArray, quadkeys_to_arrays
from partitioner.load import csvscan, rowcheck
from partitioner.load.counts import BoolArray, Counts, Tiles
from partitioner.load.eventcols import COLUMN_ALIASES
from partitioner.load.rollup import check_rollup

_BOM = b"\xef\xbb\xbf"
#: The first bytes of a gzip file (RFC 1952): a compressed counts file is read as its content.
_GZIP = b"\x1f\x8b"


def _check_header(header: list[str], source: str) -> None:
    """Raise :class:`CountsError` unless the header is ``quadkey,weight``; say so when it is an event log's."""
    names = [h.strip() for h in header]
    if names == ["quadkey", "weight"]:
        return
    lat_names = COLUMN_ALIASES["--lat"]
    hint = ("; this looks like an event log (a latitude column): count it into windows of load per quadkey first, "
            "'python -m partitioner counts FILE --window-s S --zoom Z -o DIR', and use one window's file"
            if any(n.lower() in lat_names for n in names) else "")
    raise CountsError(f"{source} line 1: header must be 'quadkey,weight', got {','.join(header)!r}{hint}")


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
        data = p.read_bytes()
        if data.startswith(_GZIP):
            data = gzip.decompress(data)
        _text_if_not_ascii(data)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CountsError(f"cannot read counts file {str(p)!r}: {exc}") from exc
    return parse_counts_csv(data, str(p), allow_mixed_zoom=allow_mixed_zoom)


def _text_if_not_ascii(data: bytes) -> str | None:
    """The decoded text of non-ASCII data (raising UnicodeDecodeError as ``read_text`` would); None for ASCII."""
    return None if data.isascii() else data.decode("utf-8-sig")


def parse_counts_csv(text: str | bytes, source: str, *, allow_mixed_zoom: bool = True) -> Counts:
    """Parse ``quadkey,weight`` CSV text or bytes; see :func:`read_counts_csv`."""
    data = _as_bytes(text)
    if not csvscan.is_plain(data):
        return _parse_with_csv_module(data.decode("utf-8", errors="replace"), source, allow_mixed_zoom)
    buf = csvscan.buffer(data)
    lines = csvscan.split_lines(buf)
    if len(lines.start) == 0:
        raise CountsError(f"{source}: file is empty (expected header 'quadkey,weight')")
    header = csvscan.line_text(data, lines, 0).split(",")
    _check_header(header, source)
    rows = lines.take(slice(1, None))
    f = csvscan.split_fields(buf, rows)
    qs, qe = csvscan.strip(buf, f.start[0], f.end[0])
    ws, we = csvscan.strip(buf, f.start[1], f.end[1])
    blank = ((f.n == 1) & (qs == qe)) | ((f.n == 2) & (qs == qe) & (ws == we))
    blank |= _blank_many_fields(data, rows, f.n)
    keep = ~blank
    rows, count = rows.take(keep), f.n[keep]
    qk = csvscan.quadkeys(buf, qs[keep], qe[keep])
    num = csvscan.numbers(buf, f.start[1][keep], f.end[1][keep])
    bad = (count != 2) | qk.bad | rowcheck.bad_zoom(qk.z) | num.bad | ~np.isfinite(num.value) | (num.value < 0)
    rowcheck.raise_first(bad, data, rows, source, rowcheck.counts_row)
    if len(rows.start) == 0:
        raise CountsError(f"{source}: no data rows after the header")
    if not allow_mixed_zoom:
        rowcheck.check_one_zoom(qk, rows, source)
    rowcheck.check_unique(qk, tree_keys(qk.x, qk.y, qk.z), rows, source)
    check_rollup(Tiles(qk.x, qk.y, qk.z), num.value, rows.number, source)
    return Counts.from_tiles(Tiles(qk.x, qk.y, qk.z), num.value, source)


def _blank_many_fields(data: bytes, rows: csvscan.Lines, count: IntArray) -> BoolArray:
    """Lines of three or more fields that are all blank (``,,``): skipped like empty lines."""
    out = np.zeros(len(count), dtype=bool)
    for i in np.flatnonzero(count > 2).tolist():  # rare: such a line is blank or an error (reported first)
        blank = all(not c.strip() for c in csvscan.line_text(data, rows, i).split(","))
        out[i] = blank
        if not blank:
            break
    return out


def read_snapshot_rows(text: str | bytes, source: str, *, use_cost: bool = True) -> Counts:
    """Parse snapshot CSV rows (header ``quadkey,events,cost``) into :class:`Counts`.

    The weight is ``cost`` where the row has one and ``use_cost`` is set, else ``events``
    (balance on measured cost; fall back to counts on a cold start, before any cost is known).
    """
    data = _as_bytes(text)
    if not csvscan.is_plain(data):
        return _snapshot_with_csv_module(data.decode("utf-8", errors="replace"), source, use_cost)
    buf = csvscan.buffer(data)
    lines = csvscan.split_lines(buf)
    header = csvscan.line_text(data, lines, 0).split(",") if len(lines.start) else None
    if header is None or [h.strip() for h in header][:2] != list(SNAPSHOT_HEADER[:2]):
        raise CountsError(f"{source} line 1: header must start 'quadkey,events', got {header!r}")
    cost = use_cost and len(header) > 2 and header[2].strip() == "cost"
    rows = lines.take(slice(1, None))
    rows = rows.take(rows.end > rows.start)
    f = csvscan.split_fields(buf, rows)
    qs, qe = csvscan.strip(buf, f.start[0], f.end[0])
    qk = csvscan.quadkeys(buf, qs, qe)
    events = csvscan.numbers(buf, f.start[1], f.end[1])
    bad = (f.n < 2) | qk.bad | rowcheck.bad_zoom(qk.z) | _bad_weight(events)
    weight = events.value
    if cost:
        cs, ce = csvscan.strip(buf, f.start[2], f.end[2])
        has = (f.n > 2) & (ce > cs)
        costs = csvscan.numbers(buf, cs, ce)
        bad |= has & _bad_weight(costs)
        weight = np.where(has, costs.value, events.value)
    rowcheck.raise_first(bad, data, rows, source, lambda fields, where: rowcheck.snapshot_row(fields, where, cost))
    if len(rows.start) == 0:
        raise CountsError(f"{source}: snapshot has no rows")
    rowcheck.check_unique(qk, tree_keys(qk.x, qk.y, qk.z), rows, source)
    return Counts.from_tiles(Tiles(qk.x, qk.y, qk.z), weight, source)


def _bad_weight(n: csvscan.Numbers) -> BoolArray:
    bad: BoolArray = n.bad | ~np.isfinite(n.value) | (n.value < 0)
    return bad


def _as_bytes(text: str | bytes) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return data[len(_BOM):] if data.startswith(_BOM) else data


def _parse_with_csv_module(text: str, source: str, allow_mixed_zoom: bool) -> Counts:
    """:func:`parse_counts_csv` for text that is not plain CSV (quoted fields, non-ASCII): row by row."""
    header, rows = rowcheck.csv_rows(text, source)
    if header is None:
        raise CountsError(f"{source}: file is empty (expected header 'quadkey,weight')")
    _check_header(header, source)
    qks: list[str] = []
    ws: list[float] = []
    lines: list[int] = []
    for lineno, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        q, w = rowcheck.counts_row(row, f"{source} line {lineno}")
        qks.append(q)
        ws.append(w)
        lines.append(lineno)
    if not qks:
        raise CountsError(f"{source}: no data rows after the header")
    counts = _checked(qks, ws, lines, source, allow_mixed_zoom)
    check_rollup(counts.tiles, counts.weights, np.array(lines, dtype=np.int64), source)
    return counts


def _snapshot_with_csv_module(text: str, source: str, use_cost: bool) -> Counts:
    """:func:`read_snapshot_rows` for text that is not plain CSV: row by row."""
    header, rows = rowcheck.csv_rows(text, source)
    if header is None or [h.strip() for h in header][:2] != list(SNAPSHOT_HEADER[:2]):
        raise CountsError(f"{source} line 1: header must start 'quadkey,events', got {header!r}")
    cost = use_cost and len(header) > 2 and header[2].strip() == "cost"
    qks: list[str] = []
    ws: list[float] = []
    lines: list[int] = []
    for lineno, row in rows:
        if row:
            q, w = rowcheck.snapshot_row(row, f"{source} line {lineno}", cost)
            qks.append(q)
            ws.append(w)
            lines.append(lineno)
    if not qks:
        raise CountsError(f"{source}: snapshot has no rows")
    return _checked(qks, ws, lines, source, True)


def _checked(qks: list[str], ws: list[float], lines: list[int], source: str, allow_mixed_zoom: bool) -> Counts:
    x, y, z = quadkeys_to_arrays(qks)
    qk = csvscan.Quadkeys(x, y, z, np.zeros(len(qks), dtype=bool))
    rows = csvscan.Lines(np.zeros(len(qks), dtype=np.int64), np.zeros(len(qks), dtype=np.int64),
                         np.array(lines, dtype=np.int64))
    if not allow_mixed_zoom:
        rowcheck.check_one_zoom(qk, rows, source)
    rowcheck.check_unique(qk, tree_keys(qk.x, qk.y, qk.z), rows, source)
    return Counts(tuple(qks), np.array(ws, dtype=np.float64), source, tiles=Tiles(x, y, z))
