"""The worker's geofence sink (GEOFENCE_EVENT_BUS): transitions put after the output object, before the checkpoint."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.pipeline.geofence_events import DETAIL_TYPE, SOURCE, details_of
from geo_service.worker import GeoWorker
from geokernel.partition_spec.model import Spec

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

FAST_CAL = Calibration(seconds_per_unit=0.004)
TRANSFORM = "transforms.geofence_state:GeofenceState"


@pytest.fixture()
def zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One 5 km zone around the events' point (48.85, 2.35), for the reference stateful transform."""
    path = tmp_path / "zones.csv"
    path.write_text("id,name,lat,lon,radius_km\nPARIS,Paris,48.85,2.35,5\n")
    monkeypatch.setenv("GEOFENCES_CSV", str(path))


def _bus(clients: Clients, moto_endpoint: str, name: str) -> tuple[Any, str]:
    """A bus whose rule sends our geofence events to a new queue; returns the SQS client and the queue URL."""
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    clients.events.create_event_bus(Name=name)
    clients.events.put_rule(Name="all", EventBusName=name,
                            EventPattern=json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]}))
    clients.events.put_targets(Rule="all", EventBusName=name, Targets=[{"Id": "q", "Arn": arn}])
    return sqs, url


def _put(clients: Clients, spec: Spec, n: int) -> None:
    for i in range(n):
        ev = {"event_id": f"e{i:05d}", "entity_id": f"car-{i % 5}", "ts": 1_763_700_000_000 + i, "lat": 48.85,
              "lon": 2.35}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(), PartitionKey="k",
                                   ExplicitHashKey=spec.workers[0].hash_key)


def _order(clients: Clients) -> list[str]:
    """The worker's writes in the order they are sent: output objects, PutEvents, checkpoints."""
    seen: list[str] = []
    clients.s3.meta.events.register("provide-client-params.s3.PutObject",
                                    lambda params, **_: seen.append("output") if params["Key"].startswith("enriched/")
                                    else None)
    clients.events.meta.events.register("provide-client-params.events.PutEvents", lambda **_: seen.append("put"))
    clients.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem",
        lambda params, **_: seen.append("checkpoint") if "checkpoint." in params.get("UpdateExpression", "") else None)
    return seen


def test_every_transition_is_put_after_its_output_and_before_its_checkpoint(
        zone: None, clients: Clients, resources: Resources, moto_endpoint: str) -> None:
    # GIVEN a worker running the reference geofence transform with a bus set, and 20 events of 5 entities in a zone
    sqs, url = _bus(clients, moto_endpoint, f"{resources.prefix}-fences")
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    order = _order(clients)
    w = GeoWorker(resources.config(1, transform=TRANSFORM, geofence_event_bus=f"{resources.prefix}-fences"), clients,
                  calibration=FAST_CAL)
    w.wait_ready(timeout=60)
    _put(clients, spec, 20)
    # WHEN it has written them
    w.run_until(lambda s: s.events_out == 20, timeout=30)
    w.stop()
    # THEN the queue behind the bus received exactly the output's transitions (each entity's ENTER)
    received = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages"):
        received += [json.loads(m["Body"])["detail"] for m in batch]
    rows = enriched_rows(clients, resources)
    assert sorted(d["IdempotencyKey"] for d in received) == sorted(d["IdempotencyKey"] for r in rows
                                                                   for d in details_of(r))
    assert sorted(d["DeviceId"] for d in received) == [f"car-{i}" for i in range(5)]
    # AND each put came after an output object and before the next checkpoint
    assert "put" in order and order.index("output") < order.index("put") < order.index("checkpoint")


class RefusingEvents:
    """An EventBridge client that refuses every entry (as an IAM policy without events:PutEvents would)."""

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {"FailedEntryCount": len(Entries),
                "Entries": [{"ErrorCode": "AccessDeniedException", "ErrorMessage": "no"} for _ in Entries]}


def test_transitions_that_cannot_be_put_leave_the_checkpoint_where_it_was(
        zone: None, clients: Clients, resources: Resources) -> None:
    # GIVEN a worker whose bus refuses its events
    spec = make_spec(1, [[""]], stream_name=f"{resources.prefix}-geo-v1")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 1)
    refused = dataclasses.replace(clients, events=RefusingEvents())
    w = GeoWorker(resources.config(1, transform=TRANSFORM, geofence_event_bus="fences"), refused,
                  calibration=FAST_CAL)
    w.wait_ready(timeout=60)
    _put(clients, spec, 5)
    # WHEN it tries to flush them
    st = w.run_until(lambda s: s.finished, timeout=30)
    # THEN it fails naming the refusal, and its checkpoint did not move past events whose transitions were not put
    lease = LeaseManager(clients.dynamodb, resources.leases_table, 1, "reader", 3.0).read("w0001")
    assert st.state == "failed" and "AccessDeniedException" in (st.last_error or "")
    assert lease is not None and lease.checkpoint == {}
