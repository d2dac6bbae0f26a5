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
* ``late``: True for an event whose ``ts`` is not after the entity's previous event's (see below), else False.

State per entity (small JSON): ``{"zones": {id: since_ms}, "dwelt": [ids], "last": {"ts", "lat", "lon"}}``.

Notes
-----
Rules for time (``ts``: epoch milliseconds or ISO-8601, as the event contract allows; a naive ISO time is UTC):

* an entity's first event: ``speed_mps`` and ``heading_deg`` None; ``ENTER`` for each zone it is in;
* an event whose ``ts`` is **not after** the entity's previous one (out of order, a duplicate, or a second event in
  the same millisecond): the state is left unchanged, ``transitions`` is empty, ``speed_mps`` / ``heading_deg`` are
  None and ``late`` is True, so a consumer can tell "nothing happened" (``late`` False, no transitions) from "not
  evaluated" (``late`` True); ``zones`` is still the point's zones (a fact of the point alone). A re-delivered event
  cannot move the state backwards. Until issue #58 such an event got empty ``transitions`` with no flag.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from geo_service.pipeline.transform import Applied, JsonValue, TransformError, haversine_km

#: Dwell time before a DWELL transition, seconds of event time (``GEOFENCE_DWELL_S`` overrides it).
DEFAULT_DWELL_S = 300.0
DWELL_ENV = "GEOFENCE_DWELL_S"


def event_ms(ts: Any) -> float:
    """Event time in epoch milliseconds from a contract ``ts`` (epoch ms number or digit string, or ISO-8601).

    Raises
    ------
    TransformError
        ``ts`` is none of those (the worker validated it, so only a hand-made event gets here).
    """
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        return float(ts)
    text = str(ts).strip()
    if text.isdigit():
        return float(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise TransformError(f"event ts {ts!r} is neither epoch milliseconds nor ISO-8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp() * 1000.0


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


def advance(zones: list[str], event: Mapping[str, Any], state: JsonValue, dwell_ms: float) -> Applied:
    """The fields and the entity's next state for one event whose point lies in ``zones`` (module docstring).

    Parameters
    ----------
    zones : list of str
        The zones containing the event's point.
    event : mapping
        A validated event (``ts``, ``lat``, ``lon``).
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
    t = event_ms(event["ts"])
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


J = TypeVar("J", bound=ZoneJoin)


class ZoneStates(Generic[J]):
    """The stateful transform over a zone join (module docstring): ``fences`` finds the zones, :func:`advance` keeps
    each entity's state. Subclasses name their ``settings`` and build their join."""

    stateful = True
    #: Environment variables it reads: the local loop passes them on to its workers.
    settings: tuple[str, ...] = (DWELL_ENV,)

    def __init__(self, fences: J) -> None:
        self.fences: J = fences
        self.dwell_ms = dwell_s() * 1000.0

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

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        """Fields and the entity's next state for one event (:func:`advance` on the join's zones)."""
        return advance(list(self.fences.apply(event)["zones"]), event, state, self.dwell_ms)
