"""Which column of a recorded event log holds what, and what to say when a file lacks one.

:class:`EventColumns` maps the event fields (latitude, longitude, time, entity) to a file's columns and names the
columns of a CSV file without a header line (``--columns``). :func:`check_columns` refuses a file that lacks a mapped
column with one line naming the column, its option, the file's columns and, where it can tell, the options to pass
(:data:`COLUMN_ALIASES`; a file whose first line is data is told to pass ``--columns``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geokernel.contracts.event_fields import EventField
from geokernel.errors import EventLogError


@dataclass(frozen=True)
class EventColumns:
    """Which column holds what. ``entity`` is optional: read when the file has it (or when ``entity_given``).

    The defaults are the canonical event field names (:class:`geokernel.contracts.event_fields.EventField`), the
    ones the live parts read unless ``EVENT_FIELDS`` maps them.
    """

    lat: str = EventField.LAT.value
    lon: str = EventField.LON.value
    time: str = EventField.TS.value
    entity: str = EventField.ENTITY_ID.value
    entity_given: bool = False
    #: The columns of a CSV file without a header line, in order (``--columns``); empty: its first line names them.
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = [n for n in self.names if not n.strip()]
        dup = sorted({n for n in self.names if self.names.count(n) > 1})
        if bad or dup:
            raise EventLogError(f"--columns {','.join(self.names)!r}: "
                                + ("a column name is empty" if bad else f"{dup[0]!r} is named twice"))

    def required(self) -> tuple[tuple[str, str], ...]:
        """``(column, option)`` pairs every file must have."""
        need = (("--lat", self.lat), ("--lon", self.lon), ("--time", self.time))
        out = tuple((col, opt) for opt, col in need)
        return out + (((self.entity, "--entity"),) if self.entity_given else ())


def column_names(text: str) -> tuple[str, ...]:
    """The names of ``--columns`` (comma separated, spaces around a name dropped); ``()`` for ``""``."""
    return tuple(n.strip() for n in text.split(",")) if text.strip() else ()


#: Column names public location logs commonly use for each mapped field, lower case (AIS from
#: MarineCadastre: ``LAT``, ``LON``, ``BaseDateTime``, ``MMSI``; GPS and taxi logs: ``latitude``,
#: ``longitude``, ``timestamp``, ``vehicle_id``): a missing column is answered with the option to pass.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "--lat": ("lat", "latitude", "lat_deg", "y"),
    "--lon": ("lon", "longitude", "lng", "long", "lon_deg", "x"),
    "--time": ("ts", "time", "timestamp", "datetime", "date_time", "basedatetime", "event_time", "epoch",
               "unix_time", "t"),
    "--entity": ("entity_id", "entity", "id", "mmsi", "vehicle_id", "vehicle", "device_id", "device", "taxi_id",
                 "user_id", "imei", "track_id", "object_id"),
}


def check_columns(source: str, have: list[str], columns: EventColumns) -> None:
    """Raise :class:`EventLogError` for the first required column ``have`` lacks, naming it and what to pass."""
    for col, opt in columns.required():
        if col not in have:
            hint = _mapping_hint(have, columns)
            if any(is_number(h) for h in have):
                hint = (f"; its first line looks like data, not column names (the number {next(h for h in have if is_number(h))!r}): "
                        f"name its {len(have)} columns in order with --columns, e.g. --columns "
                        f"{','.join(_example_names(len(have)))} (the names the column options default to), or add "
                        "a header line naming them")
            raise EventLogError(f"{source}: no column {col!r} ({opt}); the file has columns {have!r}{hint}")


def _example_names(n: int) -> list[str]:
    """``n`` column names for the hint of a file without a header: ``entity_id,ts,lon,lat``, then ``c5, c6, ...``."""
    return ([EventField.ENTITY_ID.value, EventField.TS.value, EventField.LON.value, EventField.LAT.value]
            + [f"c{i}" for i in range(5, n + 1)])[:n]


def _mapping_hint(have: list[str], columns: EventColumns) -> str:
    """``"; pass --lat LAT ..."`` for every required column the file lacks under one known alias, else ``""``.

    Notes
    -----
    A column is suggested only when exactly one of the file's columns matches the option's aliases
    (:data:`COLUMN_ALIASES`, case-insensitive); two candidates (``x`` and ``lon``) suggest nothing for
    that option rather than a guess. The entity column is suggested too when ``--entity`` was not given
    (without it each event is its own entity).
    """
    lower: dict[str, list[str]] = {}
    for h in have:
        lower.setdefault(h.lower(), []).append(h)
    picks = []
    optional = () if columns.entity_given else ((columns.entity, "--entity"),)
    for col, opt in columns.required() + optional:
        if col in have:
            continue
        found = [h for alias in COLUMN_ALIASES.get(opt, ()) for h in lower.get(alias, ())]
        if len(found) == 1:
            picks.append(f"{opt} {found[0]}")
    return f"; pass {' '.join(picks)}" if picks else ""


def is_number(text: str) -> bool:
    """True for text that parses as a finite number (a column name rarely does; a data row's fields often do)."""
    try:
        return bool(np.isfinite(float(text)))
    except ValueError:
        return False
