"""The reference stateful transform: geofence ENTER / EXIT / DWELL per entity, and speed and heading.

Per event it adds ``zones`` (the ids of the zones containing the point, nearest first: the zones of
:mod:`transforms.geofence`, same file, same loading, same region scoping), ``transitions``, ``speed_mps``,
``heading_deg`` and ``late``, with the per-entity state and the rules for time of :mod:`transforms.zone_state`
(shared with the polygon geofences, :mod:`transforms.geofence_polygons`): ``ENTER`` / ``EXIT`` per zone, ``DWELL``
once per stay after ``GEOFENCE_DWELL_S`` seconds of event time (default :data:`DEFAULT_DWELL_S`), and an event whose
time (``ts``, or the field ``GEOFENCE_TIME_FIELD`` names) is not after the entity's previous one leaves the state unchanged, with no transitions and ``late`` True.

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

from geo_service.pipeline.geofence_events import EVENT_BUS_ENV
from transforms.geofence import ZONES_ENV, Geofences
from transforms.zone_state import DEFAULT_DWELL_S, DWELL_ENV, TIME_ENV, ZoneStates, bearing_deg, event_ms

__all__ = ["DEFAULT_DWELL_S", "DWELL_ENV", "TIME_ENV", "ZONES_ENV", "GeofenceState", "bearing_deg", "event_ms"]


class GeofenceState(ZoneStates[Geofences]):
    """Geofence transitions and speed per entity over the circles of :mod:`transforms.geofence`
    (:mod:`transforms.zone_state` states every rule).

    Examples
    --------
    >>> t = GeofenceState(); t.load_region([""], 1)
    >>> first = t.apply_stateful({"entity_id": "a", "ts": 1767225600000, "lat": 51.4706, "lon": -0.4619}, None)
    >>> first.fields["transitions"], first.fields["speed_mps"], first.fields["late"]
    ([{'zone': 'LHR', 'kind': 'ENTER'}], None, False)
    """

    #: Environment variables it reads (and the worker's sink setting, GEOFENCE_EVENT_BUS: the workers push its
    #: transitions when it is set; :mod:`geo_service.pipeline.geofence_events`): the local loop passes them on.
    settings: tuple[str, ...] = (ZONES_ENV, DWELL_ENV, TIME_ENV, EVENT_BUS_ENV)

    def __init__(self) -> None:
        super().__init__(Geofences())
