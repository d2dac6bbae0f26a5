"""GeoWorker end to end against a moto server: real worker code in threads, real Kinesis/S3/DynamoDB calls."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from geo_testkit import Resources, create_stream_with_manifest, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.status import WorkerExited, WorkerStatus
from geo_service.worker import GeoWorker
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec

PARIS = (48.8566, 2.3522)
LYON = (45.7640, 4.8357)
NEW_YORK = (40.7128, -74.0060)
TOKYO = (35.6762, 139.6503)
FRANCE_Z5 = quadkey(tile(PARIS[1], PARIS[0], 5))  # a zoom-5 tile holding Paris and Lyon
FAST_CAL = Calibration(seconds_per_unit=0.004)


def _event(i: int, lat: float, lon: float) -> dict[str, Any]:
    return {"event_id": f"e{i:05d}", "entity_id": f"car-{i % 7}", "ts": 1_763_700_000_000 + i, "lat": lat,
            "lon": lon, "speed": 12.5}


def _put(clients: Clients, spec: Spec, event: dict[str, Any], worker_id: str | None = None) -> None:
    """Route like the router: ExplicitHashKey of the owning partition's worker (or an explicit worker)."""
    if worker_id is None:
        worker_id = SpecIndex(spec).locate_one(event["lon"], event["lat"], event["entity_id"]).worker
    clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(event).encode(),
                               PartitionKey=event["entity_id"], ExplicitHashKey=spec.worker(worker_id).hash_key)


