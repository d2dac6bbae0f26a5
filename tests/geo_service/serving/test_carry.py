"""Carry-over between spec versions in one worker process (real worker code in threads, moto server)."""

from __future__ import annotations

import json
import time
from typing import Any

from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active, set_plan

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.worker import GeoWorker
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.model import Spec

PARIS = (48.8566, 2.3522)
MADRID = (40.4168, -3.7038)
TOKYO = (35.6762, 139.6503)
FRANCE_Z5 = quadkey(tile(PARIS[1], PARIS[0], 5))
SPAIN_Z5 = quadkey(tile(MADRID[1], MADRID[0], 5))
FAST_CAL = Calibration(seconds_per_unit=0.004)


def _put(clients: Clients, spec: Spec, worker_id: str, i: int, point: tuple[float, float], entity: str) -> str:
    ev = {"event_id": f"e{spec.version}-{i:04d}", "entity_id": entity, "ts": 1_763_700_000_000 + i,
          "lat": point[0], "lon": point[1]}
    clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(), PartitionKey=entity,
                               ExplicitHashKey=spec.worker(worker_id).hash_key)
    return str(ev["event_id"])


def _lease(clients: Clients, res: Resources, version: int, worker_id: str) -> Any:
    return LeaseManager(clients.dynamodb, res.leases_table, version, "reader", 3.0).read(worker_id)


def _worker(clients: Clients, res: Resources, **overrides: Any) -> GeoWorker:
    cfg = res.config(overrides.pop("spec_version", 1), swap_mode="carry", **overrides)
    return GeoWorker(cfg, clients, calibration=FAST_CAL)


def _two_versions(clients: Clients, res: Resources) -> tuple[Spec, Spec]:
    """v1: w0001 France, w0002 the rest; v2: w0001 France and Spain, w0002 the rest. v1 active."""
    v1 = make_spec(1, [[FRANCE_Z5], [""]], stream_name=f"{res.prefix}-geo-v1")
    v2 = make_spec(2, [[FRANCE_Z5, SPAIN_Z5], [""]], stream_name=f"{res.prefix}-geo-v2", previous=1)
    publish_spec(clients, res, v1)
    publish_spec(clients, res, v2)
    set_active(clients, res, 1)
    return v1, v2


def _one_slot_carrier(clients: Clients, res: Resources, lease_s: float) -> tuple[Spec, Spec, GeoWorker]:
    """v1 and v2 of one slot (the whole map), v1 active and served by a ready carry-mode worker with ``lease_s``."""
    v1 = make_spec(1, [[""]], stream_name=f"{res.prefix}-geo-v1")
    v2 = make_spec(2, [[""]], stream_name=f"{res.prefix}-geo-v2", previous=1)
    for s in (v1, v2):
        publish_spec(clients, res, s)
    set_active(clients, res, 1)
    a = _worker(clients, res, lease_s=lease_s)
    a.wait_ready(timeout=60)
    return v1, v2, a


