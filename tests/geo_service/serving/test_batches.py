"""Buffered output (geo_service.serving.batches): one object and one checkpoint per flush, at-least-once across a crash."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.buffer import OutputBuffer
from geo_service.pipeline.cost import Calibration
from geo_service.worker import GeoWorker
from geokernel.contracts.enriched import ENRICHED_PREFIX, decode_lines, parse_enriched_key
from geokernel.partition_spec.model import Spec

FAST_CAL = Calibration(seconds_per_unit=0.004)
T0 = 1_763_700_000_000  # 2025-11-21T04:40:00Z


def _put(clients: Clients, spec: Spec, start: int, n: int, ts: Callable[[int], Any] = lambda i: T0 + i) -> list[str]:
    ids = []
    for i in range(start, start + n):
        ev = {"event_id": f"e{i:05d}", "entity_id": f"car-{i % 5}", "ts": ts(i), "lat": 48.85, "lon": 2.35}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(), PartitionKey="k",
                                   ExplicitHashKey=spec.workers[0].hash_key)
        ids.append(ev["event_id"])
    return ids


def _count(clients: Clients, service: str, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    client = getattr(clients, service)
    client.meta.events.register(f"provide-client-params.{service}.{operation}",
                                lambda params, **_kw: calls.append(dict(params)))
    return calls


def test_the_buffer_is_due_by_age_or_by_size() -> None:
    # GIVEN an empty buffer, then one holding 10 bytes since t=100
    buf = OutputBuffer()
    assert not buf.due(1e9, 10.0, 1) and buf.due_in(0.0, 10.0) == float("inf")
    buf.since, buf.bytes = 100.0, 10
    # THEN it is due 10 s later, or at once when 10 bytes is the size limit
    assert not buf.due(109.0, 10.0, 1000) and buf.due(110.0, 10.0, 1000) and buf.due(100.0, 10.0, 10)
    assert buf.due_in(104.0, 10.0) == 6.0


def test_the_buffer_keeps_each_line_under_its_events_hour() -> None:
    # GIVEN an empty buffer WHEN lines of 04:40, 03:59 and 04:41 UTC are added
    buf = OutputBuffer()
    for line, ms in (("a", T0), ("b", T0 - 2_460_000), ("c", T0 + 60_000)):
        buf.add(line, ms)
    # THEN they are kept by hour (their start, epoch ms), counted, sized, and listed hour by hour
    assert buf.hours == {T0 - 2_400_000: ["a", "c"], T0 - 6_000_000: ["b"]}
    assert (buf.rows, buf.bytes, buf.lines) == (3, 6, ["b", "a", "c"])


def test_batches_within_a_flush_period_become_one_object_and_one_checkpoint(clients: Clients,
                                                                            resources: Resources) -> None:
    # GIVEN a worker that flushes every 5 s (the bursts below take ~1 s; 2 s was too short on a loaded machine),
    # reading its shard every 0.05 s
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    puts = _count(clients, "s3", "PutObject")
    checkpoints = _count(clients, "dynamodb", "UpdateItem")
    w = GeoWorker(resources.config(1, output_flush_s=5.0), clients, calibration=FAST_CAL)
    w.wait_ready(timeout=60)
    # WHEN events arrive in several bursts within the period
    sent: list[str] = []
    for burst in range(4):
        sent += _put(clients, spec, burst * 10, 10)
        time.sleep(0.2)
    w.run_until(lambda s: s.events_out == 40, timeout=30)
    # THEN they were read in several batches but written as one object, with one checkpoint write
    outputs = [p for p in puts if p["Key"].startswith("enriched/")]
    assert w.status().batches >= 2 and len(outputs) == 1
    assert sum(1 for c in checkpoints if "checkpoint." in c.get("UpdateExpression", "")) == 1
    assert sorted(r["event_id"] for r in enriched_rows(clients, resources)) == sorted(sent)
    w.stop()


def test_a_flush_writes_one_gzipd_object_per_event_hour_and_a_late_event_lands_in_its_own_hour(
        clients: Clients, resources: Resources) -> None:
    # GIVEN a worker with a long flush period and 6 events: 4 of 04:xx UTC, then 2 late ones of the hour before,
    # one stamped in epoch ms and one in ISO-8601 text
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    puts = _count(clients, "s3", "PutObject")
    w = GeoWorker(resources.config(1, output_flush_s=600.0), clients, calibration=FAST_CAL)
    w.wait_ready(timeout=60)
    sent = _put(clients, spec, 0, 4) + _put(clients, spec, 4, 1, lambda i: T0 - 3_600_000)
    sent += _put(clients, spec, 5, 1, lambda i: "2025-11-21T03:59:59.999")
    w.run_until(lambda s: s.records_read == 6, timeout=30)
    # WHEN it flushes (asked to stop)
    w.stop()
    # THEN the flush wrote two objects, one per event hour, gzip'd, each in its hour's folder (seq 0 and 1)
    keys = sorted(p["Key"] for p in puts if p["Key"].startswith(ENRICHED_PREFIX))
    assert [k.rsplit("/", 1)[0] for k in keys] == ["enriched/dt=2025-11-21/hour=03", "enriched/dt=2025-11-21/hour=04"]
    parsed = [parse_enriched_key(k) for k in keys]
    assert {p.seq for p in parsed} == {0, 1} and len({p.written_ms for p in parsed}) == 1
    bodies = {k: clients.s3.get_object(Bucket=resources.output_bucket, Key=k)["Body"].read() for k in keys}
    ids = {k: sorted(json.loads(line)["event_id"] for line in decode_lines(b, k)) for k, b in bodies.items()}
    assert list(ids.values()) == [["e00004", "e00005"], ["e00000", "e00001", "e00002", "e00003"]]
    assert sorted(r["event_id"] for r in enriched_rows(clients, resources)) == sorted(sent)


def test_a_worker_that_dies_before_its_flush_leaves_the_checkpoint_so_its_successor_writes_everything(
        clients: Clients, resources: Resources) -> None:
    # GIVEN a worker with a long flush period that processed 20 events but has not written them
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    a = GeoWorker(resources.config(1, output_flush_s=600.0, lease_s=1.0), clients, calibration=FAST_CAL)
    a.wait_ready(timeout=60)
    sent = _put(clients, spec, 0, 20)
    a.run_until(lambda s: s.records_read == 20, timeout=30)
    # WHEN it dies without flushing or releasing anything
    a.abandon()
    lease = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 1.0).read("w0001")
    # THEN nothing was written and the checkpoint did not move
    assert enriched_rows(clients, resources) == [] and lease is not None and lease.checkpoint == {}
    # WHEN a successor takes the slot over
    b = GeoWorker(resources.config(1, output_flush_s=0.1, lease_s=1.0), clients, calibration=FAST_CAL)
    b.run_until(lambda s: s.events_out == 20, timeout=30)
    # THEN every event is written, by the successor (at-least-once: nothing was lost)
    rows = enriched_rows(clients, resources)
    assert sorted(r["event_id"] for r in rows) == sorted(sent) and {r["owner"] for r in rows} == {b.owner}
    b.stop()


def test_a_stop_request_writes_what_is_buffered_before_the_lease_is_released(clients: Clients,
                                                                             resources: Resources) -> None:
    # GIVEN a worker with a long flush period holding 5 processed events
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    w = GeoWorker(resources.config(1, output_flush_s=600.0), clients, calibration=FAST_CAL)
    w.wait_ready(timeout=60)
    sent = _put(clients, spec, 0, 5)
    w.run_until(lambda s: s.records_read == 5, timeout=30)
    # WHEN it is asked to stop
    st = w.stop()
    # THEN the buffered events are written and the checkpoint reached the last one before the release
    lease = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 1.0).read("w0001")
    assert st.events_out == 5 and sorted(r["event_id"] for r in enriched_rows(clients, resources)) == sorted(sent)
    assert lease is not None and lease.released and list(lease.checkpoint.values())
