"""Where a producer's events keep their fields: the event field mapping, a deploy setting (``EVENT_FIELDS``).

An event has five fields every part reads (:class:`EventField`, the canonical names, ``docs/CONTRACTS.md``
"Events"). A producer may call them otherwise (``latitude`` for ``lat``): :class:`EventFields` says which JSON key
holds each. The router and the geo worker (:func:`geokernel.events.parse_event`) and the Spark job
(``glue_jobs/events.py``) read the mapped keys; everything they write (the valid event's fields, enriched output
records) uses the canonical names, and a quarantine record keeps the original text. The mapping also says how the
time is encoded: ``ts_unit`` (:class:`geokernel.contracts.timestamps.TsUnit`, default ``auto``; JSON
``{"ts": "time", "ts_unit": "s"}``), the one time unit rule every reader applies (:mod:`geokernel.contracts.timestamps`).

Where it comes from: the CDK context key ``event_fields`` (``infra/config.py``) and the local loop's
``--event-fields`` flag; it reaches the router and the workers as the environment variable ``EVENT_FIELDS``
(:meth:`EventFields.to_json`, unset when it is the default) and the Spark job as ``--event-fields`` (EMR, local)
or ``--event_fields`` (Glue) with the same JSON. ``python -m partitioner counts`` maps the same names for recorded
logs (``partitioner/load/eventread.py`` ``EventColumns`` takes its defaults from here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from geokernel.contracts.errors import ContractError
from geokernel.contracts.timestamps import TS_UNIT_SETTING, TsUnit

#: Spark's column for a record it cannot parse (``glue_jobs/events.py``): no event field may be called so.
SPARK_CORRUPT_COLUMN = "_corrupt_record"
_MAX_NAME = 256


class EventField(StrEnum):
    """The canonical name of each field every event has (the records the parts write use these)."""

    EVENT_ID = "event_id"
    ENTITY_ID = "entity_id"
    TS = "ts"
    LAT = "lat"
    LON = "lon"


@dataclass(frozen=True, slots=True)
class EventFields:
    """The JSON key holding each event field (the defaults are the canonical names, :class:`EventField`) and the
    encoding of the time, ``ts_unit`` (:class:`~geokernel.contracts.timestamps.TsUnit`, default ``auto``).

    Raises :class:`ContractError` on a name that is empty, not a string, longer than 256 characters, holds a
    control character, is :data:`SPARK_CORRUPT_COLUMN`, or is given to two fields, and on a ``ts_unit`` that is not
    one of the units.
    """

    event_id: str = EventField.EVENT_ID.value
    entity_id: str = EventField.ENTITY_ID.value
    ts: str = EventField.TS.value
    lat: str = EventField.LAT.value
    lon: str = EventField.LON.value
    #: How ``ts`` is encoded (the time unit rule, :mod:`geokernel.contracts.timestamps`); a text is made a TsUnit.
    ts_unit: TsUnit = TsUnit.AUTO
    #: The mapped names in :class:`EventField` order ``(event_id, entity_id, ts, lat, lon)`` (derived).
    names: tuple[str, str, str, str, str] = field(init=False, repr=False, compare=False)
    _rename: Mapping[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _shadowed: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    _inverse: Mapping[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _inverse_shadowed: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        for f in fields(self)[:5]:
            name = getattr(self, f.name)
            if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
                raise ContractError(f"event field {f.name!r}: a JSON key of 1-{_MAX_NAME} characters expected, "
                                    f"got {name!r}")
            if any(ord(c) < 32 for c in name) or name == SPARK_CORRUPT_COLUMN:
                raise ContractError(f"event field {f.name!r}: {name!r} is not a usable field name (control "
                                    f"characters and {SPARK_CORRUPT_COLUMN!r} are not)")
        if self.ts_unit not in tuple(TsUnit):
            raise ContractError(f"event field mapping: {TS_UNIT_SETTING} {self.ts_unit!r} is not one of "
                                f"{', '.join(u.value for u in TsUnit)}")
        object.__setattr__(self, "ts_unit", TsUnit(self.ts_unit))
        names = (self.event_id, self.entity_id, self.ts, self.lat, self.lon)
        object.__setattr__(self, "names", names)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ContractError(f"event fields: {twice[0]!r} is given to more than one field in {self.to_dict()!r}")
        rename = {n: f.value for f, n in zip(EventField, names, strict=True) if n != f.value}
        object.__setattr__(self, "_rename", rename)
        object.__setattr__(self, "_shadowed", frozenset(rename.values()) - rename.keys())
        object.__setattr__(self, "_inverse", {c: n for n, c in rename.items()})
        object.__setattr__(self, "_inverse_shadowed", frozenset(rename) - set(rename.values()))

    def name_of(self, field: EventField | str) -> str:
        """The JSON key holding the canonical ``field``."""
        return str(getattr(self, EventField(field).name.lower()))

    @property
    def is_default(self) -> bool:
        """True when every field has its canonical name and ``ts_unit`` is ``auto``."""
        return self == DEFAULT_EVENT_FIELDS

    def to_dict(self) -> dict[str, str]:
        """``{canonical: mapped}`` of the fields whose name differs, and ``ts_unit`` unless ``auto`` (``{}``: default)."""
        out = {f.value: n for f, n in zip(EventField, self.names, strict=True) if n != f.value}
        return out | ({TS_UNIT_SETTING: self.ts_unit.value} if self.ts_unit is not TsUnit.AUTO else {})

    def to_json(self) -> str:
        """The one-line JSON of :meth:`to_dict` (sorted keys): the value of ``EVENT_FIELDS`` and ``--event-fields``."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, doc: Any, where: str) -> EventFields:
        """Build from ``{canonical: mapped}`` and ``ts_unit`` (keys left out keep their default); :class:`ContractError`
        names ``where``."""
        if not isinstance(doc, Mapping):
            raise ContractError(f"{where}: the event field mapping must be an object like "
                                f"{{\"lat\": \"latitude\"}}, got {doc!r}")
        known = [f.value for f in EventField] + [TS_UNIT_SETTING]
        unknown = sorted(str(k) for k in doc if k not in known)
        if unknown:
            raise ContractError(f"{where}: unknown event field {unknown[0]!r} in {dict(doc)!r} "
                                f"(the fields are {', '.join(known[:-1])}; and the setting {TS_UNIT_SETTING})")
        try:
            return cls(**{str(k): v for k, v in doc.items()})
        except ContractError as exc:
            raise ContractError(f"{where}: {exc}") from None

    @classmethod
    def from_json(cls, text: str, where: str) -> EventFields:
        """Decode :meth:`to_json` (empty or blank text: the default); :class:`ContractError` names ``where``."""
        if not text.strip():
            return DEFAULT_EVENT_FIELDS
        try:
            doc = json.loads(text)
        except ValueError:
            raise ContractError(f"{where}: the event field mapping must be a JSON object like "
                                f"{{\"lat\": \"latitude\"}}, got {text!r}") from None
        return cls.from_mapping(doc, where)

    @classmethod
    def from_pairs(cls, text: str, where: str) -> EventFields:
        """Decode ``lat=latitude,lon=longitude,ts_unit=s`` (the local loop's flag); :class:`ContractError` names ``where``."""
        doc: dict[str, str] = {}
        for part in (p.strip() for p in text.split(",")):
            key, eq, value = part.partition("=")
            if not part or not eq or not key.strip() or key.strip() in doc:
                raise ContractError(f"{where}: expected field=name pairs like 'lat=latitude,lon=longitude' "
                                    f"(each field once), got {text!r}")
            doc[key.strip()] = value.strip()
        return cls.from_mapping(doc, where)

    def canonical(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """``doc`` with the mapped keys renamed to the canonical ones (which win over a field of their name)."""
        rename, shadowed = self._rename, self._shadowed
        return {rename.get(k, k): v for k, v in doc.items() if k not in shadowed}

    def mapped(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`canonical`: ``doc`` with the canonical keys renamed to the producer's keys."""
        rename, shadowed = self._inverse, self._inverse_shadowed
        return {rename.get(k, k): v for k, v in doc.items() if k not in shadowed}


#: The canonical names: what events carry when nothing is configured.
DEFAULT_EVENT_FIELDS = EventFields()
