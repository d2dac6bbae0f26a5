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
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from geo_service.adapters.aws import Clients as WorkerClients
from geo_service.adapters.aws import make_clients as make_worker_clients
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.config import WorkerConfig
from geo_service.worker import GeoWorker
from geokernel.contracts.control import DeployStatus
from geokernel.contracts.enriched import decode_lines
from geokernel.contracts.spec_pointer import spec_key
from geokernel.geo.tiles import Tile, bounds
from lambdas.deploy.controller import DeployController
from lambdas.deploy.hooks import HookEvent, run_hook
from lambdas.deploy.plan import DeployPlan
from lambdas.router import handler as router_handler
from lambdas.runtime.clients import make_clients
from lambdas.runtime.config import LambdaConfig, SwapMode
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.records import read_active
from lambdas.runtime.s3 import SpecStore
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
    # moto's backends are process-wide: start every test from an empty account
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).close()
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
    """The controller's fleet adapter with real GeoWorkers in threads (one per started slot, slot pinned)."""

    def __init__(self, clients: WorkerClients) -> None:
        self.clients = clients
        self.workers: dict[int, list[GeoWorker]] = {}  # by the version they were started for
        self.started: list[tuple[int, str]] = []

    def start(self, plan: DeployPlan) -> None:
        cfg = dict(spec_version=plan.to_version, control_table="e2e-control", leases_table="e2e-leases",
                   specs_bucket="e2e-specs", costs_bucket="e2e-costs", output_bucket="e2e-output",
                   quarantine_bucket="e2e-quarantine", prefix=PREFIX, lease_s=5.0, drain_quiet_s=1.5,
                   cost_report_interval_s=60.0, poll_interval_s=0.05, active_poll_s=0.1, swap_mode=plan.mode.value)
        self.started += [(plan.to_version, w) for w in plan.started]
        self.workers[plan.to_version] = [GeoWorker(WorkerConfig(**cfg, worker_id=w),  # type: ignore[arg-type]
                                                   self.clients, calibration=FAST_CAL).start() for w in plan.started]

    def stop(self, plan: DeployPlan) -> None:
        """Like LocalFleet: whole mode stops the workers started for the old version; carry mode those pinned to a
        removed slot and started for the old version or before (a slot id may come back in a later version)."""
        old, gone = plan.from_version or 0, set(plan.stopped)
        for w in self.all():
            version, slot = w.config.spec_version or 0, w.config.worker_id
            if version == old if plan.mode.value == "whole" else (slot in gone and version <= old):
                w.stop(timeout=30)

    def abort(self, plan: DeployPlan) -> None:
        for w in self.workers.get(plan.to_version, []):
            w.stop(timeout=30)

    def advance(self, plan: DeployPlan) -> bool:
        return True

    def all(self) -> list[GeoWorker]:
        return [w for ws in self.workers.values() for w in ws]


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


def route(events: list[dict[str, Any]], seq: int, tries: int = 3) -> None:
    """Route a batch as the event source mapping does with ReportBatchItemFailures: re-deliver from the first failed
    record on (a batch the router's flip fence failed, lambdas.router.routing.fence_flip), at most ``tries`` times."""
    for _ in range(tries):
        out = router_handler.handler(kinesis_event(events, seq), FakeLambdaContext("e2e-router"))
        failed = [int(f["itemIdentifier"]) for f in out["batchItemFailures"]]
        if not failed:
            return
        events, seq = events[min(failed) - seq:], min(failed)
    raise AssertionError(f"records from {seq} still failing after {tries} tries: {out}")


def enriched(clients: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        kw = {"Bucket": "e2e-output", "Prefix": "enriched/"} | ({"ContinuationToken": token} if token else {})
        resp = clients.s3.list_objects_v2(**kw)
        for obj in resp.get("Contents", []):
            body = clients.s3.get_object(Bucket="e2e-output", Key=obj["Key"])["Body"].read()
            rows += [json.loads(x) for x in decode_lines(body, obj["Key"])]
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
                           prefix=PREFIX, green_timeout_s=120, drain_timeout_s=120, swap_mode=SwapMode.WHOLE)
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
        until("v1 deployed", lambda: ctl.step().status == DeployStatus.DONE)
        assert read_active(control).version == 1  # type: ignore[union-attr]
        batch = make_events(0, 120)
        route(batch, 1000)
        sent += batch

        # WHEN spec v2 is published and deployed (green workers start; blue keeps serving meanwhile)
        v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1, prefix=PREFIX)
        publish(v2)
        ctl.request(2)
        assert ctl.step().status == DeployStatus.WAITING_GREEN
        batch = make_events(120, 120)
        route(batch, 2000)
        sent += batch
        # AND the POST_SCALE_UP hook holds the shift until every green partition is leased and warm, then flips
        green = HookEvent("x", "POST_SCALE_UP", "svc", "rev", {})
        first = run_hook(ctl, green, 1)
        assert first["hookStatus"] == "IN_PROGRESS" or ctl.state().status != DeployStatus.WAITING_GREEN
        until("green ready and flipped",
              lambda: run_hook(ctl, HookEvent("x", "POST_SCALE_UP", "svc", "rev", first["hookDetails"]), 1)[
                  "hookStatus"] == "SUCCEEDED")
        assert read_active(control).version == 2  # type: ignore[union-attr]
        # AND events keep flowing through the flip (a batch routed by v1 within the router's TTL is fenced: reported
        # failed, it is re-delivered and goes to v2)
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
        assert ctl.state().status == DeployStatus.DONE
        assert f"{PREFIX}-geo-v1" not in c.kinesis.list_streams()["StreamNames"]
        assert all(w.status().state == "drained" for w in fleet.workers[1])
        assert not any(w.status().finished for w in fleet.workers[2])  # retiring blue leaves green alone

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
        for w in fleet.all():
            w.stop(timeout=30)
        router_handler.runtime.cache_clear()
        os.environ.pop("AWS_ENDPOINT_URL", None)


