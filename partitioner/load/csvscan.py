"""Vectorised reading of plain CSV bytes: lines, fields, quadkeys and numbers as NumPy arrays.

:mod:`partitioner.load.counts` reads counts files and snapshot rows with it. Line and field
boundaries come from ``np.flatnonzero`` over the file's bytes; quadkeys decode to tile
arrays one digit column at a time; numbers go through NumPy's string-to-float cast (the
same grammar as Python's ``float``). Python work is per column or per chunk of rows,
never per row.

Notes
-----
* **Plain CSV only** (:func:`is_plain`): ASCII, no quote character, no NUL byte, lines
  ending in ``\\n`` or ``\\r\\n``. Anything else is for the ``csv`` module (the callers
  fall back to it), so quoting rules never differ.
* Nothing here raises for bad values: every function returns a mask of the rows it could
  not read, and the caller reports the first one with the message of its scalar check.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from geokernel.geo.tiles import MAX_ZOOM, FloatArray, IntArray

BoolArray = npt.NDArray[np.bool_]

#: Bytes Python's ``str.strip()`` removes (the ASCII ones): \t \n \v \f \r, \x1c-\x1f and space.
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
NUMBER_WIDTH = 64  # a number field longer than this is read by Python's float, one row at a time
_CHUNK = 1 << 16  # rows per NumPy float cast (a failing chunk is re-read row by row to find the bad rows)
_COMMA, _NEWLINE, _CR = 44, 10, 13


class Lines(NamedTuple):
    """Byte spans of lines: ``start`` .. ``end`` (the newline and a trailing ``\\r`` excluded)."""

    start: IntArray
    end: IntArray
    number: IntArray  # 1-based line number in the file

    def take(self, rows: BoolArray | IntArray | slice) -> Lines:
        """The lines picked by a mask or an index array."""
        return Lines(self.start[rows], self.end[rows], self.number[rows])


class Fields(NamedTuple):
    """Per line: how many fields it has and the byte span of its first three (empty span when absent)."""

    n: IntArray
    start: tuple[IntArray, IntArray, IntArray]
    end: tuple[IntArray, IntArray, IntArray]


class Quadkeys(NamedTuple):
    """Decoded quadkey fields: tiles, and the rows whose field is not a quadkey."""

    x: IntArray
    y: IntArray
    z: IntArray
    bad: BoolArray


class Numbers(NamedTuple):
    """Decoded number fields (NaN where unreadable) and the rows that could not be read."""

    value: FloatArray
    bad: BoolArray


def is_plain(data: bytes) -> bool:
    """True when ``data`` can be read here: ASCII, no quotes, no NUL, only ``\\r\\n`` carriage returns."""
    return (data.isascii() and b'"' not in data and b"\0" not in data
            and data.count(b"\r") == data.count(b"\r\n"))


def buffer(data: bytes) -> npt.NDArray[np.uint8]:
    """The bytes as a read-only ``uint8`` array (no copy)."""
    return np.frombuffer(data, dtype=np.uint8)


def split_lines(buf: npt.NDArray[np.uint8]) -> Lines:
    """Every line of the buffer (a final newline does not start an empty last line)."""
    nl = np.flatnonzero(buf == _NEWLINE)
    start = np.concatenate([np.zeros(1, dtype=np.int64), nl + 1])
    end = np.concatenate([nl, np.array([len(buf)], dtype=np.int64)])
    if len(buf) == 0 or buf[-1] == _NEWLINE:
        start, end = start[:-1], end[:-1]
    cr = (end > start) & (buf[np.maximum(end - 1, 0)] == _CR) if len(buf) else np.zeros(len(end), dtype=bool)
    return Lines(start, end - cr, np.arange(1, len(start) + 1, dtype=np.int64))


def split_fields(buf: npt.NDArray[np.uint8], lines: Lines) -> Fields:
    """Count the comma-separated fields of each line and find the spans of the first three."""
    commas = np.flatnonzero(buf == _COMMA)
    first = np.searchsorted(commas, lines.start)
    count = np.searchsorted(commas, lines.end) - first + 1
    sentinel = np.append(commas, len(buf)).astype(np.int64)

    def comma(k: int) -> IntArray:  # position of the k-th comma of each line (the line end if it has fewer)
        return np.where(count - 1 > k, sentinel[np.minimum(first + k, len(commas))], lines.end)

    c0, c1, c2 = comma(0), comma(1), comma(2)
    starts = (lines.start, np.minimum(c0 + 1, lines.end), np.minimum(c1 + 1, lines.end))
    return Fields(count, starts, (c0, c1, c2))


def strip(buf: npt.NDArray[np.uint8], start: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
    """Spans with leading and trailing whitespace removed (as ``str.strip``); empty spans stay empty."""
    s, e = start.copy(), end.copy()
    last = max(len(buf) - 1, 0)
    while True:
        more = (s < e) & _WHITESPACE[buf[np.minimum(s, last)]]
        if not more.any():
            break
        s += more
    while True:
        more = (s < e) & _WHITESPACE[buf[np.maximum(e - 1, 0)]]
        if not more.any():
            break
        e -= more
    return s, e


def quadkeys(buf: npt.NDArray[np.uint8], start: IntArray, end: IntArray) -> Quadkeys:
    """Decode quadkey fields (already stripped) into tiles; ``bad`` marks fields that are not quadkeys.

    A field is bad when it is longer than :data:`geokernel.geo.tiles.MAX_ZOOM` or holds a
    character other than ``0-3`` (the rules of :func:`geokernel.geo.tiles.parse_quadkey`).
    One pass per digit column: x and y take one bit of each digit (``digit = 2 * ybit + xbit``).
    """
    n = len(start)
    length = end - start
    bad = length > MAX_ZOOM
    width = min(int(length.max(initial=0)), MAX_ZOOM)
    padded = _padded(buf, width)
    x = np.zeros(n, dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    for j in range(width):
        d = padded[j:][start]  # the j-th character of every field (a copy)
        d -= 48
        wrong = d > 3
        active = length > j
        if active.all():
            x <<= 1
            y <<= 1
        else:  # shorter fields have ended: their bits stay, their stray characters are ignored
            wrong &= active
            d[~active] = 0
            shift = active.astype(np.int64)
            x <<= shift
            y <<= shift
        bad |= wrong
        x |= d & 1
        y |= d >> 1
    return Quadkeys(x, y, np.minimum(length, MAX_ZOOM).astype(np.int64), bad)


def _padded(buf: npt.NDArray[np.uint8], width: int) -> npt.NDArray[np.uint8]:
    """The buffer followed by ``width`` zero bytes, so ``padded[j:][start]`` never reads past the end."""
    return np.concatenate([buf, np.zeros(width + 1, dtype=np.uint8)])


def numbers(buf: npt.NDArray[np.uint8], start: IntArray, end: IntArray) -> Numbers:
    """Parse number fields with Python's ``float`` grammar (surrounding whitespace allowed).

    An unreadable field gets NaN and ``bad``; NaN and infinity written out are read as such
    (not bad: the caller decides whether they are allowed).
    """
    n = len(start)
    length = np.maximum(end - start, 0)
    value = np.full(n, np.nan)
    bad = np.zeros(n, dtype=bool)
    long_rows = np.flatnonzero(length > NUMBER_WIDTH)
    width = int(length.max(initial=0)) if len(long_rows) == 0 else NUMBER_WIDTH
    if n and width:
        text = np.zeros((n, width), dtype=np.uint8)
        padded = _padded(buf, width)
        for j in range(width):
            column = padded[j:][start]
            column[length <= j] = 0
            text[:, j] = column
        cells = text.view(f"S{width}").ravel()
        for lo in range(0, n, _CHUNK):
            value[lo:lo + _CHUNK], bad[lo:lo + _CHUNK] = _cast(cells[lo:lo + _CHUNK])
    bad[length == 0] = True
    value[length == 0] = np.nan
    for i in long_rows:  # rare: fields longer than NUMBER_WIDTH
        value[i], bad[i] = _one(bytes(buf[start[i]:end[i]]))
    return Numbers(value, bad)


def _cast(cells: npt.NDArray[np.bytes_]) -> tuple[FloatArray, BoolArray]:
    """NumPy's cast of one chunk; if it fails, each cell of the chunk on its own to find the bad ones."""
    try:
        return cells.astype(np.float64), np.zeros(len(cells), dtype=bool)
    except ValueError:
        pairs = [_one(bytes(c)) for c in cells]
        return np.array([p[0] for p in pairs], dtype=np.float64), np.array([p[1] for p in pairs], dtype=bool)


def _one(text: bytes) -> tuple[float, bool]:
    try:
        return float(text), False
    except ValueError:
        return float("nan"), True


def line_text(data: bytes, lines: Lines, i: int) -> str:
    """The text of line ``i`` (an index into ``lines``)."""
    return data[int(lines.start[i]):int(lines.end[i])].decode("ascii")
