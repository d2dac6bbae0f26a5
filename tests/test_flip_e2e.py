"""End-to-end blue/green flip in-process, with the real pieces.

Real: the router Lambda handler, the DeployController, the ECS lifecycle-hook logic
(:func:`lambdas.deploy.hooks.run_hook`), the geo workers (:class:`geo_service.worker.GeoWorker`, in
threads), and Kinesis/S3/DynamoDB behind a single-threaded moto server on 127.0.0.1 (single-threaded so
conditional writes are atomic, as in DynamoDB). The fleet adapter starts/stops GeoWorkers instead of ECS
tasks. Every event sent must come out enriched, exactly once after dedupe by ``event_id``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from geo_service.aws import Clients as WorkerClients
from geo_service.aws import make_clients as make_worker_clients
from geo_service.config import WorkerConfig
from geo_service.cost import Calibration
from geo_service.worker import GeoWorker
from lambdas.common.aws import ControlTable, GeoStreams, LeaseTable, SpecStore, make_clients, spec_key
from lambdas.common.config import LambdaConfig
from lambdas.common.records import read_active
from lambdas.deploy.controller import DONE, WAITING_GREEN, DeployController
from lambdas.deploy.hooks import HookEvent, run_hook
from lambdas.router import handler as router_handler
from partitioner.tiles import Tile, bounds
from tests.lambdas.conftest import FakeLambdaContext, make_spec

PREFIX = "e2e"
ENV = {"GEO_PREFIX": PREFIX, "CONTROL_TABLE": "e2e-control", "LEASES_TABLE": "e2e-leases",
       "SPECS_BUCKET": "e2e-specs", "COSTS_BUCKET": "e2e-costs", "QUARANTINE_BUCKET": "e2e-quarantine",
       "OUTPUT_BUCKET": "e2e-output", "SNAPSHOTS_BUCKET": "e2e-snapshots", "AWS_REGION": "us-east-1",
       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "ROUTER_SPEC_TTL_S": "0.5"}
FAST_CAL = Calibration(seconds_per_unit=0.004)


@pytest.fixture()
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A single-threaded moto server on a free port, with the project's tables and buckets."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded=False, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto-e2e", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for k, v in {**ENV, "AWS_ENDPOINT_URL": url}.items():
        monkeypatch.setenv(k, v)
    c = make_clients(LambdaConfig.from_env())
    for table, key in (("e2e-control", "pk"), ("e2e-leases", "lease_key")):
        c.dynamodb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                                BillingMode="PAY_PER_REQUEST")
    for b in ("e2e-specs", "e2e-costs", "e2e-quarantine", "e2e-output", "e2e-snapshots"):
        c.s3.create_bucket(Bucket=b)
    try:
        yield url
    finally:
        server.shutdown()
        thread.join(timeout=10)


class ThreadFleet:
    """The controller's fleet adapter with real GeoWorkers in threads (one per worker slot, slot pinned)."""

    def __init__(self, clients: WorkerClients) -> None:
        self.clients = clients
        self.workers: dict[int, list[GeoWorker]] = {}

    def start(self, version: int, worker_ids: Sequence[str]) -> None:
        cfg = dict(spec_version=version, control_table="e2e-control", leases_table="e2e-leases",
                   specs_bucket="e2e-specs", costs_bucket="e2e-costs", output_bucket="e2e-output",
                   quarantine_bucket="e2e-quarantine", prefix=PREFIX, lease_s=5.0, drain_quiet_s=1.5,
                   cost_report_interval_s=60.0, poll_interval_s=0.05, active_poll_s=0.1)
        self.workers[version] = [GeoWorker(WorkerConfig(**cfg, worker_id=w), self.clients,  # type: ignore[arg-type]
                                           calibration=FAST_CAL).start() for w in worker_ids]

    def stop(self, version: int) -> None:
        for w in self.workers.get(version, []):
            w.stop(timeout=30)


