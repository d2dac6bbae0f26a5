"""Reading recorded event logs (CSV, JSON lines, Parquet) into columns, without a Python loop per event.

:func:`read_event_table` reads the mapped columns of one file with :mod:`pyarrow` (imported here,
inside the functions, so the rest of the library does not need it) and returns an
:class:`EventTable`: the latitude, longitude and time columns as Arrow arrays of whatever type the
file holds, plus the rows the reader itself refused (a CSV line with the wrong number of fields, a
JSON line that does not parse), each with its line. :mod:`partitioner.load.eventlog` checks and
counts what comes back.

Notes
-----
* **Formats** by extension: ``.csv``, ``.tsv``, ``.txt`` (delimited text, e.g. T-Drive's and the SNAP check-in
  logs) and their ``.gz``; ``.jsonl``, ``.ndjson``, ``.json`` (one object
  per line) and their ``.gz``; ``.parquet``. Anything else is an :class:`~geokernel.errors.EventLogError`.
* **No header line.** A CSV file whose first line is data (T-Drive taxi logs; check-in logs) is read with its
  columns named in order by :attr:`EventColumns.names` (``--columns``); its rows' lines then start at 1.
* **Separators.** A CSV file's fields are separated by commas, unless its header line holds none and holds one of
  ``;``, tab or ``|`` (:func:`csv_delimiter`: European exports use ``;``, many public logs tabs); a ``.tsv`` file's
  by tabs.
* **Lines.** A CSV row's line counts the header as line 1; a JSON line's counts every line. Blank lines
  are skipped but counted. A Parquet row is named ``row N`` (1-based). Line numbers are worked out only
  when a row is bad (:attr:`EventTable.line_of`); a CSV field holding a newline (quoted) is not supported.
* **Times as written.** A CSV or JSON time column is handed over as the file holds it: numbers, or text (the
  readers' own timestamp inference is undone), so the time unit rule reads ISO-8601 text as every part does; a
  Parquet timestamp or date column is typed by the file and handed over as it is.
* **Fast path, slow path.** Coordinates are first read as ``float64``; when that fails (text in a
  number column) the file is read again as text and the bad values are found vectorised. A JSON file
  whose types vary from line to line, or with a line that does not parse, is read line by line with
  :mod:`json` (slower, still correct).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from geokernel.errors import EventLogError
from partitioner.load.eventcols import EventColumns, check_columns, is_number

IntArray = npt.NDArray[np.int64]
CSV_SUFFIXES = (".csv", ".tsv", ".txt")
#: Field separators a CSV header is checked for, in this order, when it holds no comma.
OTHER_DELIMITERS = (";", "\t", "|")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class Refused:
    """A row the reader refused before any value was checked: its line, reason (``code: detail``) and text."""

    line: int
    reason: str
    raw: str


@dataclass(frozen=True, eq=False)
class EventTable:
    """The mapped columns of one file (Arrow arrays, any type) and how to name a row.

    ``line_of(rows)`` maps 0-based row indices to 1-based line numbers (rows of a Parquet file: row
    numbers); ``raw_of(lines)`` returns the original text of those lines (for quarantine records).
    """

    source: str
    lat: Any
    lon: Any
    time: Any
    entity: Any | None
    unit: str  # "line" or "row"
    line_of: Callable[[IntArray], IntArray]
    raw_of: Callable[[list[int]], dict[int, str]]
    refused: tuple[Refused, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.lat)


def file_format(path: str | Path) -> str:
    """``"csv"``, ``"json"`` or ``"parquet"`` from the file name (``.gz`` allowed for CSV and JSON lines); a
    directory is refused with how to name its files."""
    if Path(path).is_dir():
        raise EventLogError(f"event file {str(path)!r} is a directory: name the files in it ('counts' reads several, "
                            f"e.g. {str(Path(path) / '*.csv')!r} in the shell)")
    name = Path(path).name.lower()
    gz = name.endswith(".gz")
    stem = name[:-3] if gz else name
    for fmt, suffixes in (("csv", CSV_SUFFIXES), ("json", JSON_SUFFIXES), ("parquet", PARQUET_SUFFIXES)):
        if stem.endswith(suffixes) and not (gz and fmt == "parquet"):
            return fmt
    raise EventLogError(f"event file {str(path)!r}: unknown format (expected .csv, .tsv, .txt, .jsonl, .ndjson, .json or "
                        ".parquet; .gz for CSV and JSON lines)")


def read_event_table(path: str | Path, columns: EventColumns) -> EventTable:
    """Read the mapped columns of one event file (see the module docstring).

    Raises
    ------
    EventLogError
        The file cannot be read, its format is unknown, or it lacks a mapped column (the message
        names the column, its option and the columns the file has).
    """
    fmt = file_format(path)
    if not Path(path).is_file():
        raise EventLogError(f"event file {str(path)!r} does not exist or is not a file")
    if columns.names and fmt != "csv":
        raise EventLogError(f"--columns names the columns of a CSV file without a header line; {str(path)!r} is "
                            f"{'JSON lines' if fmt == 'json' else 'Parquet'}, whose columns have names")
    try:
        if fmt == "csv":
            return _read_csv(Path(path), columns)
        if fmt == "json":
            return _read_json(Path(path), columns)
        return _read_parquet(Path(path), columns)
    except OSError as exc:
        raise EventLogError(f"cannot read event file {str(path)!r}: {exc.strerror or exc}") from exc


def _open_text(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as f:
        yield from f


def _lines_at(path: Path, wanted: list[int]) -> dict[int, str]:
    """The text of the given 1-based lines (one pass over the file; only on the bad-row path)."""
    want, out = set(wanted), {}
    last = max(want, default=0)
    for n, text in enumerate(_open_text(path), start=1):
        if n in want:
            out[n] = text.rstrip("\r\n")
        if n >= last:
            break
    return out


# -- CSV -------------------------------------------------------------------------------
def csv_delimiter(header_line: str, name: str = "") -> str:
    """The field separator of a CSV file from its header line (see the module docstring).

    Notes
    -----
    A ``.tsv`` (or ``.tsv.gz``) file is tab separated whatever its header holds. Otherwise a header holding a
    comma is comma separated; one holding none takes the first of :data:`OTHER_DELIMITERS` it holds; a header of
    one column without any of them is read as comma separated (and then lacks the mapped columns, which the
    caller says).
    """
    if name.lower().removesuffix(".gz").endswith(".tsv"):
        return "\t"
    if "," in header_line:
        return ","
    return next((d for d in OTHER_DELIMITERS if d in header_line), ",")


def _csv_header(path: Path, names: tuple[str, ...]) -> tuple[list[str], str]:
    """The column names (the header line's, or ``names`` for a file without one) and the field separator.

    A file read with ``names`` whose first line holds no number (a data line of a location log holds at least
    its latitude and longitude) names its columns anyway and is refused: that line would be a bad row, and its
    names are the better mapping.
    """
    for text in _open_text(path):
        line = text.rstrip("\r\n")
        sep = csv_delimiter(line, path.name)
        first = [h.strip().strip('"') for h in line.split(sep)]
        if names and not any(is_number(f) for f in first):
            raise EventLogError(f"{str(path)!r} line 1 names columns ({first!r}), but --columns says the file has no "
                                "header line: leave --columns out and map the header's names with --lat, --lon, "
                                "--time, --entity")
        return (list(names) if names else first), sep
    raise EventLogError(f"{str(path)!r}: file is empty (expected "
                        + ("events" if names else "a header line naming the columns") + ")")


def _read_csv(path: Path, columns: EventColumns) -> EventTable:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    source = str(path)
    header, sep = _csv_header(path, columns.names)
    check_columns(source, header, columns)
    wanted = [columns.lat, columns.lon, columns.time] + ([columns.entity] if columns.entity in header else [])
    invalid: list[str] = []

    def handler(row: Any) -> str:
        if row.text.strip():
            invalid.append(row.text)
        return "skip"

    def read(types: dict[str, Any]) -> Any:
        return pcsv.read_csv(path, read_options=pcsv.ReadOptions(column_names=list(columns.names) or None),
                             parse_options=pcsv.ParseOptions(delimiter=sep, invalid_row_handler=handler),
                             convert_options=pcsv.ConvertOptions(include_columns=wanted, column_types=types))

    try:
        table = read({columns.lat: pa.float64(), columns.lon: pa.float64()})
        if _inferred_time(table.column(columns.time)):  # times as written: the time unit rule reads the text
            invalid.clear()
            table = read({columns.lat: pa.float64(), columns.lon: pa.float64(), columns.time: pa.string()})
    except pa.ArrowInvalid:  # text in a number column: read as text, find the bad values vectorised
        invalid.clear()
        try:
            table = read({c: pa.string() for c in wanted})
        except pa.ArrowInvalid as exc:
            raise EventLogError(f"cannot read CSV file {source!r}: {exc}") from exc
    lines = _CsvLines(path, len(header), sep, header=not columns.names)
    named_by = "--columns names" if columns.names else "the header has"
    refused = tuple(Refused(n, f"bad_type: line has {t.count(sep) + 1} fields, {named_by} {len(header)}", t)
                    for n, t in lines.refused(len(invalid)))
    entity = table.column(columns.entity) if columns.entity in header else None
    return EventTable(source, table.column(columns.lat), table.column(columns.lon), table.column(columns.time),
                      entity, "line", lines.line_of, lambda ns: _lines_at(path, ns), refused)


class _CsvLines:
    """Row -> line of a CSV file, worked out in one pass over the file, and only when asked."""

    def __init__(self, path: Path, n_fields: int, sep: str = ",", *, header: bool = True) -> None:
        self.path, self.n_fields, self.sep, self.header = path, n_fields, sep, header
        self._rows: IntArray | None = None
        self._bad: list[tuple[int, str]] = []

    def _scan(self) -> IntArray:
        if self._rows is None:
            rows: list[int] = []
            for n, text in enumerate(_open_text(self.path), start=1):
                if (n == 1 and self.header) or not text.strip():
                    continue
                if text.count(self.sep) + 1 != self.n_fields and '"' not in text:
                    self._bad.append((n, text.rstrip("\r\n")))
                else:
                    rows.append(n)
            self._rows = np.array(rows, dtype=np.int64)
        return self._rows

    def line_of(self, rows: IntArray) -> IntArray:
        out: IntArray = self._scan()[rows]
        return out

    def refused(self, count: int) -> list[tuple[int, str]]:
        if count == 0:
            return []
        self._scan()
        return self._bad


# -- JSON lines --------------------------------------------------------------------------
def _read_json(path: Path, columns: EventColumns) -> EventTable:
    import pyarrow as pa
    import pyarrow.json as pjson

    source = str(path)
    data = pa.input_stream(str(path), compression="detect").read()
    try:
        table = pjson.read_json(pa.BufferReader(data))
        if columns.time in table.column_names and _inferred_time(table.column(columns.time)):
            as_text = pa.schema([(columns.time, pa.string())])  # times as written: the time unit rule reads the text
            table = pjson.read_json(pa.BufferReader(data), parse_options=pjson.ParseOptions(explicit_schema=as_text))
    except pa.ArrowInvalid:  # types vary between lines, or a line does not parse
        return _read_json_slowly(source, data, columns)
    if table.num_rows == 0:
        raise EventLogError(f"{source}: no events (the file holds no JSON object)")
    have = table.column_names
    check_columns(source, have, columns)
    lines = _nonblank_lines(data)
    if len(lines) != table.num_rows:
        return _read_json_slowly(source, data, columns)

    def line_of(rows: IntArray) -> IntArray:
        out: IntArray = lines[rows]
        return out

    entity = table.column(columns.entity) if columns.entity in have else None
    return EventTable(source, table.column(columns.lat), table.column(columns.lon), table.column(columns.time),
                      entity, "line", line_of, lambda ns: _lines_at(path, ns))


def _inferred_time(col: Any) -> bool:
    """Whether the reader made a timestamp, date or time of a text column (CSV and JSON have no such type)."""
    import pyarrow as pa

    t = col.type
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t))


def _nonblank_lines(data: bytes) -> IntArray:
    """1-based numbers of the lines of ``data`` holding more than white space."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    if len(buf) and buf[-1] != 10:
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    nonspace = np.cumsum(~np.isin(buf, (9, 10, 13, 32)), dtype=np.int64)
    before = np.where(starts > 0, nonspace[np.maximum(starts - 1, 0)], 0)
    at_end = np.where(ends > 0, nonspace[np.maximum(ends - 1, 0)], 0)
    out: IntArray = np.flatnonzero(at_end - before > 0).astype(np.int64) + 1
    return out


def _read_json_slowly(source: str, data: bytes, columns: EventColumns) -> EventTable:
    """One ``json.loads`` per line: exact lines and reasons for a file the fast reader refuses."""
    import pyarrow as pa

    names = (columns.lat, columns.lon, columns.time, columns.entity)
    values: list[list[str | None]] = [[], [], [], []]
    lines: list[int] = []
    refused: list[Refused] = []
    seen: set[str] = set()
    texts = data.decode("utf-8", errors="replace").splitlines()
    for n, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except ValueError as exc:
            refused.append(Refused(n, f"unparsable_json: {exc}", text))
            continue
        if not isinstance(doc, dict):
            refused.append(Refused(n, f"not_an_object: expected a JSON object, got {_short(doc)}", text))
            continue
        seen.update(doc)
        for out, name in zip(values, names, strict=True):
            out.append(_as_text(doc.get(name)))
        lines.append(n)
    if lines:
        check_columns(source, sorted(seen), columns)
    line_arr = np.array(lines, dtype=np.int64)

    def line_of(rows: IntArray) -> IntArray:
        out: IntArray = line_arr[rows]
        return out

    lat, lon, time, entity = (pa.array(v, type=pa.string()) for v in values)
    return EventTable(source, lat, lon, time, entity if columns.entity in seen else None, "line", line_of,
                      lambda ns: {k: texts[k - 1] for k in ns if 0 < k <= len(texts)}, tuple(refused))


def _as_text(v: object) -> str | None:
    """A JSON value as text for the vectorised checks: numbers as written, strings as they are, others as JSON."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v)
    return json.dumps(v)


def _short(v: object, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


# -- Parquet -----------------------------------------------------------------------------
def _read_parquet(path: Path, columns: EventColumns) -> EventTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = str(path)
    try:
        have = pq.read_schema(path).names
    except pa.ArrowInvalid as exc:
        raise EventLogError(f"cannot read Parquet file {source!r}: {exc}") from exc
    check_columns(source, have, columns)
    wanted = [columns.lat, columns.lon, columns.time] + ([columns.entity] if columns.entity in have else [])
    table = pq.read_table(path, columns=wanted)

    def line_of(rows: IntArray) -> IntArray:
        out: IntArray = rows.astype(np.int64) + 1
        return out

    def raw_of(ns: list[int]) -> dict[int, str]:
        return {n: json.dumps(table.slice(n - 1, 1).to_pylist()[0], default=str) for n in ns}

    entity = table.column(columns.entity) if columns.entity in have else None
    return EventTable(source, table.column(columns.lat), table.column(columns.lon), table.column(columns.time),
                      entity, "row", line_of, raw_of)
