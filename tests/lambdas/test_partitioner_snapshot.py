"""The partitioner Lambda's snapshot reader: rows of every listed file, counted and passed on as bytes (moto)."""

from __future__ import annotations

import hashlib
import json

import pytest

from lambdas.partitioner.snapshot import SnapshotRejected, parse_manifest, read_rows
from lambdas.runtime.s3 import ObjectStore
from partitioner.load.read import read_snapshot_rows
from tests.lambdas.conftest import Aws

BASE = "snapshots/window_end=2026-11-21T10-05-00Z"


def _snapshot(aws: Aws, bodies: list[bytes], rows: list[int]) -> tuple[ObjectStore, str]:
    """Put data files with these bodies and a manifest claiming these row counts; return the store and key."""
    files = []
    for n, (body, count) in enumerate(zip(bodies, rows, strict=True)):
        key = f"{BASE}/data/part-b00000001-{n:05d}.csv"
        aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=key, Body=body)
        files.append({"key": key, "rows": count, "sha256": hashlib.sha256(body).hexdigest()})
    manifest = {"format": "geo-rebalancer.snapshot/1", "window_start": "2026-11-21T10:00:00Z",
                "window_end": "2026-11-21T10:05:00Z", "grid_zoom": 4, "zoom": 6, "refine_events": 500,
                "rows": sum(rows), "total_events": 1, "has_cost": False, "batch_id": 1, "files": files,
                "checksum": hashlib.sha256("".join(f["sha256"] for f in files).encode()).hexdigest()}
    key = f"{BASE}/_manifest.json"
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=key, Body=json.dumps(manifest).encode())
    return ObjectStore(aws.clients.s3, aws.cfg.snapshots_bucket), key


def test_rows_of_every_file_are_joined_under_one_header(aws: Aws) -> None:
    # GIVEN two files, one with CRLF line ends and no final newline, one with a blank and a whitespace-only line
    bodies = [b"quadkey,events,cost\r\n0123,5,\r\n0120,2,7.5", b"quadkey,events,cost\n0130,1,\n\n   \n0131,4,\n"]
    store, key = _snapshot(aws, bodies, [2, 2])
    manifest = parse_manifest(store.read(key) or b"", key)
    # WHEN read
    body = read_rows(store, manifest)
    # THEN one header, the four rows, blank lines not counted and whitespace-only lines dropped
    counts = read_snapshot_rows(body, key)
    assert counts.quadkeys == ("0123", "0120", "0130", "0131")
    assert counts.weights.tolist() == [5.0, 7.5, 1.0, 4.0]
    assert body.count(b"quadkey") == 1


@pytest.mark.parametrize("claimed", [1, 3])
def test_a_file_with_another_row_count_than_its_manifest_is_rejected(aws: Aws, claimed: int) -> None:
    # GIVEN a file of two rows whose manifest entry claims another count
    store, key = _snapshot(aws, [b"quadkey,events,cost\n0123,5,\n0120,2,\n"], [claimed])
    # WHEN read THEN rejected, naming the file and both counts
    with pytest.raises(SnapshotRejected, match=rf"part-b00000001-00000\.csv: 2 rows, the manifest says {claimed}"):
        read_rows(store, parse_manifest(store.read(key) or b"", key))


def test_files_with_different_headers_are_rejected(aws: Aws) -> None:
    store, key = _snapshot(aws, [b"quadkey,events,cost\n0123,5,\n", b"quadkey,events\n0120,2\n"], [1, 1])
    with pytest.raises(SnapshotRejected, match="differs from the first file's 'quadkey,events,cost'"):
        read_rows(store, parse_manifest(store.read(key) or b"", key))
