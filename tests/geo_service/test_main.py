"""``python -m geo_service`` as a real process: env config, JSON logs and EMF metrics, /health, SIGTERM, exit after
drain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from geo_testkit import Resources, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.adapters.logs import read_line
from geo_service.leases.lease import LeaseManager
from geokernel.contracts.env import EnvVar
from geokernel.contracts.metric_names import METRICS, NAMESPACE, Metric, MetricService, metric_dimensions
from geokernel.geo.tiles import quadkey, tile
from local.aws import free_port

REPO = Path(__file__).resolve().parents[2]
PARIS_Z6 = quadkey(tile(2.3522, 48.8566, 6))


def _env(endpoint: str, res: Resources, version: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update({EnvVar.SPEC_VERSION: str(version), EnvVar.CONTROL_TABLE: res.control_table, EnvVar.LEASES_TABLE: res.leases_table,
                EnvVar.SPECS_BUCKET: res.specs_bucket, EnvVar.COSTS_BUCKET: res.costs_bucket, EnvVar.OUTPUT_BUCKET: res.output_bucket,
                EnvVar.GEO_PREFIX: res.prefix, EnvVar.AWS_ENDPOINT_URL: endpoint, EnvVar.LEASE_S: "3", EnvVar.DRAIN_QUIET_S: "0.5",
                EnvVar.POLL_INTERVAL_S: "0.05", EnvVar.ACTIVE_POLL_S: "0.1", EnvVar.COST_REPORT_INTERVAL_S: "1",
                "PYTHONPATH": str(REPO), **extra})
    return env


def _start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "geo_service"], cwd=REPO, env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)


def _health(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return dict(json.loads(resp.read()))
    except OSError:
        return None


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _logs(path: Path) -> list[dict[str, Any]]:
    """The log lines of a worker's stdout (its EMF metric lines left out)."""
    return [doc for line in path.read_text().splitlines() if (doc := read_line(line)) is not None]


def _emf(path: Path) -> list[dict[str, Any]]:
    """The CloudWatch EMF lines of a worker's stdout."""
    return [doc for line in path.read_text().splitlines() if line.strip() and "_aws" in (doc := json.loads(line))]


def test_process_serves_health_and_releases_on_sigterm(moto_endpoint: str, clients: Clients,
                                                       resources: Resources, tmp_path: Path) -> None:
    # GIVEN spec v2 (w0001 owns a Paris tile) and a worker process pinned to w0001 with a health port
    spec = make_spec(2, [[PARIS_Z6], [""]], stream_name=f"{resources.prefix}-geo-v2")
    publish_spec(clients, resources, spec)
    port = free_port()
    log = tmp_path / "worker.log"
    proc = _start(_env(moto_endpoint, resources, 2, **{EnvVar.WORKER_ID: "w0001", EnvVar.HEALTH_PORT: str(port)}), log)
    try:
        # WHEN it warms up
        health = _wait(lambda: (h := _health(port)) and h["state"] == "ready" and h, 60, "/health ready")
        lease = LeaseManager(clients.dynamodb, resources.leases_table, 2, "reader", 3).read("w0001")
        # THEN /health and the lease say ready, and only the region's places are loaded
        assert health["worker_id"] == "w0001" and health["ready"] is True and health["partition_ids"] == ["p0001"]
        assert 0 < health["places_loaded"] < 40_000  # the world has ~147k
        assert lease is not None and lease.ready and lease.owner == health["owner"]
        # WHEN it gets SIGTERM
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # THEN it exits 0 after releasing the lease, and its stdout is JSON lines
    after = LeaseManager(clients.dynamodb, resources.leases_table, 2, "reader", 3).read("w0001")
    assert code == 0 and after is not None and after.released and after.owner is None and not after.drained
    events = [r["message"] for r in _logs(log)]
    assert {"spec_loaded", "lease_claimed", "worker_ready", "signal", "lease_released", "exit"} <= set(events)


def test_process_drains_after_the_flip_and_exits_zero(moto_endpoint: str, clients: Clients,
                                                      resources: Resources, tmp_path: Path) -> None:
    # GIVEN spec v5 active, a whole-fleet worker process for slot w0001 of v5 without a health port, and one event
    spec = make_spec(5, [[PARIS_Z6], [""]], stream_name=f"{resources.prefix}-geo-v5")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 5)
    log = tmp_path / "worker.log"
    proc = _start(_env(moto_endpoint, resources, 5, **{EnvVar.WORKER_ID: "w0001", EnvVar.SWAP_MODE: "whole"}), log)
    try:
        reader = LeaseManager(clients.dynamodb, resources.leases_table, 5, "reader", 3)
        _wait(lambda: (st := reader.read("w0001")) is not None and st.ready, 60, "lease ready")
        ev = {"event_id": "only", "entity_id": "c1", "ts": 1795255500000, "lat": 48.8566, "lon": 2.3522}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(), PartitionKey="c1",
                                   ExplicitHashKey=spec.worker("w0001").hash_key)
        _wait(lambda: clients.s3.list_objects_v2(Bucket=resources.output_bucket).get("KeyCount", 0) > 0, 30,
              "enriched output")
        # WHEN the active pointer moves to v6
        set_active(clients, resources, 6)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # THEN the process exits 0 on its own with its lease drained and released
    st = reader.read("w0001")
    assert code == 0 and st is not None and st.drained and st.released and st.owner is None
    assert next(r for r in _logs(log) if r["message"] == "exit")["state"] == "drained"


