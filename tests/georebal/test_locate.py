"""georebal locate: a spec file offline, and a deployment's live spec in moto, where the acceptance check of issue
#57 runs: the worker locate names is the one whose shard the router's own ``route_batch`` put the event on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from moto import mock_aws

from geo_service.pipeline.consumer import worker_shards
from geokernel.contracts.stream import StreamManifest, stream_manifest_key
from geokernel.partition_spec.model import entity_bucket
from georebal.cli import main
from lambdas.router.routing import ActiveSpecCache, InputRecord, route_batch
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from tests.georebal.day_after import (
    OUTPUTS,
    PLACES,
    STACK,
    Deployment,
    FakeClock,
    day_spec,
    events,
    make_deployment,
)

ROOT = Path(__file__).resolve().parents[2]
BERLIN, PARIS, LONDON = ((lat, lon) for _, lat, lon in PLACES)


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    with mock_aws():
        yield make_deployment()


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "v3.json"
    day_spec().save(path)
    return path


def locate(capsys: pytest.CaptureFixture[str], *args: str, dep: Deployment | None = None) -> tuple[int, str, str]:
    """``locate ARGS`` against ``dep``'s moto account (None: no AWS may be asked)."""
    status = main(["locate", *args], aws=lambda region, profile: dep.aws if dep else pytest.fail("AWS was asked"))
    out, err = capsys.readouterr()
    return status, out, err


def located(capsys: pytest.CaptureFixture[str], *args: str, dep: Deployment | None = None) -> dict[str, object]:
    status, out, err = locate(capsys, *args, "--json", dep=dep)
    assert status == 0, err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_a_spec_file_gives_partition_worker_stream_shard_and_hash_key(capsys: pytest.CaptureFixture[str],
                                                                      spec_file: Path) -> None:
    # GIVEN spec v3 in a file, where Berlin's cell is w1's (two shards) WHEN a Berlin point of an entity is located
    lat, lon = BERLIN
    status, out, err = locate(capsys, "--lat", str(lat), "--lon", str(lon), "--entity", "ent-1", "--spec",
                              str(spec_file))
    # THEN the text names the partition, its cell, the worker and slot, the stream, the shard and the hash key
    spec = day_spec()
    keys = spec.worker("w1").shard_keys
    key = keys[entity_bucket("ent-1") % 2]
    shard = keys.index(key)  # w1 is worker 0 of 3: shards 0 and 1 of 6
    assert status == 0 and err == ""
    rows = {line[:11].strip(): line[11:] for line in out.splitlines()}  # labels padded to 11 characters
    assert rows["partition"].startswith("p0001 (cell '1202102332'")
    assert rows["worker"] == "w1 (slot v3#w1)"
    assert rows["geo stream"] == "dayafter-geo-v3"
    assert rows["shard"] == f"shardId-{shard:012d} ({shard + 1} of 6, computed)"
    assert rows["hash key"] == f"ExplicitHashKey {key}"
    assert rows["lease"] == "not read (--spec: no deployment)"


def test_json_names_the_same_and_the_catch_all(capsys: pytest.CaptureFixture[str], spec_file: Path) -> None:
    # GIVEN the spec file WHEN a London point (no listed cell) is located as JSON
    doc = located(capsys, "--lat", str(LONDON[0]), "--lon", str(LONDON[1]), "--entity", "e", "--spec", str(spec_file))
    # THEN it is the catch-all's partition on w1, with its shard and hash key, and no lease read
    assert doc["partition"] == "p9999" and doc["cell"] == "" and doc["worker"] == "w1" and doc["slot"] == "v3#w1"
    assert doc["stream"] == "dayafter-geo-v3" and doc["hash_key"] in day_spec().worker("w1").shard_keys
    assert doc["lease_read"] is False and doc["lease"] is None and doc["version"] == 3


