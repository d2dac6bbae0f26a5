"""State handoff end to end on moto: the real router code stamps and marks, two real workers hand the state over."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.pipeline.cost import Calibration
from geo_service.pipeline.transform import Applied, JsonValue
from geo_service.worker import GeoWorker
from geokernel.contracts.slot import SlotId
from geokernel.events import ValidEvent, parse_event
from lambdas.router.ledger import RouterLedger, Target
from lambdas.router.stateful import Routed, route_stamped
from lambdas.runtime.kinesis import GeoStreams

FAST_CAL = Calibration(seconds_per_unit=0.004)
WEST, EAST = (10.0, -10.0), (10.0, 10.0)  # (lat, lon) in quadkey "0" (w0001) and "1" (w0002)


class Count:
    """Counts each entity's events (its state) and says which event it saw last."""

    stateful = True

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None: ...

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return self.apply_stateful(event, None).fields

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        n = (state["n"] if isinstance(state, dict) else 0) + 1
        return Applied({"count": n}, {"n": n})


def event(i: int, where: tuple[float, float]) -> ValidEvent:
    raw = json.dumps({"event_id": f"e{i}", "entity_id": "car-1", "ts": 1_763_700_000_000 + i, "lat": where[0],
                      "lon": where[1]}).encode()
    ev = parse_event(raw)
    assert isinstance(ev, ValidEvent)
    return ev


def test_an_entity_crossing_a_border_keeps_counting_on_the_next_worker(clients: Clients,
                                                                       resources: Resources) -> None:
    # GIVEN two workers of one version (w0001 west, w0002 east) serving a stateful counting transform
    spec = make_spec(1, [["0"], [""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    workers = [GeoWorker(resources.config(1, output_flush_s=0.2), clients, calibration=FAST_CAL,
                         transform_factory=Count).start() for _ in range(2)]
    for w in workers:
        w.wait_ready(timeout=60)
    targets = {w.id: Target(spec.stream_name or "", w.hash_key, str(SlotId(1, w.id))) for w in spec.workers}
    ledger, streams = RouterLedger(), GeoStreams(clients.kinesis)
    # WHEN the router routes 3 events in the west, then 2 in the east, then 1 back west (two border crossings)
    route = [(WEST, "w0001"), (WEST, "w0001"), (WEST, "w0001"), (EAST, "w0002"), (EAST, "w0002"), (WEST, "w0001")]
    for i, (where, worker) in enumerate(route, start=1):
        failed, routed, _ = route_stamped([Routed(str(i), (i, 0), event(i, where), targets[worker])], streams,
                                          ledger)
        assert (failed, routed) == ([], 1)
    # THEN every event comes out once, counted on the state the one before left, by the worker owning its place
    deadline = time.monotonic() + 30
    while len(rows := enriched_rows(clients, resources)) < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    rows.sort(key=lambda r: r["event_id"])
    assert [(r["event_id"], r["count"], r["worker_id"]) for r in rows] == [
        ("e1", 1, "w0001"), ("e2", 2, "w0001"), ("e3", 3, "w0001"), ("e4", 4, "w0002"), ("e5", 5, "w0002"),
        ("e6", 6, "w0001")]
    for w in workers:
        w.stop()
