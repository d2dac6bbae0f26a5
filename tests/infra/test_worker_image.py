"""infra.workers: the worker image as CDK stages it.

``cdk synth`` stages the image's build context into ``cdk.out/asset.<hash>/`` (the assembly's ``*.assets.json``
names it under ``dockerImages``); ``cdk deploy`` runs ``docker build`` in exactly that directory. These tests take
the directory from the session's synthesized assembly (the same aws-cdk-lib staging ``cdk synth`` runs: the asset
hash is the same), check it holds every ``COPY`` source of its Dockerfile, and run the worker from it, as the image's
``CMD`` does, with the geofence transform of ``transforms/geofence.py`` against a local moto server. No OCI image is
built (no Docker engine here, and the ``python:3.12-slim`` base cannot be pulled offline): the worker runs on this
interpreter with ``PYTHONPATH`` and the working directory set to the staged directory only.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geo_service.adapters.aws import Clients, make_clients
from geokernel.contracts.env import EnvVar
from geokernel.contracts.stream import geo_stream_name
from infra.dockerfile import copy_sources, missing_sources
from local.aws import DUMMY_CREDENTIALS, REGION, EmbeddedAws, Names, SerialMotoServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "geo_service"))
from geo_testkit import Resources, enriched_rows, make_spec, publish_spec, set_active

GEOFENCE = "transforms.geofence:Geofences"  # docs/TRANSFORM.md; geo_service.pipeline.transform.load_transform's module:Class


def staged_image(synth: Any) -> tuple[Path, Path]:
    """The staged Docker build context of the worker image and its Dockerfile, from the cloud assembly."""
    manifest = json.loads((Path(synth.assembly.directory) / f"{synth.stack.artifact_id}.assets.json").read_text())
    (source,) = [image["source"] for image in manifest["dockerImages"].values()]
    staged = Path(synth.assembly.directory) / source["directory"]
    return staged, staged / source["dockerFile"]


def test_the_staged_context_holds_every_copy_source_of_the_dockerfile(emr: Any) -> None:
    # GIVEN the worker image's build context as CDK staged it, and the Dockerfile inside it
    staged, dockerfile = staged_image(emr)
    text = dockerfile.read_text()
    # WHEN its COPY sources are looked up in the staged directory
    # THEN every one is there (docker build would fail on the first missing one), transforms/ among them
    assert "transforms/" in copy_sources(text)
    assert missing_sources(text, staged) == []
    # AND nothing else from the repo root came along (the allowlist is the Dockerfile's own list)
    assert sorted(p.name for p in staged.iterdir()) == ["geo_service", "geokernel", "transforms"]
    assert not [p for p in staged.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    # AND the image ships the kernel only: no builders, simulator or plotting code of the partitioner library
    assert not [p for p in staged.rglob("*") if p.name in ("builders", "simulate", "plot.py")]


@pytest.fixture()
def moto_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedAws]:
    """A serial moto server with the tables, buckets and geo-stream key of local/aws.py (one prefix per test)."""
    for key, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    server = SerialMotoServer().start()
    aws = EmbeddedAws(endpoint_url=server.url, names=Names(f"img{uuid.uuid4().hex[:8]}"), server=server)
    try:
        aws.create_resources(ingest_shards=1)
        yield aws
    finally:
        server.stop()


def _resources(names: Names) -> Resources:
    return Resources(prefix=names.prefix, control_table=names.control_table, leases_table=names.leases_table,
                     specs_bucket=names.specs_bucket, costs_bucket=names.costs_bucket, output_bucket=names.output_bucket)


def _staged_env(aws: EmbeddedAws, staged: Path, **extra: str) -> dict[str, str]:
    """The environment of a worker started from ``staged``: only the staged directory on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))}
    env.update(aws.environment())
    env.update({"PYTHONPATH": str(staged), "PYTHONDONTWRITEBYTECODE": "1", EnvVar.LEASE_S: "3", EnvVar.DRAIN_QUIET_S: "0.5",
                EnvVar.POLL_INTERVAL_S: "0.05", EnvVar.ACTIVE_POLL_S: "0.1", EnvVar.COST_REPORT_INTERVAL_S: "60", **extra})
    return env


def _wait_for_rows(clients: Clients, res: Resources, proc: subprocess.Popen[bytes], timeout_s: float
                   ) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = enriched_rows(clients, res)
        if rows or proc.poll() is not None:
            return rows
        time.sleep(0.2)
    return []


def test_the_worker_runs_from_the_staged_context_with_the_geofence_transform(emr: Any, moto_aws: EmbeddedAws,
                                                                             tmp_path: Path) -> None:
    # GIVEN the staged build context, spec v1 (one worker owning the world) active, and its geo stream
    staged, _ = staged_image(emr)
    res = _resources(moto_aws.names)
    clients = make_clients(moto_aws.endpoint_url, REGION)
    spec = make_spec(1, [[""]], stream_name=geo_stream_name(res.prefix, 1))
    publish_spec(clients, res, spec)
    set_active(clients, res, 1)
    # AND the interpreter imports the worker, the kernel and the transform from the staged directory only
    env = _staged_env(moto_aws, staged, **{EnvVar.SPEC_VERSION: "1", EnvVar.WORKER_ID: "w0001", EnvVar.SWAP_MODE: "whole",
                                          EnvVar.GEO_TRANSFORM: GEOFENCE})
    probe = subprocess.run([sys.executable, "-c", "import geo_service, geokernel, transforms.geofence as g; "
                            "print(geo_service.__file__); print(geokernel.__file__); print(g.__file__)"],
                           cwd=staged, env=env, capture_output=True, text=True, check=True, timeout=60)
    assert all(Path(line).is_relative_to(staged) for line in probe.stdout.split()), probe.stdout
    # WHEN the image's command runs there (CMD ["python", "-m", "geo_service"]) and an event at a geofence arrives
    with (staged / "transforms" / "data" / "geofences.csv").open(newline="") as f:
        zone = next(csv.DictReader(f))
    log = tmp_path / "worker.log"
    proc = subprocess.Popen([sys.executable, "-m", "geo_service"], cwd=staged, env=env, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)
    try:
        event = {"event_id": "e1", "entity_id": "truck-1", "ts": 1795255500000, "lat": float(zone["lat"]), "lon": float(zone["lon"])}
        clients.kinesis.put_record(StreamName=spec.stream_name, Data=json.dumps(event).encode(), PartitionKey="truck-1",
                                   ExplicitHashKey=spec.worker("w0001").hash_key)
        rows = _wait_for_rows(clients, res, proc, 90)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    # THEN the worker processed it with the geofence transform: its record carries the zone it lies in
    assert rows, log.read_text()[-3000:]
    assert [(r["event_id"], r["zones"][:1]) for r in rows] == [("e1", [zone["id"]])]
