"""The reference stateful transform: geofence ENTER / EXIT / DWELL per entity, and speed and heading.

Per event it adds

* ``zones``: the ids of the zones containing the point, nearest first (the zones of :mod:`transforms.geofence`:
  same file, same loading, same region scoping);
* ``transitions``: a list of ``{"zone": id, "kind": "ENTER" | "EXIT" | "DWELL"}``: ``ENTER`` for a zone the entity
  is in now and was not in at its previous event, ``EXIT`` for one it was in and is not now, ``DWELL`` once per
  stay when the entity has been inside a zone continuously for at least ``GEOFENCE_DWELL_S`` seconds of event time
  (default :data:`DEFAULT_DWELL_S`), measured from the first event seen inside;
* ``speed_mps``: great-circle distance from the previous point over the event-time difference (m/s, 3 decimals);
* ``heading_deg``: initial great-circle bearing from the previous point, degrees clockwise from north in [0, 360)
  (1 decimal); None when the entity did not move.

State per entity (small JSON): ``{"zones": {id: since_ms}, "dwelt": [ids], "last": {"ts", "lat", "lon"}}``.

Rules for time. An event's time is the worker's ``ts_ms`` (epoch milliseconds, as the time unit rule read ``ts`` under
the deployment's ``ts_unit``; an event without it, made by hand, has its ``ts`` read by the same rule with ``auto``),
or the field ``GEOFENCE_TIME_FIELD`` names, read by the same rule with ``auto`` (an event without it is a
:class:`~geo_service.pipeline.transform.TransformError`, so the worker quarantines it as ``transform_error``: no
speed is ever measured between two clocks). The local replay of a recorded log (``run-local --events``) sends each
event's replay time as ``ts`` and its recorded time as ``recorded_utc``, and sets ``GEOFENCE_TIME_FIELD=recorded_utc``
(this class's ``time_setting``) unless it is set already: speeds and dwell are then those of the recording, whatever
``--speed`` (with ``ts`` they would be ``--speed`` times the recorded speeds, and a dwell ``1 / speed`` as long).

* an entity's first event: ``speed_mps`` and ``heading_deg`` None; ``ENTER`` for each zone it is in;
* an event whose time is **not after** the entity's previous one (a duplicate, or out of order): the state is left
  unchanged, ``transitions`` is empty and ``speed_mps`` / ``heading_deg`` are None; ``zones`` is still the point's
  zones (a fact of the point alone). So a re-delivered event cannot move the state backwards.

Notes
-----
**Zones at every zoom.** A worker loads the zones whose *circle* reaches its region's cells grown by ``buffer_ring``
rings of cells of their own zoom (:meth:`transforms.geofence.Geofences.load_region`, issue #56), so an entity's
``zones`` at a point of the region or its buffer are those of one process holding every zone, whatever the zooms of
the region's cells (the Spark job refines hot cells down to zoom 13-16), the zones' sizes, the latitude or the
antimeridian. Before, a zone was loaded by its centre only, and one of radius ``r`` was missed by a worker whose
cells are narrower than ``r / buffer_ring`` (zoom 13 or finer for the shipped 4 km zones), so the transitions of an
entity depended on which worker processed it.

**State follows the entity** to another worker with state handoff on (``geo_service/entity/handoff.py``): after a border
moves or a swap, the new worker goes on from the state the entity's previous event left; the local run's oracle
(``local/oracle.py``) checks every record against one process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from geo_service.pipeline.transform import Applied, JsonValue, TransformError, haversine_km
from geokernel.contracts.timestamps import EVENT_TIME_FIELD
from geokernel.timestamps import read_ts
from transforms.geofence import Geofences

#: Dwell time before a DWELL transition, seconds of event time (``GEOFENCE_DWELL_S`` overrides it).
DEFAULT_DWELL_S = 300.0
DWELL_ENV = "GEOFENCE_DWELL_S"
ZONES_ENV = "GEOFENCES_CSV"
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


def _dwell_s() -> float:
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


def _time_field() -> str:
    raw = os.environ.get(TIME_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_TIME_FIELD
    if raw != raw.strip():
        raise TransformError(f"{TIME_ENV} must name an event field, got {raw!r} (spaces around it)")
    return raw


class GeofenceState:
    """Geofence transitions and speed per entity (see the module docstring for every rule).

    Examples
    --------
    >>> t = GeofenceState(); t.load_region([""], 1)
    >>> first = t.apply_stateful({"entity_id": "a", "ts": 1767225600000, "lat": 51.4706, "lon": -0.4619}, None)
    >>> first.fields["transitions"], first.fields["speed_mps"]
    ([{'zone': 'LHR', 'kind': 'ENTER'}], None)
    """

    stateful = True
    #: Environment variables it reads: the local loop passes them on to its workers.
    settings: tuple[str, ...] = (ZONES_ENV, DWELL_ENV, TIME_ENV)
    #: The setting that names the event field its time comes from: the local replay of a recorded log sets it to the
    #: field holding the recorded time (docs/TRANSFORM.md, "Time").
    time_setting = TIME_ENV

    def __init__(self) -> None:
        self.fences = Geofences()
        self.dwell_ms = _dwell_s() * 1000.0
        self.time_field = _time_field()

    @property
    def loaded(self) -> int:
        """Zones loaded for the region (the worker logs it)."""
        return self.fences.loaded

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Load the zones reaching the region and its buffer ring (:meth:`transforms.geofence.Geofences.load_region`)."""
        self.fences.load_region(quadkeys, buffer_ring)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The fields for an entity seen for the first time (no state)."""
        return self.apply_stateful(event, None).fields

    def prepare_batch(self, events: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """The state-free part of a read batch at once: each event's ``zones`` (one distance matrix for the batch,
        :meth:`transforms.geofence.Geofences.zones_batch`); the worker then calls :meth:`apply_prepared` per event, in
        its order (``geo_service.pipeline.transform.PreparedStatefulTransform``)."""
        return self.fences.zones_batch(events)

    def apply_prepared(self, event: Mapping[str, Any], state: JsonValue, prepared: Any) -> Applied:
        """:meth:`apply_stateful` with the event's zones from :meth:`prepare_batch`."""
        return self._step(event, state, list(prepared))

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        """Fields and the entity's next state for one event.

        Parameters
        ----------
        event : mapping
            A validated event (``entity_id``, ``ts``, ``ts_ms``, ``lat``, ``lon``).
        state : dict or None
            The entity's state after its previous event, None for its first.

        Returns
        -------
        Applied
            ``fields`` (``zones``, ``transitions``, ``speed_mps``, ``heading_deg``) and the new state; for an event
            not after the previous one, the state passed in, unchanged.
        """
        return self._step(event, state, self.fences.apply(event)["zones"])

    def _step(self, event: Mapping[str, Any], state: JsonValue, zones: list[str]) -> Applied:
        """One event's fields and next state, given its zones."""
        t = self._time_ms(event)
        lat, lon = float(event["lat"]), float(event["lon"])
        prev = state if isinstance(state, dict) else None
        last = prev["last"] if prev is not None else None
        if last is not None and t <= float(last["ts"]):
            return Applied({"zones": zones, "transitions": [], "speed_mps": None, "heading_deg": None}, state)
        was: dict[str, float] = dict(prev["zones"]) if prev is not None else {}
        dwelt = set(prev["dwelt"]) if prev is not None else set()
        transitions = [{"zone": z, "kind": "ENTER"} for z in zones if z not in was]
        transitions += [{"zone": z, "kind": "EXIT"} for z in sorted(was) if z not in zones]
        now = {z: was.get(z, t) for z in zones}
        dwelt &= now.keys()
        for z in zones:
            if z not in dwelt and t - float(now[z]) >= self.dwell_ms:
                dwelt.add(z)
                transitions.append({"zone": z, "kind": "DWELL"})
        speed = heading = None
        if last is not None:
            metres = 1000.0 * haversine_km(float(last["lat"]), float(last["lon"]), lat, lon)
            speed = round(metres / ((t - float(last["ts"])) / 1000.0), 3)
            heading = round(bearing_deg(float(last["lat"]), float(last["lon"]), lat, lon), 1) % 360.0 if metres > 0 else None
        fields = {"zones": zones, "transitions": transitions, "speed_mps": speed, "heading_deg": heading}
        return Applied(fields, {"zones": now, "dwelt": sorted(dwelt), "last": {"ts": t, "lat": lat, "lon": lon}})

    def _time_ms(self, event: Mapping[str, Any]) -> float:
        """The event's time in epoch milliseconds, from :attr:`time_field` (``ts`` by default)."""
        if self.time_field not in event:
            raise TransformError(f"event {event.get('event_id')!r} has no field {self.time_field!r}, which {TIME_ENV} "
                                 "names as its time")
        return event_ms(event, self.time_field)
