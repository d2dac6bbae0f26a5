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

Rules for time (the event time is the worker's ``ts_ms``, epoch milliseconds as the time unit rule read ``ts`` under
the deployment's ``ts_unit``; an event without it, made by hand, has its ``ts`` read by the same rule with ``auto``):

* an entity's first event: ``speed_mps`` and ``heading_deg`` None; ``ENTER`` for each zone it is in;
* an event whose ``ts`` is **not after** the entity's previous one (a duplicate, or out of order): the state is left
  unchanged, ``transitions`` is empty and ``speed_mps`` / ``heading_deg`` are None; ``zones`` is still the point's
  zones (a fact of the point alone). So a re-delivered event cannot move the state backwards.

Notes
-----
**Buffer ring.** A worker loads the zones whose *centre* lies in its region or its ``buffer_ring`` rings of
neighbour cells (:meth:`transforms.geofence.Geofences.load_region`). A point of the region inside a zone of radius
``r`` has the zone's centre within ``r`` of it, so every such zone is loaded when ``r`` is at most ``buffer_ring``
cell widths; a cell of zoom ``z`` is ``40075 * cos(lat) / 2**z`` km wide. With the defaults (``BUFFER_RING`` 1,
regions of zoom-12 cells or coarser, 9.8 km wide at the equator) zones of up to 3 km are safe up to 72 degrees of
latitude; every shipped zone (``transforms/data/geofences.csv``, ``city_zones.csv``, ``ais_zones.csv``) is at
most 4 km and below 60 degrees (4.9 km cells). A bigger zone or a finer region needs a wider ``BUFFER_RING``, or the
entity's membership would depend on which worker processes it.

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


def event_ms(event: Mapping[str, Any]) -> float:
    """Event time in epoch milliseconds: the worker's ``ts_ms``, else ``ts`` read by the time unit rule (``auto``).

    Raises
    ------
    TransformError
        No ``ts_ms`` and a ``ts`` the rule refuses (the worker validated it, so only a hand-made event gets here).
    """
    ms = event.get(EVENT_TIME_FIELD)
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return float(ms)
    when = read_ts(event.get("ts"))
    if when.ms is None:
        raise TransformError(f"event without {EVENT_TIME_FIELD}: {when.reason}")
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
    settings: tuple[str, ...] = (ZONES_ENV, DWELL_ENV)

    def __init__(self) -> None:
        self.fences = Geofences()
        self.dwell_ms = _dwell_s() * 1000.0

    @property
    def loaded(self) -> int:
        """Zones loaded for the region (the worker logs it)."""
        return self.fences.loaded

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        """Load the zones of the region and its buffer ring (:meth:`transforms.geofence.Geofences.load_region`)."""
        self.fences.load_region(quadkeys, buffer_ring)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The fields for an entity seen for the first time (no state)."""
        return self.apply_stateful(event, None).fields

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
        t = event_ms(event)
        lat, lon = float(event["lat"]), float(event["lon"])
        zones = self.fences.apply(event)["zones"]
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