def processed_order_violations(rows: list[dict[str, Any]]) -> list[str]:
    """Entities with a record of stream n processed after one of their records of a stream m > n."""
    spans: dict[str, dict[int, list[int]]] = {}
    for r in rows:
        span = spans.setdefault(r["entity_id"], {}).setdefault(r["spec_version"], [r["processed_at"], r["processed_at"]])
        span[0], span[1] = min(span[0], r["processed_at"]), max(span[1], r["processed_at"])
    bad = []
    for entity, by_version in spans.items():
        versions = sorted(by_version)
        bad += [f"{entity}: v{n} until {by_version[n][1]} > v{m} from {by_version[m][0]}"
                for i, n in enumerate(versions) for m in versions[i + 1:] if by_version[n][1] >= by_version[m][0]]
    return bad


def test_carry_swaps_keep_slots_in_their_processes_and_every_entity_in_order(endpoint: str) -> None:
    # GIVEN the control plane in carry mode over moto, real GeoWorkers in threads, and v1 deployed
    cfg = LambdaConfig.from_env()
    c = make_clients(cfg)
    control, specs = ControlTable(c.dynamodb, cfg.control_table), SpecStore(c.s3, cfg.specs_bucket)
    fleet = ThreadFleet(make_worker_clients(endpoint, "us-east-1"))
    leases = LeaseTable(c.dynamodb, cfg.leases_table)
    ctl = DeployController(control, leases, specs, GeoStreams(c.kinesis), fleet, prefix=PREFIX, green_timeout_s=120,
                           drain_timeout_s=120, swap_mode=SwapMode.CARRY)
    router_handler.runtime.cache_clear()

    def deploy(spec: Any, *during: tuple[int, int]) -> None:
        specs.put_new(spec)
        assert control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                               "published_at": "t"})
        ctl.request(spec.version)
        for start, n in during:  # events while the swap is in flight: before, around and after the flip
            route_and_keep(start, n)
            ctl.step()
        until(f"v{spec.version} deployed", lambda: ctl.step().status == DeployStatus.DONE and ctl.state().version == spec.version,
              timeout=90)

    sent: list[dict[str, Any]] = []

    def route_and_keep(start: int, n: int) -> None:
        batch = make_events(start, n)
        route(batch, 10_000 + start)
        sent.extend(batch)

    try:
        v1 = make_spec(1, prefix=PREFIX)
        deploy(v1)
        route_and_keep(0, 120)
        owners_v1 = {w: v.owner for w, v in leases.states(1, [x.id for x in v1.workers]).items()}
        # WHEN v2 keeps w0001-w0003 and adds w0004, with events routed throughout the swap
        v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1, prefix=PREFIX)
        deploy(v2, (120, 120), (240, 60), (300, 60))
        route_and_keep(360, 60)
        # THEN only the new slot got a worker; each kept slot's v2 lease is held by the process that held it in v1
        assert fleet.started == [(1, "w0001"), (1, "w0002"), (1, "w0003"), (2, "w0004")]
        owners_v2 = {w: v.owner for w, v in leases.states(2, [x.id for x in v2.workers]).items()}
        assert {w: owners_v2[w] for w in owners_v1} == owners_v1
        assert all(w.status().carried == 1 and not w.status().finished for w in fleet.workers[1])
        plan = control.get("plan")
        assert plan is not None and (plan["kept"], plan["started"], plan["status"]) == (
            ["w0001", "w0002", "w0003"], ["w0004"], "done")
        assert f"{PREFIX}-geo-v1" not in c.kinesis.list_streams()["StreamNames"]
        # WHEN v3 removes w0001 (w0002 gains its cell), with events routed throughout
        v3 = make_spec(3, loads=(500, 500, 500, 500), previous=v2, prefix=PREFIX)
        deploy(v3, (420, 100), (520, 100))
        route_and_keep(620, 60)
        # THEN the removed slot's worker drained and finished; the others carried over again; nothing started
        by_slot = {w.config.worker_id: w for w in fleet.all()}
        final = by_slot["w0001"].run_until(lambda s: s.finished, timeout=30)
        assert leases.states(2, ["w0001"])["w0001"].drained  # its v2 slot drained (the lease says so)
        # then it found nothing more to claim (drained) or the deployer stopped it first (released): a race
        assert final.state in ("drained", "released") and final.exit_code == 0
        assert [by_slot[w].status().carried for w in ("w0002", "w0003", "w0004")] == [2, 2, 1]
        assert len(fleet.started) == 4
        # AND every event sent came out, exactly once after dedupe by event_id
        want = {e["event_id"] for e in sent}
        rows = until("all events enriched", lambda: (r := enriched(c)) and {x["event_id"] for x in r} >= want and r,
                     timeout=60)
        assert {r["event_id"] for r in rows} == want and len(want) == 680
        # AND every entity's records of one version were processed before any of its records of a later version
        assert processed_order_violations(rows) == []
        assert {r["spec_version"] for r in rows} == {1, 2, 3}
        assert {r["owner"] for r in rows} == {w.owner for w in fleet.all()}
    finally:
        for w in fleet.all():
            w.stop(timeout=30)
        router_handler.runtime.cache_clear()
        os.environ.pop("AWS_ENDPOINT_URL", None)
