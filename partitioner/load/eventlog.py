"""Counting a recorded event log into windows of load per quadkey (what ``simulate`` replays).

:func:`count_events` reads event files (:mod:`partitioner.load.eventread`), checks every row
vectorised (:mod:`partitioner.load.eventtimes`), puts each event in window
``floor(t / window_s)`` and in the web-mercator tile of ``(lon, lat)`` at ``zoom`` (the same tile
as :func:`geokernel.geo.tiles.tile`), and counts events per (window, tile). :func:`window_csv`
renders one window as a ``quadkey,weight`` file that :func:`partitioner.load.read.read_counts_csv` reads.

Notes
-----
* **Bad rows.** A row is bad when its latitude is missing, not a number, not finite or outside
  ``+/-85.05112878``, its longitude likewise outside ``+/-180``, or its time is missing or refused by the time unit
  rule under ``ts_unit`` (not in the unit, or outside the plausible window ``[2000-01-01, now + 1 day]``: the event
  contract's limits, :mod:`geokernel.contracts.events`, :mod:`geokernel.contracts.timestamps`). By default the
  first bad row (in file order, files in the order given) raises :class:`~geokernel.errors.EventLogError`
  naming file, line and value; with ``skip_bad`` every bad row is returned as a :class:`BadRow` instead.
* **Empty windows** between the first and the last are part of :meth:`WindowCounts.windows` (no rows; their
  file holds one row of weight 0), so one file per window keeps time contiguous for ``simulate``.
* **Memory**: one file's columns at a time, plus the (window, tile) counts so far.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from geokernel import timestamps
from geokernel.contracts.events import EVENT_LAT_LIMIT, EVENT_LON_LIMIT
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.contracts.timestamps import TsUnit
from geokernel.errors import EventLogError
from geokernel.geo.tiles import MAX_ZOOM, arrays_to_quadkeys, tiles_xy
from partitioner.load import eventtimes
from partitioner.load.eventcols import EventColumns
from partitioner.load.eventread import EventTable, read_event_table

IntArray = npt.NDArray[np.int64]
#: a :func:`window_name`: the window's start in UTC, milliseconds when the window is not whole seconds
_WINDOW_NAME = re.compile(r"^(\d{8}T\d{6})(?:\.(\d{3}))?Z\.csv$")


@dataclass(frozen=True)
class CountOptions:
    """How to count: window length (seconds, a whole number of milliseconds), zoom, time unit, bad rows.

    ``ts_unit`` is the time unit rule's setting (``--ts-unit``); ``now_ms`` the clock the plausible window ends a
    day after (None: the time the log is read).
    """

    window_s: float
    zoom: int
    ts_unit: TsUnit | str = TsUnit.AUTO
    skip_bad: bool = False
    now_ms: int | None = None

    @property
    def window_ms(self) -> int:
        """The window length in milliseconds (checked by :meth:`check`)."""
        return round(self.window_s * 1000.0)

    def check(self) -> None:
        """Raise :class:`EventLogError` naming a bad option value."""
        ms = self.window_s * 1000.0
        if not (np.isfinite(ms) and ms >= 1.0 and abs(ms - round(ms)) < 1e-6):
            raise EventLogError(f"--window-s {self.window_s!r} must be a whole number of milliseconds, at least 0.001")
        if isinstance(self.zoom, bool) or not 1 <= self.zoom <= MAX_ZOOM:
            raise EventLogError(f"--zoom {self.zoom!r} must be an integer in [1, {MAX_ZOOM}]")
        if self.ts_unit not in eventtimes.TIME_UNITS:
            raise EventLogError(f"--ts-unit {self.ts_unit!r} must be one of {', '.join(eventtimes.TIME_UNITS)}")


@dataclass(frozen=True)
class BadRow:
    """A skipped row: file, line (Parquet: row), why (``code: detail``) and its original text."""

    source: str
    line: int
    reason: str
    raw: str | None

    def where(self, unit: str = "line") -> str:
        return f"{self.source} {unit} {self.line}"

    def quarantine(self, at: str) -> QuarantineRecord:
        """The contract's quarantine record (``source`` is ``file:line``)."""
        return QuarantineRecord(self.reason, self.raw, f"{self.source}:{self.line}", at)