def test_a_kept_slot_carries_over_in_its_process_and_every_old_record_goes_first(clients: Clients,
                                                                                 resources: Resources) -> None:
    # GIVEN v1 active, served by two carry-mode workers, with events on its stream
    v1, v2 = _two_versions(clients, resources)
    a, b = (_worker(clients, resources, worker_id=w) for w in ("w0001", "w0002"))
    for w in (a, b):
        w.wait_ready(timeout=60)
    sent = [_put(clients, v1, "w0001", i, PARIS, f"car-{i % 3}") for i in range(6)]
    a.run_until(lambda s: s.events_out == 6, timeout=30)
    # WHEN the deploy plan keeps both slots in v2
    set_plan(clients, resources, 1, 2)
    # THEN each worker claims its v2 slot itself and makes it ready while it keeps serving v1
    for w, wid in ((a, "w0001"), (b, "w0002")):
        w.run_until(lambda s: s.next_version == 2, timeout=30)
        deadline = time.monotonic() + 30
        while not ((st := _lease(clients, resources, 2, wid)) and st.ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert st is not None and st.ready and st.owner == w.owner
        assert w.status().version == 1 and w.status().state == "ready"
    loaded_v1 = a.status().places_loaded
    sent += [_put(clients, v1, "w0001", i, PARIS, f"car-{i % 3}") for i in range(6, 12)]
    # WHEN the active pointer flips to v2 and events keep coming on both streams (a stale router writes to v1)
    set_active(clients, resources, 2)
    sent += [_put(clients, v1, "w0001", i, PARIS, f"car-{i % 3}") for i in range(12, 14)]
    sent += [_put(clients, v2, "w0001", i, MADRID, f"car-{i % 3}") for i in range(14, 20)]
    # THEN the same process drains v1#w0001 and serves v2#w0001, having loaded only what the slot gained (Spain)
    st = a.run_until(lambda s: s.version == 2 and s.carried == 1 and s.events_out == 20, timeout=60)
    assert st.owner == a.owner and st.places_gained > 0 and st.places_loaded == loaded_v1 + st.places_gained
    assert _lease(clients, resources, 1, "w0001").drained and _lease(clients, resources, 2, "w0001").owner == a.owner
    # AND every event came out once, each entity's v1 records processed before its v2 records
    rows = enriched_rows(clients, resources)
    assert sorted(r["event_id"] for r in rows) == sorted(sent)
    last_v1 = max(r["processed_at"] for r in rows if r["spec_version"] == 1)
    assert min(r["processed_at"] for r in rows if r["spec_version"] == 2) > last_v1
    assert {r["owner"] for r in rows} == {a.owner}
    for w in (a, b):
        w.stop()


def test_a_rolled_back_plan_releases_the_prepared_slot(clients: Clients, resources: Resources) -> None:
    # GIVEN a worker preparing its kept slot of v2
    _two_versions(clients, resources)
    a = _worker(clients, resources, worker_id="w0001")
    a.wait_ready(timeout=60)
    set_plan(clients, resources, 1, 2)
    a.run_until(lambda s: s.next_version == 2, timeout=30)
    deadline = time.monotonic() + 30
    while not ((st := _lease(clients, resources, 2, "w0001")) and st.ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    # WHEN the controller rolls v2 back
    set_plan(clients, resources, 1, 2, status="rolled_back")
    a.run_until(lambda s: s.next_version is None, timeout=30)
    # THEN the v2 lease is released and the worker keeps serving v1
    st = _lease(clients, resources, 2, "w0001")
    assert st is not None and st.owner is None and st.released and not st.ready
    assert (a.status().version, a.status().state) == (1, "ready")
    a.stop()


def test_a_new_worker_leaves_a_kept_slot_to_its_carrier_but_takes_it_over_when_the_carrier_dies(
        clients: Clients, resources: Resources) -> None:
    # GIVEN v1 (one slot) served by carrier A with a 2 s lease (1 s let a starved heartbeat lapse on a loaded
    # machine), and a started plan keeping the slot in v2
    lease_s = 2.0
    _v1, _v2, a = _one_slot_carrier(clients, resources, lease_s)
    set_plan(clients, resources, 1, 2)
    # WHEN a generic worker B (no slot, no version) starts
    b = GeoWorker(resources.config(None, swap_mode="carry", lease_s=lease_s), clients, calibration=FAST_CAL).start()
    # THEN B does not take the kept v2 slot: A claims it
    a.run_until(lambda s: s.next_version == 2, timeout=30)
    deadline = time.monotonic() + 30
    while not ((st := _lease(clients, resources, 2, "w0001")) and st.owner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert st.owner == a.owner
    time.sleep(3 * lease_s)  # several claim rounds of B
    assert (b.status().state, b.status().leases_claimed) == ("claiming", 0)
    # WHEN A dies without releasing anything
    a.abandon()
    died = time.monotonic()
    # THEN B takes over v1#w0001 within three lease durations (the lease runs out, B's next pass wakes just after it:
    # about two; the third is room for a loaded 2-core gate, where 2 s + 0.5 s was missed by 0.07 s) and carries
    # the slot to v2 itself
    b.run_until(lambda s: s.version == 1 and s.worker_id == "w0001", timeout=10)
    assert time.monotonic() - died <= 3 * lease_s
    b.run_until(lambda s: s.next_version == 2, timeout=30)
    deadline = time.monotonic() + 30
    while not ((st := _lease(clients, resources, 2, "w0001")) and st.owner == b.owner and st.ready) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert st.owner == b.owner and st.ready
    b.stop()


def test_a_worker_that_takes_over_a_dead_carriers_old_slot_after_the_flip_opens_the_kept_slot_while_it_drains(
        clients: Clients, resources: Resources) -> None:
    # GIVEN carrier A (3 s lease: the kept slot may open for two of them after the drain, on a loaded machine too)
    # serving v1#w0001 with v2#w0001 prepared, events on v1
    lease_s = 3.0
    v1, v2, a = _one_slot_carrier(clients, resources, lease_s)
    sent = [_put(clients, v1, "w0001", i, PARIS, f"car-{i % 3}") for i in range(6)]
    a.run_until(lambda s: s.events_out == 6, timeout=30)
    set_plan(clients, resources, 1, 2)
    deadline = time.monotonic() + 30
    while not ((st := _lease(clients, resources, 2, "w0001")) and st.ready) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert st is not None and st.ready and st.owner == a.owner
    # WHEN A dies holding both leases, the active pointer flips to v2 (every v2 slot was ready) and events keep
    # coming on both streams, and a generic worker B starts
    a.abandon()
    set_active(clients, resources, 2)
    sent += [_put(clients, v1, "w0001", i, PARIS, f"car-{i % 3}") for i in range(6, 10)]
    sent += [_put(clients, v2, "w0001", i, MADRID, f"car-{i % 3}") for i in range(10, 16)]
    b = GeoWorker(resources.config(None, swap_mode="carry", lease_s=lease_s, drain_quiet_s=1.5), clients,
                  calibration=FAST_CAL).start()
    # THEN B takes v1#w0001 over and claims v2#w0001 while it drains v1 (not after: the active version's slot
    # would have no reader for a whole drain), then serves v2 alone
    b.run_until(lambda s: s.version == 2 and s.carried == 1, timeout=60)
    old, new = _lease(clients, resources, 1, "w0001"), _lease(clients, resources, 2, "w0001")
    assert old.drained and new.owner == b.owner
    assert new.claimed_at is not None and old.drained_at is not None and new.claimed_at < old.drained_at
    # AND every event came out, each entity's v1 records before its v2 records
    deadline = time.monotonic() + 30
    while {r["event_id"] for r in enriched_rows(clients, resources)} != set(sent) and time.monotonic() < deadline:
        time.sleep(0.1)
    rows = enriched_rows(clients, resources)
    assert {r["event_id"] for r in rows} == set(sent)
    for entity in {r["entity_id"] for r in rows}:
        mine = [r for r in rows if r["entity_id"] == entity]
        last_v1 = max(r["processed_at"] for r in mine if r["spec_version"] == 1)
        assert min(r["processed_at"] for r in mine if r["spec_version"] == 2) > last_v1
    b.stop()