def test_a_split_cell_needs_the_entity(capsys: pytest.CaptureFixture[str], spec_file: Path) -> None:
    # GIVEN Paris's cell split by entity over p0002 (w2) and p0003 (w3) WHEN located without --entity
    status, out, err = locate(capsys, "--lat", str(PARIS[0]), "--lon", str(PARIS[1]), "--spec", str(spec_file))
    # THEN one line names the point, the cell, its shares and what to give; exit 2
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"error: --lat {PARIS[0]!r} --lon {PARIS[1]!r}: cell '1202200110' of spec v3 is split by "
                          "entity over 2 partitions (p0002, p0003): give --entity ID")
    # AND with entities, each goes to the share holding its bucket
    for entity in ("a", "b", "c", "d"):
        doc = located(capsys, "--lat", str(PARIS[0]), "--lon", str(PARIS[1]), "--entity", entity,
                      "--spec", str(spec_file))
        assert doc["split"] is True
        assert doc["worker"] == ("w2" if entity_bucket(entity) < 32768 else "w3")


def test_a_worker_of_several_shards_without_entity_names_them(capsys: pytest.CaptureFixture[str],
                                                              spec_file: Path) -> None:
    # GIVEN w1 owns two shards WHEN a Berlin point is located without an entity
    status, out, _ = locate(capsys, "--lat", str(BERLIN[0]), "--lon", str(BERLIN[1]), "--spec", str(spec_file))
    # THEN the worker is named and the shard is left to the entity
    assert status == 0 and "w1 (slot v3#w1)" in out
    assert "shard      one of the worker's 2 shards, by entity: give --entity ID" in out.splitlines()


@pytest.mark.parametrize(("lat", "lon", "message"), [
    ("86", "0", "error: --lat 86.0: outside [-85.05112878, 85.05112878] (the events' limits; the router quarantines "
                "such an event as lat_out_of_range)"),
    ("0", "-180.5", "error: --lon -180.5: outside [-180, 180] (the events' limits; the router quarantines such an "
                    "event as lon_out_of_range)"),
])
def test_a_point_outside_the_limits_is_one_line(capsys: pytest.CaptureFixture[str], spec_file: Path, lat: str,
                                                lon: str, message: str) -> None:
    # GIVEN a point the router would quarantine WHEN located
    status, out, err = locate(capsys, "--lat", lat, "--lon", lon, "--spec", str(spec_file))
    # THEN exit 2 with one line naming the value, before anything is read
    assert status == 2 and out == "" and err == message + "\n"


def test_a_bad_spec_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN a file that is not a spec WHEN located in it
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1}')
    status, _, err = locate(capsys, "--lat", "1", "--lon", "1", "--spec", str(bad))
    # THEN one line naming the file
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith(f"error: --spec: {bad}")


def route(deployment: Deployment, evs: list[dict[str, object]]) -> None:
    """One router batch of ``evs``, by the router's own code: its active-spec cache and ``route_batch``."""
    dep, outputs = deployment, deployment.outputs
    cache = ActiveSpecCache(ControlTable(dep.client("dynamodb"), outputs["ControlTable"]),
                            SpecStore(dep.client("s3"), outputs["SpecsBucket"]))
    records = [InputRecord(f"{i}", json.dumps(e).encode(), f"ingest/shard/{i}") for i, e in enumerate(evs)]
    result = route_batch(records, cache.current(), GeoStreams(dep.client("kinesis")),
                         QuarantineSink(dep.client("s3"), outputs["QuarantineBucket"], "router"))
    assert result.routed == len(evs) and not result.failed_ids


