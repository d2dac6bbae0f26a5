"""Partitioner Lambda: snapshot manifest -> verified rows -> spec -> policy -> publish (moto, real writer)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

import pytest

from geokernel.contracts.control import ControlKey
from geokernel.contracts.crowds import CROWDS_KEY
from geokernel.contracts.spec_pointer import spec_key
from geokernel.geo.tiles import Tile, bounds
from geokernel.partition_spec.model import Partition, Spec, Worker
from lambdas.partitioner import handler as partitioner_handler
from lambdas.partitioner.logic import PartitionerDeps, process_snapshot
from lambdas.runtime.config import ConfigError, LambdaConfig
from lambdas.runtime.records import read_desired
from lambdas.runtime.s3 import ObjectStore
from tests.lambdas.conftest import CTX, Aws, load_event, snapshot_rows, t, write_test_snapshot
from tests.lambdas.partitioner_testkit import CELLS, deps, rewrite_manifest


def s3_event(key: str, bucket: str = "georebal-snapshots") -> dict[str, Any]:
    event = copy.deepcopy(load_event("s3_snapshot_manifest_created.json"))
    event["Records"][0]["s3"]["object"]["key"] = key
    event["Records"][0]["s3"]["bucket"]["name"] = bucket
    return event


def test_handler_publishes_first_spec_from_recorded_event(aws: Aws) -> None:
    # GIVEN a snapshot written by the aggregation job's writer and the recorded S3 event for its manifest
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    partitioner_handler.deps.cache_clear()
    # WHEN the handler runs
    out = partitioner_handler.handler(s3_event(key), CTX)
    # THEN spec v1 is written immutably and the desired pointer moved to it
    assert out["results"] == [{"manifest": key, "status": "published", "reason": out["results"][0]["reason"],
                               "code": "published", "version": 1}]
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]
    desired = read_desired(aws.control)
    assert desired is not None and desired.version == 1 and desired.spec_key == spec_key(1)
    spec = aws.specs.get(spec_key(1))
    assert spec.stream_name == "georebal-geo-v1"
    assert spec.total_load == pytest.approx(sum(CELLS.values()))
    assert all(w.load <= 1000 for w in spec.workers)


def test_published_spec_gives_each_worker_the_configured_shards(aws: Aws) -> None:
    # GIVEN SHARDS_PER_WORKER=2 in the Lambda's environment
    cfg = LambdaConfig.from_env({"SHARDS_PER_WORKER": "2"})
    d = deps(aws, shards_per_worker=cfg.shards_per_worker)
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    # WHEN the snapshot is processed
    assert process_snapshot(d, key).status == "published"
    # THEN every worker of the published spec owns 2 shards of a 2 * workers shard stream
    spec = aws.specs.get(spec_key(1))
    assert cfg.shards_per_worker == 2 and spec.shard_count == 2 * len(spec.workers)
    assert all(len(w.shard_keys) == 2 for w in spec.workers)
    # AND a bad value is refused naming the variable
    with pytest.raises(ConfigError, match=re.escape("SHARDS_PER_WORKER must be a positive integer, got '1.5'")):
        LambdaConfig.from_env({"SHARDS_PER_WORKER": "1.5"})


def test_recorded_event_with_url_encoded_key_is_decoded(aws: Aws) -> None:
    # GIVEN the recorded event as S3 sends it (key URL-encoded: '=' as %3D)
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    event = s3_event(key.replace("=", "%3D"))
    partitioner_handler.deps.cache_clear()
    # WHEN the handler runs
    out = partitioner_handler.handler(event, CTX)
    # THEN the decoded key was processed
    assert [r["manifest"] for r in out["results"]] == [key]


def test_duplicate_event_is_a_noop(aws: Aws) -> None:
    # GIVEN a snapshot already processed
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    d = deps(aws)
    assert process_snapshot(d, key).status == "published"
    # WHEN the same S3 event is delivered again
    again = process_snapshot(d, key)
    # THEN nothing new is published
    assert again.status == "duplicate"
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]
    assert read_desired(aws.control).version == 1  # type: ignore[union-attr]


def test_stale_snapshot_is_rejected(aws: Aws) -> None:
    # GIVEN a processed snapshot for the window ending at t+10
    new_key = write_test_snapshot(aws, snapshot_rows(CELLS), t(10))
    d = deps(aws)
    assert process_snapshot(d, new_key).status == "published"
    # WHEN an older window's snapshot arrives late
    old_key = write_test_snapshot(aws, snapshot_rows({(0, 0): 5000}), t(5))
    out = process_snapshot(d, old_key)
    # THEN it is rejected as stale and nothing is published
    assert (out.status, out.code) == ("rejected", "stale_snapshot")
    assert "window_end" in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]


def test_a_partial_window_builds_no_spec_and_the_next_complete_one_does(aws: Aws) -> None:
    # GIVEN the snapshot of a window the Spark job saw only part of (its run started mid-window, so its counts are a
    # fraction of the true load), then the next, complete window
    partial_key = write_test_snapshot(aws, snapshot_rows({(0, 0): 40}), t(5))
    rewrite_manifest(aws, partial_key, complete=False, partial_reason="job_started_mid_window")
    complete_key = write_test_snapshot(aws, snapshot_rows(CELLS), t(10))
    d = deps(aws)
    # WHEN the partial one is processed
    out = process_snapshot(d, partial_key)
    # THEN it is rejected like any snapshot that must not size a spec, naming why; nothing is published or marked
    assert (out.status, out.code) == ("rejected", "partial_window")
    assert "'job_started_mid_window'" in out.reason and partial_key in out.reason and "lower bound" in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [] and read_desired(aws.control) is None
    assert aws.control.get(ControlKey.SNAPSHOT) is None
    # AND the next, complete window publishes as usual
    assert process_snapshot(d, complete_key).status == "published"


@pytest.mark.parametrize(("change", "code", "needle"), [
    ({"format": "geo-rebalancer.snapshot/0"}, "malformed_manifest", "'geo-rebalancer.snapshot/0'"),
    ({"window_end": "yesterday"}, "malformed_manifest", "'yesterday'"),
    ({"rows": -1}, "malformed_manifest", "-1"),
    ({"checksum": "0" * 64}, "checksum_mismatch", "0000"),
    ({"rows": 999}, "row_count_mismatch", "999"),
    ({"files": "all of them"}, "malformed_manifest", "'all of them'"),
])
def test_malformed_manifest_is_rejected_with_the_bad_value(aws: Aws, change: dict[str, Any], code: str,
                                                            needle: str) -> None:
    # GIVEN a snapshot whose manifest has one bad field
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    rewrite_manifest(aws, key, **change)
    # WHEN it is processed
    out = process_snapshot(deps(aws), key)
    # THEN it is rejected with a reason naming the bad value; nothing published
    assert (out.status, out.code) == ("rejected", code)
    assert needle in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == []
    assert read_desired(aws.control) is None


def test_manifest_that_is_not_json_is_rejected(aws: Aws) -> None:
    # GIVEN a manifest object that is not JSON
    key = "snapshots/window_end=2026-11-21T10-05-00Z/_manifest.json"
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=key, Body=b"{not json")
    # WHEN processed
    out = process_snapshot(deps(aws), key)
    # THEN rejected as malformed, naming the object
    assert out.code == "malformed_manifest" and key in out.reason


def test_tampered_data_file_fails_sha256(aws: Aws) -> None:
    # GIVEN a data file changed after the manifest was written
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    manifest = json.loads(aws.clients.s3.get_object(Bucket=aws.cfg.snapshots_bucket, Key=key)["Body"].read())
    victim = manifest["files"][0]["key"]
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=victim, Body=b"quadkey,events,cost\n0,1,\n")
    # WHEN processed
    out = process_snapshot(deps(aws), key)
    # THEN the checksum mismatch names the file; the live spec stays
    assert out.code == "checksum_mismatch" and victim in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == []


def test_missing_data_file_is_rejected(aws: Aws) -> None:
    # GIVEN a manifest listing a file that is gone
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    manifest = json.loads(aws.clients.s3.get_object(Bucket=aws.cfg.snapshots_bucket, Key=key)["Body"].read())
    aws.clients.s3.delete_object(Bucket=aws.cfg.snapshots_bucket, Key=manifest["files"][-1]["key"])
    # WHEN processed
    out = process_snapshot(deps(aws), key)
    # THEN rejected as missing_file naming it
    assert out.code == "missing_file" and manifest["files"][-1]["key"] in out.reason


def test_empty_snapshot_is_rejected_and_live_spec_stays(aws: Aws) -> None:
    # GIVEN a live spec v1 and then an empty snapshot (no rows)
    d = deps(aws)
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    empty_key = write_test_snapshot(aws, [], t(10))
    # WHEN processed
    out = process_snapshot(d, empty_key)
    # THEN rejected as empty; v1 stays desired
    assert (out.status, out.code) == ("rejected", "empty_snapshot")
    assert read_desired(aws.control).version == 1  # type: ignore[union-attr]
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]


def test_bad_row_is_rejected_naming_the_line(aws: Aws) -> None:
    # GIVEN a data file with a bad quadkey but a manifest that matches its bytes
    body = b"quadkey,events,cost\n0123,5,\n01x3,7,\n"
    sha = hashlib.sha256(body).hexdigest()
    data_key = "snapshots/window_end=2026-11-21T10-05-00Z/data/part-0.csv"
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=data_key, Body=body)
    manifest = {"format": "geo-rebalancer.snapshot/1", "window_start": "2026-11-21T10:00:00Z",
                "window_end": "2026-11-21T10:05:00Z", "grid_zoom": 4, "zoom": 4, "refine_events": 500, "rows": 2,
                "total_events": 12, "has_cost": False, "batch_id": 1,
                "files": [{"key": data_key, "rows": 2, "sha256": sha}],
                "checksum": hashlib.sha256(sha.encode()).hexdigest()}
    key = "snapshots/window_end=2026-11-21T10-05-00Z/_manifest.json"
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=key, Body=json.dumps(manifest).encode())
    # WHEN processed
    out = process_snapshot(deps(aws), key)
    # THEN rejected as bad_rows, naming the value and line
    assert out.code == "bad_rows" and "'01x3'" in out.reason and "line 3" in out.reason


def test_spec_failing_validation_is_not_published(aws: Aws) -> None:
    # GIVEN a builder that returns a spec breaking the rules (a worker over max_load, no catch-all)
    def broken_build(counts: Any, max_load: float, **kw: Any) -> Spec:
        return Spec(version=kw["version"], max_load=max_load, partitions=(Partition("p0001", "w0001", ("0",), 5e6),),
                    workers=(Worker("w0001", 5e6, "1"),), stream_name=kw["stream_name"])

    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    # WHEN processed with it
    out = process_snapshot(deps(aws, build=broken_build), key)
    # THEN rejected as invalid_spec with the broken rules listed; nothing published
    assert out.code == "invalid_spec"
    assert "exceeds max_load" in out.reason and "catch-all" in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [] and read_desired(aws.control) is None


def test_existing_spec_object_is_never_overwritten(aws: Aws) -> None:
    # GIVEN an orphan spec object v1 (a publish that crashed before moving the pointer)
    orphan = b'{"orphan": true}'
    aws.clients.s3.put_object(Bucket=aws.cfg.specs_bucket, Key=spec_key(1), Body=orphan)
    # WHEN a snapshot is processed
    out = process_snapshot(deps(aws), write_test_snapshot(aws, snapshot_rows(CELLS), t(5)))
    # THEN the orphan is untouched and the spec took the next version
    assert (out.status, out.version) == ("published", 2)
    assert aws.clients.s3.get_object(Bucket=aws.cfg.specs_bucket, Key=spec_key(1))["Body"].read() == orphan
    assert aws.specs.get(spec_key(2)).version == 2


def test_missing_env_var_is_named(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no MAX_LOAD
    monkeypatch.delenv("MAX_LOAD")
    # WHEN the dependencies are built
    # THEN the error names the variable
    with pytest.raises(ConfigError, match="MAX_LOAD"):
        PartitionerDeps.from_config(LambdaConfig.from_env(), aws.clients)


def test_other_objects_in_the_event_are_ignored(aws: Aws) -> None:
    # GIVEN an S3 event for a data file, not a manifest
    partitioner_handler.deps.cache_clear()
    # WHEN handled / THEN nothing happens
    assert partitioner_handler.handler(s3_event("snapshots/window_end=x/data/part-0.csv"), CTX) == {"results": []}
    assert ObjectStore(aws.clients.s3, aws.cfg.specs_bucket).list_keys("specs/") == []


def test_a_published_spec_names_its_snapshot_window_end(aws: Aws) -> None:
    out = process_snapshot(deps(aws), write_test_snapshot(aws, snapshot_rows(CELLS), t(5)))
    assert aws.specs.get(str(out.spec_key)).source["window_end"] == "2026-11-21T10:05:00Z"


def _venue(dx: int, dy: int) -> tuple[float, float]:
    """(lat, lon) of the centre of the snapshot cell (dx, dy) of ``snapshot_rows``."""
    b = bounds(Tile(2000 + dx, 1300 + dy, 12))
    return (b.south + b.north) / 2, (b.west + b.east) / 2


def test_declared_crowds_in_the_specs_bucket_size_the_spec_before_the_crowd_shows(aws: Aws) -> None:
    # GIVEN a crowd of 2 events/s (600 a window) declared on the snapshot's coldest cell (50 events) from 10:10, the
    # start of the interval the spec decided on the 10:05 window serves (one window to live)
    lat, lon = _venue(20, 3)
    crowds = [{"name": "match", "lat": lat, "lon": lon, "start": "2026-11-21T10:10:00Z", "end": "2026-11-21T11:00:00Z",
               "load_per_s": 2.0}]
    aws.clients.s3.put_object(Bucket=aws.cfg.specs_bucket, Key=CROWDS_KEY, Body=json.dumps(crowds).encode())
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    # WHEN the snapshot is processed
    out = process_snapshot(deps(aws), key)
    # THEN the published spec holds the crowd's 600 where the window showed 50, and the decision says why
    assert out.status == "published"
    assert any("sized for declared crowds: match" in r for r in out.decision_reasons)
    spec = aws.specs.get(spec_key(1))
    assert spec.total_load == pytest.approx(sum(CELLS.values()) - 50 + 600, rel=0.02)


def test_a_bad_declared_crowds_file_rejects_the_snapshot_and_publishes_nothing(aws: Aws) -> None:
    # GIVEN a declared crowd whose load is misspelt
    body = json.dumps([{"lat": 51.5, "lon": -0.1, "start": 0, "end": 60, "load": 2}]).encode()
    aws.clients.s3.put_object(Bucket=aws.cfg.specs_bucket, Key=CROWDS_KEY, Body=body)
    key = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    # WHEN the snapshot is processed
    out = process_snapshot(deps(aws), key)
    # THEN it is rejected naming the object and the key, and no spec or pointer was written
    assert (out.status, out.code) == ("rejected", "bad_crowds")
    assert f"s3://{aws.cfg.specs_bucket}/{CROWDS_KEY}: crowd 0: unknown key 'load'" in out.reason
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [] and read_desired(aws.control) is None