@dataclass(frozen=True, eq=False)
class WindowCounts:
    """Events per (window, tile), sorted by window then tile code; ``window`` is ``floor(t / window_ms)``."""

    window: IntArray
    code: IntArray
    count: IntArray
    zoom: int
    window_ms: int

    def windows(self) -> range:
        """Every window index from the first to the last (empty ones included)."""
        if len(self.window) == 0:
            return range(0)
        return range(int(self.window[0]), int(self.window[-1]) + 1)

    def rows(self, w: int) -> slice:
        """The rows of window ``w``."""
        lo, hi = np.searchsorted(self.window, [w, w + 1])
        return slice(int(lo), int(hi))


@dataclass(frozen=True, eq=False)
class CountResult:
    """What :func:`count_events` found: the counts, events counted, rows skipped, distinct entities (or None), and
    the first and last good event's time (epoch milliseconds)."""

    counts: WindowCounts
    events: int
    bad: tuple[BadRow, ...]
    entities: int | None
    first_ms: int
    last_ms: int

    def edge_coverage(self) -> tuple[float, float]:
        """The share of the first and of the last window that the log's time span covers (each in (0, 1]).

        Notes
        -----
        Windows are ``floor(t / window_ms)``, aligned to the epoch, so a log that starts at 22:13:20 covers a third
        of its first 5-minute window (22:10-22:15): that window holds only the load recorded after 22:13:20. The
        last window is covered up to and including the last event's millisecond. One window: both shares are the
        same, the span's share of it.
        """
        wms = self.counts.window_ms
        first_w, last_w = self.first_ms // wms, self.last_ms // wms
        if first_w == last_w:
            share = (self.last_ms - self.first_ms + 1) / wms
            return share, share
        return ((first_w + 1) * wms - self.first_ms) / wms, (self.last_ms + 1 - last_w * wms) / wms

    def bad_by_reason(self) -> dict[str, int]:
        """Skipped rows per reason code, most frequent first."""
        return dict(Counter(b.reason.split(":", 1)[0] for b in self.bad).most_common())


#: An edge window (the first or the last) that the log covers less of than this share is left out by
#: :func:`full_windows`: it holds only the load recorded inside the log's span, not the window's.
MIN_EDGE_COVERAGE = 0.9


def full_windows(result: CountResult) -> tuple[range, tuple[tuple[int, float], ...]]:
    """The windows to keep (a range) and the edge windows left out, each ``(window, share the log covers)``.

    Notes
    -----
    A first or last window the log covers less than :data:`MIN_EDGE_COVERAGE` of is left out (a ``simulate`` of a
    log starting at 22:13:20 in 5-minute windows would otherwise build its first spec for a third of the load).
    When that would leave no window (a log shorter than about two windows), every window is kept.
    """
    windows = result.counts.windows()
    first_share, last_share = result.edge_coverage()
    lo, hi = windows.start, windows.stop
    dropped = []
    if first_share < MIN_EDGE_COVERAGE:
        dropped.append((lo, first_share))
        lo += 1
    if last_share < MIN_EDGE_COVERAGE and hi - 1 >= lo:
        dropped.append((hi - 1, last_share))
        hi -= 1
    if hi <= lo:
        return windows, ()
    return range(lo, hi), tuple(dropped)