def test_the_worker_locate_names_reads_the_shard_the_router_put_the_event_on(
        deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a deployment whose live spec is v3 (3 workers x 2 shards, a split cell), its geo stream and manifest,
    # and the slots' leases
    spec = day_spec()
    deployment.activate(spec)
    now = time.time()
    for w in ("w1", "w2", "w3"):
        deployment.put_lease(f"v3#{w}", f"task-{w}", now + 20)
    # AND a router batch of 60 events over 7 entities and the three places, routed into moto
    evs = events(60)
    route(deployment, evs)
    landed = {json.loads(r["Data"])["event_id"]: shard
              for shard, records in deployment.read_stream("dayafter-geo-v3").items() for r in records}
    manifest = StreamManifest.from_json(deployment.client("s3").get_object(
        Bucket=OUTPUTS["SpecsBucket"], Key=stream_manifest_key(3))["Body"].read(), "manifest")
    # WHEN each event's point and entity is located in the live deployment (--stack)
    for ev in evs:
        doc = located(capsys, "--lat", str(ev["lat"]), "--lon", str(ev["lon"]), "--entity", str(ev["entity_id"]),
                      "--stack", STACK, dep=deployment)
        shard = doc["shard"]
        assert isinstance(shard, dict) and isinstance(doc["lease"], dict)
        # THEN the shard it names is the one the router put the event on
        assert shard["shard_id"] == landed[str(ev["event_id"])], ev
        assert shard["found_by"] == f"stream manifest s3://{OUTPUTS['SpecsBucket']}/streams/v00000003.json"
        # AND the worker it names reads that shard (the worker's own lookup of its shards in the manifest)
        reads = {s.shard_id for lineage in worker_shards(manifest, spec.worker(str(doc["worker"])).shard_keys)
                 for s in lineage}
        assert shard["shard_id"] in reads
        # AND the slot's lease holder now is the one in the leases table
        lease = doc["lease"]
        assert lease["owner"] == f"task-{doc['worker']}" and lease["expires_at"] == pytest.approx(now + 20)
    assert {str(d) for d in landed.values()} <= {s.shard_id for s in manifest.shards}


@pytest.mark.parametrize(("expires_in", "said"), [(20.0, "(in 20 s); ready"), (-5.0, "(expired 5 s ago); ready")])
def test_the_text_says_the_lease_holder_and_its_expiry(deployment: Deployment, capsys: pytest.CaptureFixture[str],
                                                       expires_in: float, said: str) -> None:
    # GIVEN a live v3 whose w1 slot is held, expiring 20 s from now or expired 5 s ago
    deployment.activate(day_spec())
    now = 1_778_940_000.0
    deployment.put_lease("v3#w1", "task-9", now + expires_in)
    # WHEN a Berlin point is located by the resources' names (the stack is not asked)
    status = deployment.run("locate", "--lat", str(BERLIN[0]), "--lon", str(BERLIN[1]), "--entity", "e1",
                            "--stack", "no-such-stack", "--control-table", OUTPUTS["ControlTable"],
                            "--specs-bucket", OUTPUTS["SpecsBucket"], "--leases-table", OUTPUTS["LeasesTable"],
                            clock=FakeClock(now))
    out = capsys.readouterr().out
    # THEN it names the active spec object, the shard from the manifest, the holder and the expiry
    assert status == 0
    assert "spec       v3: s3://dayafter-specs/specs/v00000003.json, active since 2026-05-16T14:00:00Z" in out
    assert "of 6, stream manifest s3://dayafter-specs/streams/v00000003.json)" in out
    expires = datetime.fromtimestamp(now + expires_in, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"lease      v3#w1: held by 'task-9', expires {expires} {said}" in out.splitlines()


def test_a_slot_nobody_claimed_says_so(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a live v3 with no lease item WHEN located
    deployment.activate(day_spec())
    status = deployment.run("locate", "--lat", str(LONDON[0]), "--lon", str(LONDON[1]), "--entity", "e",
                            "--stack", STACK)
    # THEN the lease row says no worker claimed the slot
    assert status == 0 and "lease      v3#w1: no lease item (no worker has claimed the slot)" in capsys.readouterr().out


def test_no_active_spec_is_one_line(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a deployment before its first flip WHEN a point is located in it
    status = deployment.run("locate", "--lat", "1", "--lon", "1", "--stack", STACK)
    err = capsys.readouterr().err
    # THEN exit 2, one line naming the control item, the table and where its name came from
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith("error: no spec is active: control item 'active' is missing in the control table "
                          f"'dayafter-control' (stack output ControlTable of {STACK!r})")


def test_an_unknown_stack_is_one_line(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN no stack named as -c prefix says WHEN located with the settings' default stack name
    status = deployment.run("locate", "--lat", "1", "--lon", "1", "--cdk-json", str(ROOT / "cdk.json"),
                            "-c", "prefix=nothere")
    err = capsys.readouterr().err
    # THEN one line naming the stack it asked for
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith("error: --stack 'nothere-geo-rebalancer': no such stack in eu-central-1")
