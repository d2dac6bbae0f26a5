"""What the geofence transforms share: an entity's zone state (ENTER / EXIT / DWELL), speed, heading and late events.

A stateful geofence transform is a *zone join* (which zones contain a point: circles in :mod:`transforms.geofence`,
polygons in :mod:`transforms.geofence_polygons`) plus the per-entity state kept here. :class:`ZoneStates` is that
state machine over any join with ``load_region``, ``apply(event) -> {"zones": [...]}`` and ``loaded``;
:class:`transforms.geofence_state.GeofenceState` and :class:`transforms.geofence_polygons.GeofencePolygons` are it over
their joins.

Per event it adds

* ``zones``: the join's zones containing the point (in the join's order);
* ``transitions``: a list of ``{"zone": id, "kind": "ENTER" | "EXIT" | "DWELL"}``: ``ENTER`` for a zone the entity is
  in now and was not in at its previous event, ``EXIT`` for one it was in and is not now, ``DWELL`` once per stay when
  the entity has been inside a zone continuously for at least ``GEOFENCE_DWELL_S`` seconds of event time (default
  :data:`DEFAULT_DWELL_S`), measured from the first event seen inside;
* ``speed_mps``: great-circle distance from the previous point over the event-time difference (m/s, 3 decimals);
* ``heading_deg``: initial great-circle bearing from the previous point, degrees clockwise from north in [0, 360)
  (1 decimal); None when the entity did not move;
* ``late``: True for an event whose time is not after the entity's previous event's (see below), else False.

State per entity (small JSON): ``{"zones": {id: since_ms}, "dwelt": [ids], "last": {"ts", "lat", "lon"}}``.

Notes
-----
Rules for time. An event's time is the worker's ``ts_ms`` (epoch milliseconds, as the time unit rule read ``ts`` under
the deployment's ``ts_unit``; an event without it, made by hand, has its ``ts`` read by the same rule with ``auto``),
or the field ``GEOFENCE_TIME_FIELD`` names, read by the same rule with ``auto`` (an event without it is a
:class:`~geo_service.pipeline.transform.TransformError`, so the worker quarantines it as ``transform_error``: no
speed is ever measured between two clocks). The local replay of a recorded log (``run-local --events``) sends each
event's replay time as ``ts`` and its recorded time as ``recorded_utc``, and sets ``GEOFENCE_TIME_FIELD=recorded_utc``
(the ``time_setting`` of :class:`ZoneStates`) unless it is set already: speeds and dwell are then those of the
recording, whatever ``--speed`` (with ``ts`` they would be ``--speed`` times the recorded speeds, and a dwell
``1 / speed`` as long).

* an entity's first event: ``speed_mps`` and ``heading_deg`` None; ``ENTER`` for each zone it is in;
* an event whose time is **not after** the entity's previous one (out of order, a duplicate, or a second event in
  the same millisecond): the state is left unchanged, ``transitions`` is empty, ``speed_mps`` / ``heading_deg`` are
  None and ``late`` is True, so a consumer can tell "nothing happened" (``late`` False, no transitions) from "not
  evaluated" (``late`` True); ``zones`` is still the point's zones (a fact of the point alone). A re-delivered event
  cannot move the state backwards. Until issue #58 such an event got empty ``transitions`` with no flag.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from geo_service.pipeline.transform import Applied, JsonValue, TransformError, haversine_km
from geokernel.contracts.timestamps import EVENT_TIME_FIELD
from geokernel.timestamps import read_ts

#: Dwell time before a DWELL transition, seconds of event time (``GEOFENCE_DWELL_S`` overrides it).
DEFAULT_DWELL_S = 300.0
DWELL_ENV = "GEOFENCE_DWELL_S"
#: The event field that holds an event's time (unset or empty: ``ts``).
TIME_ENV = "GEOFENCE_TIME_FIELD"
DEFAULT_TIME_FIELD = "ts"


def event_ms(event: Mapping[str, Any], field: str = DEFAULT_TIME_FIELD) -> float:
    """Event time in epoch milliseconds: with ``field`` ``ts``, the worker's ``ts_ms``, else ``ts`` read by the time
    unit rule (``auto``); with another ``field``, that field read by the rule (``auto``).

    Raises
    ------
    TransformError
        No ``ts_ms`` and a ``ts`` the rule refuses (the worker validated it, so only a hand-made event gets here), or
        a ``field`` the rule refuses (the worker does not check other fields), naming the field and the value.
    """
    if field == DEFAULT_TIME_FIELD:
        ms = event.get(EVENT_TIME_FIELD)
        if isinstance(ms, int | float) and not isinstance(ms, bool):
            return float(ms)
    when = read_ts(event.get(field), field)
    if when.ms is None:
        raise TransformError(f"event {event.get('event_id')!r}: {when.reason}")
    return float(when.ms)


def bearing_deg(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Initial great-circle bearing from point 1 to point 2, degrees clockwise from north in [0, 360)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dl = math.radians(lon2 - lon1)
    y = math.sin(dl) * math.cos(p2)
    x = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return math.degrees(math.atan2(y, x)) % 360.0


def dwell_s() -> float:
    """``GEOFENCE_DWELL_S`` (seconds >= 0), or :data:`DEFAULT_DWELL_S` when unset or empty.

    Raises
    ------
    TransformError
        The value is not a finite number >= 0 (names it).
    """
    raw = os.environ.get(DWELL_ENV)
    if raw is None or raw == "":
        return DEFAULT_DWELL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise TransformError(f"{DWELL_ENV} must be a number of seconds >= 0, got {raw!r}")
    return value


def time_field() -> str:
    """``GEOFENCE_TIME_FIELD``: the event field an event's time comes from (``ts`` when unset or empty).

    Raises
    ------
    TransformError
        The value has spaces around it (names it).
    """
    raw = os.environ.get(TIME_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_TIME_FIELD
    if raw != raw.strip():
        raise TransformError(f"{TIME_ENV} must name an event field, got {raw!r} (spaces around it)")
    return raw


def advance(zones: list[str], t: float, event: Mapping[str, Any], state: JsonValue, dwell_ms: float) -> Applied:
    """The fields and the entity's next state for one event whose point lies in ``zones`` (module docstring).

    Parameters
    ----------
    zones : list of str
        The zones containing the event's point.
    t : float
        The event's time in epoch milliseconds (:func:`event_ms`).
    event : mapping
        A validated event (``lat``, ``lon``).
    state : dict or None
        The entity's state after its previous event, None for its first.
    dwell_ms : float
        Milliseconds of event time inside a zone before its DWELL.

    Returns
    -------
    Applied
        ``fields`` (``zones``, ``transitions``, ``speed_mps``, ``heading_deg``, ``late``) and the new state; for an
        event not after the previous one (``late``), the state passed in, unchanged.
    """
    lat, lon = float(event["lat"]), float(event["lon"])
    prev = state if isinstance(state, dict) else None
    last = prev["last"] if prev is not None else None
    if last is not None and t <= float(last["ts"]):
        return Applied({"zones": zones, "transitions": [], "speed_mps": None, "heading_deg": None, "late": True}, state)
    was: dict[str, float] = dict(prev["zones"]) if prev is not None else {}
    dwelt = set(prev["dwelt"]) if prev is not None else set()
    transitions = [{"zone": z, "kind": "ENTER"} for z in zones if z not in was]
    transitions += [{"zone": z, "kind": "EXIT"} for z in sorted(was) if z not in zones]
    now = {z: was.get(z, t) for z in zones}
    dwelt &= now.keys()
    for z in zones:
        if z not in dwelt and t - float(now[z]) >= dwell_ms:
            dwelt.add(z)
            transitions.append({"zone": z, "kind": "DWELL"})
    speed = heading = None
    if last is not None:
        metres = 1000.0 * haversine_km(float(last["lat"]), float(last["lon"]), lat, lon)
        speed = round(metres / ((t - float(last["ts"])) / 1000.0), 3)
        heading = round(bearing_deg(float(last["lat"]), float(last["lon"]), lat, lon), 1) % 360.0 if metres > 0 else None
    fields = {"zones": zones, "transitions": transitions, "speed_mps": speed, "heading_deg": heading, "late": False}
    return Applied(fields, {"zones": now, "dwelt": sorted(dwelt), "last": {"ts": t, "lat": lat, "lon": lon}})


class ZoneJoin(Protocol):
    """A stateless zone join: which of the region's zones contain an event's point."""

    @property
    def loaded(self) -> int: ...

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None: ...

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]: ...

    def zones_batch(self, events: Sequence[Mapping[str, Any]]) -> list[list[str]]: ...


J = TypeVar("J", bound=ZoneJoin)


class ZoneStates(Generic[J]):
    """The stateful transform over a zone join (module docstring): ``fences`` finds the zones, :func:`advance` keeps
    each entity's state. Subclasses name their ``settings`` and build their join."""

    stateful = True
    #: Environment variables it reads: the local loop passes them on to its workers.
    settings: tuple[str, ...] = (DWELL_ENV, TIME_ENV)
    #: The setting that names the event field its time comes from: the local replay of a recorded log sets it to the
    #: field holding the recorded time (docs/TRANSFORM.md, "Time").
    time_setting = TIME_ENV

    def __init__(self, fences: J) -> None:
        self.fences: J = fences
        self.dwell_ms = dwell_s() * 1000.0
        self.time_field = time_field()

    @property
    def loaded(self) -> int:
        """Zones loaded for the region (the worker logs it)."""
        return self.fences.loaded

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Load the zones reaching the region and its buffer ring (the join's ``load_region``)."""
        self.fences.load_region(quadkeys, buffer_ring)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The fields for an entity seen for the first time (no state)."""
        return self.apply_stateful(event, None).fields

    def prepare_batch(self, events: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """The state-free part of a read batch at once: each event's ``zones`` (the join's ``zones_batch``); the worker
        then calls :meth:`apply_prepared` per event, in its order
        (``geo_service.pipeline.transform.PreparedStatefulTransform``)."""
        return self.fences.zones_batch(events)

    def apply_prepared(self, event: Mapping[str, Any], state: JsonValue, prepared: Any) -> Applied:
        """:meth:`apply_stateful` with the event's zones from :meth:`prepare_batch`."""
        return advance(list(prepared), self._time_ms(event), event, state, self.dwell_ms)

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        """Fields and the entity's next state for one event (:func:`advance` on the join's zones)."""
        return advance(list(self.fences.apply(event)["zones"]), self._time_ms(event), event, state, self.dwell_ms)

    def _time_ms(self, event: Mapping[str, Any]) -> float:
        """The event's time in epoch milliseconds, from :attr:`time_field` (``ts`` by default)."""
        if self.time_field not in event:
            raise TransformError(f"event {event.get('event_id')!r} has no field {self.time_field!r}, which {TIME_ENV} "
                                 "names as its time")
        return event_ms(event, self.time_field)