def count_events(paths: Sequence[str | Path], columns: EventColumns, options: CountOptions,
                 on_file: Callable[[str], None] | None = None) -> CountResult:
    """Count the events of ``paths`` per window and quadkey.

    Parameters
    ----------
    paths : sequence of str or Path
        Event files (CSV, JSON lines, Parquet; see :mod:`partitioner.load.eventread`).
    columns : EventColumns
        The column mapping.
    options : CountOptions
    on_file : callable, optional
        Called with each file's name before it is read (a progress line).

    Returns
    -------
    CountResult

    Raises
    ------
    EventLogError
        A bad option, an unreadable file, a missing column, no valid event at all, or (without
        ``skip_bad``) the first bad row, naming file, line and value.

    Notes
    -----
    Files are read one at a time; the first bad row of the first bad file stops the run before any
    later file is read.
    """
    options.check()
    parts: list[tuple[IntArray, IntArray, IntArray]] = []
    bad: list[BadRow] = []
    entities: list[object] = []
    events = 0
    first_ms, last_ms = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for path in paths:
        if on_file is not None:
            on_file(str(path))
        table = read_event_table(path, columns)
        ms, code, ok, file_bad = _check_table(table, columns, options)
        bad.extend(sorted(file_bad, key=lambda b: b.line))
        w = ms // options.window_ms
        parts.append(_group(w[ok], code[ok], None, 2 * options.zoom))
        if ok.any():
            first_ms, last_ms = min(first_ms, int(ms[ok].min())), max(last_ms, int(ms[ok].max()))
        events += int(ok.sum())
        if table.entity is not None:
            entities.append(_distinct(table.entity, ok))
    if events == 0:
        raise EventLogError(f"no valid event in {', '.join(repr(str(p)) for p in paths)}"
                            + (f" ({len(bad)} bad rows skipped)" if bad else ""))
    w = np.concatenate([p[0] for p in parts])
    code = np.concatenate([p[1] for p in parts])
    n = np.concatenate([p[2] for p in parts])
    w, code, n = _group(w, code, n, 2 * options.zoom)
    return CountResult(WindowCounts(w, code, n, options.zoom, options.window_ms), events, tuple(bad),
                       _count_distinct(entities) if entities else None, first_ms, last_ms)


@dataclass(frozen=True, eq=False)
class CheckedRows:
    """Every row of one :class:`EventTable` checked: its values, the mask of good rows and every bad row.

    ``lat``, ``lon`` and ``ms`` (epoch milliseconds) hold a row's values where ``ok``; ``bad`` holds the rows the
    reader refused and every row with a bad value, in line order, each naming file, line and value.
    """

    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    ms: IntArray
    ok: npt.NDArray[np.bool_]
    bad: tuple[BadRow, ...]


def check_rows(table: EventTable, columns: EventColumns, ts_unit: TsUnit | str = TsUnit.AUTO,
               now_ms: int | None = None) -> CheckedRows:
    """Check every row of ``table`` with the rules of :func:`count_events` and describe every bad one.

    Unlike :func:`count_events` without ``skip_bad`` this never raises on a bad row: the caller decides
    (the local loop's recorded replay quarantines them, :mod:`local.recorded`).
    """
    unit, now = TsUnit(ts_unit), now_ms if now_ms is not None else timestamps.now_ms()
    lat, lat_code = eventtimes.coordinate(table.lat, EVENT_LAT_LIMIT)
    lon, lon_code = eventtimes.coordinate(table.lon, EVENT_LON_LIMIT)
    ms, time_code = eventtimes.epoch_ms(table.time, unit, now)
    ok = (lat_code == 0) & (lon_code == 0) & (time_code == 0)
    bad = _describe(table, columns, np.flatnonzero(~ok), (lat_code, lon_code, time_code), unit, now)
    return CheckedRows(lat, lon, ms, ok, tuple(sorted(bad, key=lambda b: b.line)))


def _check_table(table: EventTable, columns: EventColumns, options: CountOptions) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_],
                                                                     list[BadRow]]:
    """Time (epoch ms) and tile code per row, the mask of good rows, and the bad rows (raising the first without
    skip_bad)."""
    unit, now = TsUnit(options.ts_unit), options.now_ms if options.now_ms is not None else timestamps.now_ms()
    lat, lat_code = eventtimes.coordinate(table.lat, EVENT_LAT_LIMIT)
    lon, lon_code = eventtimes.coordinate(table.lon, EVENT_LON_LIMIT)
    ms, time_code = eventtimes.epoch_ms(table.time, unit, now)
    ok = (lat_code == 0) & (lon_code == 0) & (time_code == 0)
    bad_rows = np.flatnonzero(~ok)
    if not options.skip_bad and (len(bad_rows) or table.refused):
        bad_rows = bad_rows[:1]
    bad = _describe(table, columns, bad_rows, (lat_code, lon_code, time_code), unit, now)
    if not options.skip_bad and bad:
        first = min(bad, key=lambda b: b.line)
        raise EventLogError(f"{first.where(table.unit)}: {first.reason}")
    z = options.zoom
    x, y = tiles_xy(np.where(ok, lon, 0.0), np.where(ok, lat, 0.0), z)
    return ms, (x << z) | y, ok, bad