def until(what: str, fn: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


def kinesis_event(events: list[dict[str, Any]], first_seq: int) -> dict[str, Any]:
    return {"Records": [{"kinesis": {"sequenceNumber": str(first_seq + i), "partitionKey": e["entity_id"],
                                     "data": base64.b64encode(json.dumps(e).encode()).decode()},
                         "eventID": f"shardId-000000000000:{first_seq + i}", "eventSource": "aws:kinesis",
                         "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/e2e-ingest"}
                        for i, e in enumerate(events)]}


def make_events(start: int, n: int) -> list[dict[str, Any]]:
    """Events at cell centres of the specs' regions (x offsets 0..12 at zoom 12) plus some elsewhere."""
    out = []
    for i in range(start, start + n):
        if i % 5 == 4:
            lat, lon = (48.8566, 2.3522) if i % 2 else (-33.86, 151.2)
        else:
            b = bounds(Tile(2000 + 4 * (i % 4), 1300, 12))
            lat, lon = (b.south + b.north) / 2, (b.west + b.east) / 2
        out.append({"event_id": f"ev-{i:05d}", "entity_id": f"veh-{i % 13}", "ts": 1_795_000_000_000 + i,
                    "lat": lat, "lon": lon, "payload": i})
    return out


def route(events: list[dict[str, Any]], seq: int) -> None:
    out = router_handler.handler(kinesis_event(events, seq), FakeLambdaContext("e2e-router"))
    assert out == {"batchItemFailures": []}


def enriched(clients: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        kw = {"Bucket": "e2e-output", "Prefix": "enriched/"} | ({"ContinuationToken": token} if token else {})
        resp = clients.s3.list_objects_v2(**kw)
        for obj in resp.get("Contents", []):
            body = clients.s3.get_object(Bucket="e2e-output", Key=obj["Key"])["Body"].read().decode()
            rows += [json.loads(x) for x in body.splitlines() if x]
        if not resp.get("IsTruncated"):
            return rows
        token = resp["NextContinuationToken"]


def test_flip_end_to_end_every_event_processed_once(endpoint: str) -> None:
    # GIVEN the control plane over moto and a fleet of real GeoWorkers
    cfg = LambdaConfig.from_env()
    c = make_clients(cfg)
    control, specs = ControlTable(c.dynamodb, cfg.control_table), SpecStore(c.s3, cfg.specs_bucket)
    fleet = ThreadFleet(make_worker_clients(endpoint, "us-east-1"))
    ctl = DeployController(control, LeaseTable(c.dynamodb, cfg.leases_table), specs, GeoStreams(c.kinesis), fleet,
                           prefix=PREFIX, green_timeout_s=120, drain_timeout_s=120)
    router_handler.runtime.cache_clear()

    def publish(spec: Any) -> None:
        specs.put_new(spec)
        assert control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                               "published_at": "t"})

    sent: list[dict[str, Any]] = []
    try:
        # AND spec v1 deployed: blue workers leased, warm, and active
        v1 = make_spec(1, prefix=PREFIX)
        publish(v1)
        ctl.request(1)
        until("v1 deployed", lambda: ctl.step().status == DONE)
        assert read_active(control).version == 1  # type: ignore[union-attr]
        batch = make_events(0, 120)
        route(batch, 1000)
        sent += batch

        # WHEN spec v2 is published and deployed (green workers start; blue keeps serving meanwhile)
        v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1, prefix=PREFIX)
        publish(v2)
        ctl.request(2)
        assert ctl.step().status == WAITING_GREEN
        batch = make_events(120, 120)
        route(batch, 2000)
        sent += batch
        # AND the POST_SCALE_UP hook holds the shift until every green partition is leased and warm, then flips
        green = HookEvent("x", "POST_SCALE_UP", "svc", "rev", {})
        first = run_hook(ctl, green, 1)
        assert first["hookStatus"] == "IN_PROGRESS" or ctl.state().status != WAITING_GREEN
        until("green ready and flipped",
              lambda: run_hook(ctl, HookEvent("x", "POST_SCALE_UP", "svc", "rev", first["hookDetails"]), 1)[
                  "hookStatus"] == "SUCCEEDED")
        assert read_active(control).version == 2  # type: ignore[union-attr]
        # AND events keep flowing through the flip (some still routed to v1 within the router's TTL)
        batch = make_events(240, 60)
        route(batch, 3000)
        sent += batch
        time.sleep(0.6)  # > ROUTER_SPEC_TTL_S: the router now routes by v2
        batch = make_events(300, 120)
        route(batch, 4000)
        sent += batch
        assert router_handler.runtime().cache.current().version == 2  # type: ignore[union-attr]
        # AND the drain hook holds until blue has read its stream to the end, then blue is retired
        until("blue drained", lambda: run_hook(ctl, HookEvent("y", "POST_PRODUCTION_TRAFFIC_SHIFT", "svc", "rev",
                                                               {}), 1)["hookStatus"] == "SUCCEEDED", timeout=90)
        assert ctl.state().status == DONE
        assert f"{PREFIX}-geo-v1" not in c.kinesis.list_streams()["StreamNames"]
        assert all(w.status().state == "drained" for w in fleet.workers[1])

        # THEN every event sent comes out enriched exactly once after dedupe by event_id (count in = count out)
        want = {e["event_id"] for e in sent}
        rows = until("all events enriched", lambda: (r := enriched(c)) and {x["event_id"] for x in r} >= want
                     and r, timeout=60)
        by_id: dict[str, dict[str, Any]] = {}
        for r in rows:
            by_id.setdefault(r["event_id"], r)
        assert len(by_id) == len(sent) == 420
        assert set(by_id) == want
        # AND the first batch was processed by blue, the last by green, with their payloads intact
        assert {by_id[f"ev-{i:05d}"]["spec_version"] for i in range(0, 120)} == {1}
        assert {by_id[f"ev-{i:05d}"]["spec_version"] for i in range(300, 420)} == {2}
        assert all(by_id[e["event_id"]]["payload"] == e["payload"] for e in sent)
    finally:
        for v in list(fleet.workers):
            fleet.stop(v)
        router_handler.runtime.cache_clear()
        os.environ.pop("AWS_ENDPOINT_URL", None)