def _read_jsonl(clients: Clients, bucket: str, prefix: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for obj in clients.s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
        body = clients.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read().decode()
        rows.extend(json.loads(line) for line in body.splitlines() if line)
    return rows


def _worker(clients: Clients, res: Resources, version: int, calibration: Calibration | None = FAST_CAL,
            **overrides: Any) -> GeoWorker:
    return GeoWorker(res.config(version, **overrides), clients, calibration=calibration)


def test_worker_enriches_reports_costs_and_drains_after_the_flip(clients: Clients, resources: Resources) -> None:
    # GIVEN spec v1: w0001 owns France (zoom-5 tile), w0002 the catch-all; its stream; v1 active
    spec = make_spec(1, [[FRANCE_Z5], [""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    workers = [GeoWorker(resources.config(1, cost_report_interval_s=0.3), clients) for _ in range(2)]
    for w in workers:
        w.start()
    statuses = [w.wait_ready(timeout=60) for w in workers]
    assert sorted(s.worker_id or "" for s in statuses) == ["w0001", "w0002"]
    by_slot = {s.worker_id: w for s, w in zip(statuses, workers, strict=True)}

    # WHEN events are routed to their workers, plus a stray (Paris sent to w0002) and an undecodable record
    events = [_event(i, *pt) for i, pt in enumerate([PARIS, LYON, NEW_YORK, TOKYO] * 5)]
    for ev in events:
        _put(clients, spec, ev)
    stray = _event(900, *PARIS)
    _put(clients, spec, stray, worker_id="w0002")
    clients.kinesis.put_record(StreamName=spec.stream_name, Data=b"{not json", PartitionKey="x",
                               ExplicitHashKey=spec.worker("w0001").hash_key)
    by_slot["w0001"].run_until(lambda s: s.events_out == 10 and s.quarantined == 1, 30)
    by_slot["w0002"].run_until(lambda s: s.events_out == 11, 30)

    # THEN every event is in the output once, enriched with the nearest place and the routing ids
    out = enriched_rows(clients, resources, version=1)
    assert sorted(r["event_id"] for r in out) == sorted(e["event_id"] for e in [*events, stray])
    rows = {r["event_id"]: r for r in out}
    assert rows["e00000"]["country"] == "FR" and rows["e00000"]["partition_id"] == "p0001"
    assert rows["e00000"]["worker_id"] == "w0001" and rows["e00000"]["spec_version"] == 1
    assert rows["e00000"]["speed"] == 12.5 and rows["e00000"]["distance_km"] < 2.0
    assert rows["e00002"]["place"] == "New York City" and rows["e00002"]["partition_id"] == "p0002"
    assert rows["e00003"]["country"] == "JP" and rows["e00003"]["worker_id"] == "w0002"
    # AND the stray is processed by the worker that got it, flagged, with its true partition
    assert rows["e00900"]["worker_id"] == "w0002" and rows["e00900"]["stray"] is True
    assert rows["e00900"]["partition_id"] == "p0001" and rows["e00900"]["country"] == "FR"
    assert by_slot["w0002"].status().strays == 1
    # AND the undecodable record is quarantined with its reason and source
    bad = _read_jsonl(clients, resources.output_bucket, "quarantine/geo/v1/w0001/")
    assert len(bad) == 1 and bad[0]["reason"].startswith("unparsable_json") and bad[0]["raw"] == "{not json"
    assert bad[0]["source"].startswith(f"{spec.stream_name}/shardId-")
    # AND a periodic cost report is written while the worker is serving
    by_slot["w0001"].run_until(lambda s: s.cost_reports >= 1, 10)

    # WHEN the active pointer moves to v2
    set_active(clients, resources, 2)
    finals = [w.run_until(lambda s: s.finished, timeout=30) for w in workers]

    # THEN both drain, exit 0, and their leases say drained and released, with the last checkpoint
    assert [f.state for f in finals] == ["drained", "drained"] and all(f.exit_code == 0 for f in finals)
    reader = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 3.0)
    for slot in ("w0001", "w0002"):
        st = reader.read(slot)
        assert st is not None and st.drained and st.released and st.owner is None and not st.ready
        assert len(st.checkpoint) == 1
    # AND the cost reports (the last one flushed at drain) follow the contract and cover every event
    keys = [o["Key"] for o in clients.s3.list_objects_v2(Bucket=resources.costs_bucket,
                                                         Prefix="costs/v1/w0001/")["Contents"]]
    reports = [json.loads(clients.s3.get_object(Bucket=resources.costs_bucket, Key=k)["Body"].read()) for k in keys]
    assert {"version", "worker", "partition_ids", "interval_s", "calibration", "quadkey_zoom", "rates",
            "events"} <= set(reports[0])
    assert reports[0]["worker"] == "w0001" and reports[0]["partition_ids"] == ["p0001"]
    assert sum(sum(r["events"].values()) for r in reports) == 10
    assert all(len(q) == 12 and q.startswith(FRANCE_Z5) and rate > 0 for r in reports for q, rate in r["rates"].items())


def test_dead_worker_slot_is_taken_over_within_two_leases_and_resumes_from_checkpoint(
        clients: Clients, resources: Resources) -> None:
    # GIVEN a one-worker spec and worker A (2 s lease: a 1 s one left too little room for B's own start on a loaded
    # 2-core machine) that processed 5 events
    lease_s = 2.0
    spec = make_spec(3, [[""]], stream_name=f"{resources.prefix}-geo-v3")
    publish_spec(clients, resources, spec)
    a = _worker(clients, resources, 3, lease_s=lease_s, calibration=FAST_CAL)
    a.wait_ready(timeout=60)
    for i in range(5):
        _put(clients, spec, _event(i, *TOKYO))
    a.run_until(lambda s: s.events_out == 5, timeout=30)

    # WHEN A dies without releasing, more events arrive, and B starts wanting the same slot
    a.abandon()
    died_at = time.monotonic()
    for i in range(5, 9):
        _put(clients, spec, _event(i, *NEW_YORK))
    b = _worker(clients, resources, 3, lease_s=lease_s, calibration=FAST_CAL, worker_id="w0001")
    b.start()
    b.run_until(lambda s: s.leases_claimed == 1, timeout=10)
    taken_after = time.monotonic() - died_at

    # THEN B holds the slot within two lease durations and processes only what A had not checkpointed
    assert taken_after <= 2 * lease_s + 0.5
    b.run_until(lambda s: s.events_out == 4, timeout=30)
    b.stop()
    out = enriched_rows(clients, resources, version=3)
    assert sorted(r["event_id"] for r in out) == [f"e{i:05d}" for i in range(9)]
    assert a.status().state == "abandoned" and b.status().state == "released"


def test_stop_releases_gracefully_and_another_worker_claims_at_once(clients: Clients, resources: Resources) -> None:
    # GIVEN a ready worker on a one-slot version with a 30 s lease
    spec = make_spec(4, [[""]], stream_name=f"{resources.prefix}-geo-v4")
    publish_spec(clients, resources, spec)
    a = _worker(clients, resources, 4, lease_s=30.0, calibration=FAST_CAL)
    a.wait_ready(timeout=60)
    # WHEN it is stopped (SIGTERM in a process)
    final = a.stop()
    # THEN the lease is released (no owner, not ready) and a new worker gets it without waiting for expiry
    assert final.state == "released" and final.exit_code == 0
    st = LeaseManager(clients.dynamodb, resources.leases_table, 4, "r", 30.0).read("w0001")
    assert st is not None and st.released and st.owner is None and not st.ready and not st.drained
    b = _worker(clients, resources, 4, lease_s=30.0, calibration=FAST_CAL)
    assert b.wait_ready(timeout=10).worker_id == "w0001"
    b.stop()


def test_green_worker_waits_for_its_stream_and_does_not_drain_before_its_flip(clients: Clients,
                                                                             resources: Resources) -> None:
    # GIVEN spec v6 published while v5 is active, its stream not created yet
    spec = make_spec(6, [[""]], stream_name=f"{resources.prefix}-geo-v6", previous=5)
    publish_spec(clients, resources, spec, create_stream=False)
    set_active(clients, resources, 5)
    w = _worker(clients, resources, 6, calibration=FAST_CAL)
    w.run_until(lambda s: s.state == "waiting_stream", timeout=30)
    # WHEN the deployer creates the stream and publishes its manifest
    create_stream_with_manifest(clients, resources, str(spec.stream_name), 6, 1)
    status = w.wait_ready(timeout=30)
    time.sleep(1.0)  # several active-pointer polls and quiet periods
    # THEN it became ready and keeps serving (an older active version is not a reason to drain)
    assert status.ready and w.status().state == "ready"
    w.stop()


def test_missing_spec_fails_with_the_key_in_the_error(clients: Clients, resources: Resources) -> None:
    # GIVEN no spec object for version 42
    w = _worker(clients, resources, 42, calibration=FAST_CAL)
    # WHEN the worker runs
    code = w.run()
    # THEN it fails (exit 1) naming the S3 object, and holds no lease
    st = w.status()
    assert code == 1 and st.state == "failed"
    assert f"s3://{resources.specs_bucket}/specs/v00000042.json" in (st.last_error or "")
    assert w.leases is None


def test_worker_of_a_fully_drained_version_exits_retired(clients: Clients, resources: Resources) -> None:
    # GIVEN version 7 whose only slot was drained and released
    spec = make_spec(7, [[""]], stream_name=f"{resources.prefix}-geo-v7")
    publish_spec(clients, resources, spec)
    old = LeaseManager(clients.dynamodb, resources.leases_table, 7, "old", 3.0)
    old.claim("w0001")
    old.mark_drained()
    old.release()
    # WHEN a new worker for v7 starts (e.g. a restarted blue task)
    w = _worker(clients, resources, 7, calibration=FAST_CAL)
    # THEN it finds nothing to do and exits 0
    assert w.run() == 0 and w.status().state == "retired"


def test_run_until_reports_a_finished_worker(clients: Clients, resources: Resources) -> None:
    # GIVEN a worker that will fail (no spec)
    w = _worker(clients, resources, 43, calibration=FAST_CAL)
    # WHEN a caller waits for readiness
    with pytest.raises(WorkerExited, match="'failed'") as info:
        w.wait_ready(timeout=30)
    # THEN the error carries the final status
    assert isinstance(info.value.status, WorkerStatus) and info.value.status.exit_code == 1


def test_spare_worker_takes_a_released_slot(clients: Clients, resources: Resources) -> None:
    # GIVEN a two-slot version and three workers claiming any free slot
    spec = make_spec(8, [[FRANCE_Z5], [""]], stream_name=f"{resources.prefix}-geo-v8")
    publish_spec(clients, resources, spec)
    workers = [_worker(clients, resources, 8) for _ in range(3)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 60
    while sum(w.status().ready for w in workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a few claim retries of the spare
    ready = [w for w in workers if w.status().ready]
    spare = next(w for w in workers if not w.status().ready)
    # WHEN two hold the slots, the third keeps claiming; then one holder stops
    assert sorted(w.status().worker_id or "" for w in ready) == ["w0001", "w0002"]
    assert spare.status().state == "claiming" and spare.status().worker_id is None
    freed = ready[0].status().worker_id
    ready[0].stop()
    # THEN the spare takes exactly the freed slot
    assert spare.wait_ready(timeout=30).worker_id == freed
    for w in (ready[1], spare):
        w.stop()


def test_pinned_slot_missing_from_the_spec_fails_naming_it(clients: Clients, resources: Resources) -> None:
    # GIVEN a spec without worker w0009, and a worker pinned to it
    spec = make_spec(9, [[""]], stream_name=f"{resources.prefix}-geo-v9")
    publish_spec(clients, resources, spec, create_stream=False)
    w = _worker(clients, resources, 9, worker_id="w0009")
    # WHEN it runs / THEN it fails naming the slot and the version
    assert w.run() == 1
    assert "no worker 'w0009'" in (w.status().last_error or "")
