"""Which slot a worker claims next (geo_service.serving.slots.SlotFinder), against a moto server."""

from __future__ import annotations

import json
import time

from geo_testkit import Resources, make_spec, publish_spec

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.consumer import KinesisRecord
from geo_service.serving.slots import SlotFinder, SpecCache, old_places
from geo_service.swap.control import ControlView
from geo_service.swap.handover import Place
from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.plan import SwapHead


def finder(clients: Clients, res: Resources, owner: str = "me", **overrides: object) -> SlotFinder:
    cfg = res.config(overrides.pop("spec_version", None), swap_mode=overrides.pop("swap_mode", "carry"),
                     **overrides)
    return SlotFinder(cfg, clients, owner, SpecCache(clients, res.specs_bucket))


def _quadkey(i: int, zoom: int = 6) -> str:
    """A distinct zoom-6 quadkey per index (base-4 digits)."""
    return "".join(str((i >> (2 * k)) & 3) for k in reversed(range(zoom)))


def plan(from_version: int | None, to_version: int, status: str = "started") -> SwapHead:
    return SwapHead(from_version, to_version, "carry", status)


def publish(clients: Clients, res: Resources, version: int, slots: int) -> None:
    regions = [[_quadkey(i)] for i in range(slots - 1)] + [[""]]
    publish_spec(clients, res, make_spec(version, regions, stream_name=f"{res.prefix}-geo-v{version}"),
                 create_stream=False)


def test_a_started_swaps_new_slots_come_first_then_active_orphans_and_kept_slots_wait_for_their_carrier(
        clients: Clients, resources: Resources) -> None:
    # GIVEN v1 active with w0001 held live and w0002 free, and a carry swap to v2 keeping both and adding w0003
    publish(clients, resources, 1, 2)
    publish(clients, resources, 2, 3)
    LeaseManager(clients.dynamodb, resources.leases_table, 1, "carrier", 60.0).claim("w0001")
    ctl = ControlView(active=1, plan=plan(1, 2))
    # WHEN three generic workers look for work one after the other
    got = [finder(clients, resources, owner=f"fresh-{i}").search(ctl).claimed for i in range(3)]
    # THEN the first takes v2's new slot w0003, the second v1's free slot, the third nothing: v2#w0001 and v2#w0002
    # are left to the holders of v1#w0001 (alive) and v1#w0002 (the second worker: it carries the slot itself)
    keys = [m.lease.key if m and m.lease else None for m in got]
    assert keys == ["v2#w0003", "v1#w0002", None]
    # WHEN v1#w0001 is drained (its carrier moved on after the flip and then died)
    lm = LeaseManager(clients.dynamodb, resources.leases_table, 1, "carrier", 60.0)
    lm.claim("w0001")
    lm.mark_drained()
    lm.release()
    # THEN its kept v2 slot may be taken by anyone free
    m = finder(clients, resources, owner="fresh-3").search(ctl).claimed
    assert m is not None and m.lease is not None and m.lease.key == "v2#w0001"


def test_a_pinned_slot_only_looks_where_it_exists_and_a_rolled_back_version_is_left_alone(
        clients: Clients, resources: Resources) -> None:
    # GIVEN v1 (one slot) active, v2 (two slots) rolled back, and a worker pinned to w0002 started for v2
    publish(clients, resources, 1, 1)
    publish(clients, resources, 2, 2)
    f = finder(clients, resources, worker_id="w0002", spec_version=2)
    # WHEN it searches THEN v1 has no w0002 and v2 was dropped: nothing to claim, nothing open for it
    search = f.search(ControlView(active=1, plan=plan(1, 2, status="rolled_back")))
    assert search.claimed is None and search.open_slots == 0
    # WHEN the plan is live instead THEN it claims v2#w0002
    search = f.search(ControlView(active=1, plan=plan(1, 2)))
    assert search.claimed is not None and search.claimed.lease is not None and search.claimed.lease.key == "v2#w0002"


def test_whole_mode_claims_only_its_spec_version(clients: Clients, resources: Resources) -> None:
    # GIVEN v1 active and a whole-mode worker for v2 WHEN it searches THEN it takes a v2 slot, never an active v1 one
    publish(clients, resources, 1, 1)
    publish(clients, resources, 2, 1)
    f = finder(clients, resources, spec_version=2, swap_mode="whole")
    m = f.search(ControlView(active=1, plan=None)).claimed
    assert m is not None and m.lease is not None and m.lease.key == "v2#w0001"


def test_after_the_flip_an_old_slot_whose_drainer_died_is_taken_over_first(clients: Clients,
                                                                           resources: Resources) -> None:
    # GIVEN v2 active after a started plan from v1, and v1#w0001 left undrained by a process that died
    publish(clients, resources, 1, 1)
    publish(clients, resources, 2, 1)
    dead = LeaseManager(clients.dynamodb, resources.leases_table, 1, "dead", 0.01)
    dead.claim("w0001")
    time.sleep(0.05)  # the dead owner's 10 ms lease has expired (the condition is expires_at < now)
    ctl = ControlView(active=2, plan=plan(1, 2))
    # WHEN a generic worker looks for work once the dead lease expired
    m = finder(clients, resources, owner="fresh").search(ctl).claimed
    # THEN it takes the old slot (the new version's workers wait for it to drain), not the new one
    assert m is not None and m.lease is not None and m.lease.key == "v1#w0001"