def _describe(table: EventTable, columns: EventColumns, rows: IntArray, codes: tuple[npt.NDArray[np.int8], ...],
              unit: TsUnit, now: int) -> list[BadRow]:
    """The bad rows ``rows`` (and the rows the reader refused) as :class:`BadRow` (a loop over bad rows only); a bad
    time's reason is the time unit rule's under ``unit`` with the clock at ``now``."""
    out = [BadRow(table.source, r.line, r.reason, r.raw) for r in table.refused]
    if not len(rows):
        return out
    lines = table.line_of(rows).tolist()
    raw = table.raw_of(lines)
    cols = ((table.lat, "lat", columns.lat), (table.lon, "lon", columns.lon), (table.time, "time", columns.time))
    for i, line in zip(rows.tolist(), lines, strict=True):
        k = next(k for k in range(3) if codes[k][i] != 0)
        col, what, name = cols[k]
        reason = eventtimes.describe(int(codes[k][i]), name, col[i].as_py(), what, unit, now)
        out.append(BadRow(table.source, line, reason, raw.get(line)))
    return out


def _group(w: IntArray, code: IntArray, n: IntArray | None, bits: int) -> tuple[IntArray, IntArray, IntArray]:
    """Unique (window, code) pairs, sorted, with their summed ``n`` (or their number when ``n`` is None)."""
    if len(w) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    lo = int(w.min())
    if int(w.max()) - lo < (1 << (62 - bits)):
        key = ((w - lo) << bits) | code
        if n is None:
            uniq, counts = np.unique(key, return_counts=True)
        else:
            uniq, inverse = np.unique(key, return_inverse=True)
            counts = np.bincount(inverse, weights=n).astype(np.int64)
        return (uniq >> bits) + lo, uniq & ((1 << bits) - 1), counts.astype(np.int64)
    order = np.lexsort((code, w))
    ws, cs = w[order], code[order]
    starts = np.flatnonzero(np.concatenate(([True], (ws[1:] != ws[:-1]) | (cs[1:] != cs[:-1]))))
    ones = np.ones(len(w), dtype=np.int64) if n is None else n[order]
    return ws[starts], cs[starts], np.add.reduceat(ones, starts).astype(np.int64)


def _distinct(entity: object, ok: npt.NDArray[np.bool_]) -> object:
    import pyarrow as pa
    import pyarrow.compute as pc

    col = entity if isinstance(entity, pa.ChunkedArray) else pa.chunked_array([entity])
    return pc.unique(pc.cast(col.filter(pa.array(ok)), pa.string()))


def _count_distinct(parts: list[object]) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.chunked_array([p for p in parts if len(p)], type=pa.string())  # type: ignore[arg-type]
    return int(pc.count_distinct(values).as_py())


def window_csv(counts: WindowCounts, w: int) -> str:
    """One window as ``quadkey,weight`` CSV text, quadkeys sorted.

    Notes
    -----
    An empty window (no event between two that have some) gets one row of weight 0 (the run's first
    tile), since a counts file needs a data row; its load is still zero.
    """
    rows = counts.rows(w)
    code = counts.code[rows]
    if len(code) == 0:
        code = counts.code[:1]
        weights = [0] * len(code)
    else:
        weights = counts.count[rows].tolist()
    z = counts.zoom
    qks = arrays_to_quadkeys(code >> z, code & ((1 << z) - 1), z)
    order = sorted(range(len(qks)), key=qks.__getitem__)
    return "quadkey,weight\n" + "".join(f"{qks[i]},{weights[i]}\n" for i in order)


def window_name(counts: WindowCounts, w: int) -> str:
    """File name of window ``w``: its start in UTC, ``YYYYMMDDTHHMMSS[.fff]Z.csv`` (name order = time order)."""
    start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=w * counts.window_ms)
    text = start.strftime("%Y%m%dT%H%M%S")
    if counts.window_ms % 1000:
        text += f".{start.microsecond // 1000:03d}"
    return text + "Z.csv"


def window_start_of_name(name: str) -> float | None:
    """The window start (epoch s) a :func:`window_name` file name gives, or None for any other name."""
    m = _WINDOW_NAME.match(name)
    if m is None:
        return None
    start = datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    return start.timestamp() + (int(m.group(2)) / 1000.0 if m.group(2) else 0.0)