@pytest.mark.parametrize(("drop", "message"), [(EnvVar.SPEC_VERSION, "SPEC_VERSION is required")])
def test_process_config_error_exits_2_naming_the_variable(moto_endpoint: str, resources: Resources, tmp_path: Path,
                                                          drop: str, message: str) -> None:
    # GIVEN a whole-fleet worker's environment missing a required variable
    env = _env(moto_endpoint, resources, 1, **{EnvVar.SWAP_MODE: "whole"})
    del env[drop]
    log = tmp_path / "worker.log"
    # WHEN the process starts
    code = _start(env, log).wait(timeout=30)
    # THEN it exits 2 with a JSON log line naming the variable
    lines = _logs(log)
    assert code == 2 and lines[-1]["message"] == "config_error" and message in lines[-1]["error"]


WORKER_METRICS = {m.value for m, use in METRICS.items() if use.service is MetricService.WORKER}


def test_a_worker_process_logs_powertools_lines_and_emf_metrics_by_the_metric_names(
        moto_endpoint: str, clients: Clients, resources: Resources, tmp_path: Path) -> None:
    # GIVEN spec v7 active and a worker process for its slot w0001, its stdout to a log file as in the local loop
    spec = make_spec(7, [[PARIS_Z6], [""]], stream_name=f"{resources.prefix}-geo-v7")
    publish_spec(clients, resources, spec)
    set_active(clients, resources, 7)
    log = tmp_path / "worker-v7-w0001.log"
    proc = _start(_env(moto_endpoint, resources, 7, **{EnvVar.WORKER_ID: "w0001", EnvVar.SWAP_MODE: "whole",
                                                       EnvVar.METRICS_INTERVAL_S: "1",
                                                       "POWERTOOLS_METRICS_DISABLED": "false"}), log)
    try:
        reader = LeaseManager(clients.dynamodb, resources.leases_table, 7, "reader", 3)
        _wait(lambda: (st := reader.read("w0001")) is not None and st.ready, 60, "lease ready")
        # WHEN it gets 3 events and an undecodable record, writes them, and drains after the flip to v8
        for i in range(3):
            ev = {"event_id": f"e{i}", "entity_id": "c1", "ts": 1795255500000 + i, "lat": 48.8566, "lon": 2.3522}
            clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(ev).encode(), PartitionKey="c1",
                                       ExplicitHashKey=spec.worker("w0001").hash_key)
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=b"{not json", PartitionKey="c1",
                                   ExplicitHashKey=spec.worker("w0001").hash_key)
        _wait(lambda: clients.s3.list_objects_v2(Bucket=resources.output_bucket,
                                                 Prefix="enriched/").get("KeyCount", 0) > 0, 30, "enriched output")
        set_active(clients, resources, 8)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # THEN every log line is in the Lambdas' Powertools schema, with the worker's service and the event as message
    lines = _logs(log)
    assert lines and all({"level", "location", "message", "timestamp", "service"} <= set(r) for r in lines)
    assert {r["service"] for r in lines} == {"geo-worker"}
    assert {"lease_claimed", "worker_ready", "drained", "exit"} <= {r["message"] for r in lines}
    # AND the EMF lines name only the worker metrics of geokernel/contracts/metric_names.py, in the one dimension set
    # service + deployment (no worker or version dimension), the per-slot detail in the line's properties
    emf = _emf(log)
    assert emf
    sums: dict[str, float] = {}
    for doc in emf:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == NAMESPACE
        (dims,) = directive["Dimensions"]
        assert {d: doc[d] for d in dims} == metric_dimensions(MetricService.WORKER, resources.prefix)
        names = {m["Name"] for m in directive["Metrics"]}
        assert names <= WORKER_METRICS, names - WORKER_METRICS
        assert all(len(doc[n]) <= 100 for n in names)
        for n in names:
            sums[n] = sums.get(n, 0.0) + sum(doc[n])
        assert (doc["owner"], doc["version"], doc["worker_id"]) == (lines[0]["owner"], 7, "w0001")
    assert (sums[Metric.EVENTS_PROCESSED], sums[Metric.EVENTS_QUARANTINED], sums[Metric.TRANSFORM_ERRORS]) == (3, 1, 0)
    assert Metric.TRANSFORM_TIME in sums and Metric.OUTPUT_FLUSH_AGE in sums
    lagged = [doc for doc in emf if Metric.MILLIS_BEHIND_LATEST in doc]
    assert lagged and all(set(doc["shards_behind_ms"]) == {f"{spec.stream_name}/shardId-000000000000"}
                          for doc in lagged)