def test_a_lease_not_renewed_between_two_passes_wakes_the_idle_worker_just_after_its_expiry(
        clients: Clients, resources: Resources) -> None:
    # GIVEN v1 active with its one slot held by a process that stopped heartbeating (its lease ends at t0 + 30),
    # and an idle worker whose backoff after two empty passes is 20 s (lease 30 s, heartbeat 10 s)
    publish(clients, resources, 1, 1)
    t0 = time.time()
    now = [t0]
    LeaseManager(clients.dynamodb, resources.leases_table, 1, "dead", 30.0, clock=lambda: now[0]).claim("w0001")
    cfg = resources.config(None, swap_mode="carry", lease_s=30.0)
    f = SlotFinder(cfg, clients, "idle", SpecCache(clients, resources.specs_bucket), clock=lambda: now[0])
    ctl = ControlView(active=1)
    # WHEN it searches once, THEN it backs off as usual (it has seen that expiry only once)
    assert f.search(ctl).claimed is None and f.next_pass_s() == 20.0
    # WHEN it searches again 20 s later and the expiry has not moved
    now[0] = t0 + 20
    assert f.search(ctl).claimed is None
    # THEN it wakes just after that expiry (10.2 s), not after the capped backoff (30 s)
    assert abs(f.next_pass_s() - 10.2) < 1e-3
    # AND then it claims the dead holder's slot
    now[0] = t0 + 30.2
    m = f.search(ctl).claimed
    assert m is not None and m.lease is not None and m.lease.key == "v1#w0001"


def test_a_renewed_lease_does_not_shorten_the_idle_workers_backoff(clients: Clients, resources: Resources) -> None:
    # GIVEN v1's one slot held by a live process that heartbeats between the idle worker's passes
    publish(clients, resources, 1, 1)
    t0 = time.time()
    now = [t0]
    live = LeaseManager(clients.dynamodb, resources.leases_table, 1, "live", 30.0, clock=lambda: now[0])
    live.claim("w0001")
    cfg = resources.config(None, swap_mode="carry", lease_s=30.0)
    f = SlotFinder(cfg, clients, "idle", SpecCache(clients, resources.specs_bucket), clock=lambda: now[0])
    # WHEN the idle worker searches, the holder heartbeats, and the idle worker searches again
    f.search(ControlView(active=1))
    now[0] = t0 + 10
    live.heartbeat()
    f.search(ControlView(active=1))
    # THEN its wait is the plain backoff (heartbeat 10 s doubled twice, capped at the 30 s lease)
    assert f.next_pass_s() == 30.0


def test_a_new_worker_reads_about_one_page_of_leases_however_large_the_fleet(clients: Clients,
                                                                           resources: Resources) -> None:
    # GIVEN v1 active with 400 slots, all held, and a started swap to v2 with 500 slots (the 100 new ones free)
    publish(clients, resources, 1, 400)
    publish(clients, resources, 2, 500)
    held = [{"PutRequest": {"Item": {"lease_key": {"S": f"v{version}#w{i:04d}"}, "owner": {"S": "holder"},
                                     "expires_at": {"N": str(time.time() + 600)}}}}
            for version in (1, 2) for i in range(1, 401)]
    for i in range(0, len(held), 25):
        clients.dynamodb.batch_write_item(RequestItems={resources.leases_table: held[i:i + 25]})
    calls: list[str] = []
    clients.dynamodb.meta.events.register("before-call.dynamodb.BatchGetItem", lambda **kw: calls.append("b"))
    ctl = ControlView(active=1, plan=plan(1, 2))
    # WHEN five fresh workers look for work
    got = [finder(clients, resources, owner=f"fresh-{i}").search(ctl).claimed for i in range(5)]
    # THEN each claims a new v2 slot, having read one page of leases (plus its kept slots' old leases) each,
    # not the 900 leases of both versions
    assert all(m is not None and m.lease is not None and m.lease.version == 2
               and int(m.lease.worker_id[1:]) > 400 for m in got)
    assert len(calls) <= 5 * 2


def test_the_handover_gate_places_events_under_a_producers_own_names() -> None:
    # GIVEN an old spec with one worker, and two records: one under the mapped keys, one under the canonical ones
    spec = make_spec(1, [[""]], stream_name="s-geo-v1")
    fields = EventFields(entity_id="vehicle", lat="latitude", lon="longitude")
    mapped = {"event_id": "e1", "vehicle": "car-1", "ts": 1795255500000, "latitude": 48.85, "longitude": 2.35}
    canonical = {"event_id": "e2", "entity_id": "car-2", "ts": 1795255500000, "lat": 48.85, "lon": 2.35}
    records = tuple(KinesisRecord("shardId-0", str(i), "k", json.dumps(d).encode())
                    for i, d in enumerate((mapped, canonical)))
    # WHEN classified with the mapping
    places = old_places(spec, fields)(records)
    # THEN the mapped one has its entity and owner, and the other is no valid event (no place)
    assert places == [Place("car-1", spec.workers[0].id), Place("", None)]
