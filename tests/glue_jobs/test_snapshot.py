"""Tests for glue_jobs.snapshot: manifest last, idempotent retries, checksums, local and S3 storage."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.contracts.snapshot import MANIFEST_NAME, SnapshotRow, snapshot_prefix
from glue_jobs.snapshot import (
    LocalStorage,
    SnapshotError,
    SnapshotMeta,
    read_snapshot,
    storage_for,
    write_quarantine,
    write_snapshot,
)
from partitioner.load.read import read_snapshot_rows

META = SnapshotMeta(datetime(2026, 1, 2, 3, 4, 0, tzinfo=UTC), datetime(2026, 1, 2, 3, 5, 0, tzinfo=UTC),
                    grid_zoom=2, zoom=3, refine_events=10, batch_id=7)
ROWS = [SnapshotRow("00", 30, None), SnapshotRow("000", 12, None), SnapshotRow("001", 18, 20.5),
        SnapshotRow("01", 5, None), SnapshotRow("13", 1, 0.25)]


class RecordingStorage(LocalStorage):
    """LocalStorage that logs the order of puts and can fail on a chosen key."""

    def __init__(self, root: Path, fail_on: str | None = None) -> None:
        super().__init__(root)
        object.__setattr__(self, "puts", [])
        object.__setattr__(self, "fail_on", fail_on)

    def put(self, key: str, body: bytes, content_type: str = "application/octet-stream") -> None:
        if self.fail_on and key.endswith(self.fail_on):
            raise OSError(f"injected failure writing {key}")
        self.puts.append(key)
        super().put(key, body, content_type)


def test_data_files_are_written_before_the_manifest(tmp_path: Path) -> None:
    # GIVEN a storage that records write order, and rows split over 2 files
    storage = RecordingStorage(tmp_path)
    # WHEN a snapshot is written
    result = write_snapshot(storage, ROWS, META, rows_per_file=3)
    # THEN both data files come first and the manifest last, under the contract's prefix
    assert storage.puts[-1] == snapshot_prefix(META.window_end) + MANIFEST_NAME
    assert storage.puts[:-1] == [f"snapshots/window_end=2026-01-02T03-05-00Z/data/part-b00000007-0000{i}.csv"
                                 for i in range(2)]
    assert result.rows == 5 and result.total_events == 36 and result.rows_per_zoom == {2: 3, 3: 2}


def test_manifest_fields_and_checksum_are_verifiable(tmp_path: Path) -> None:
    # GIVEN a written snapshot
    storage = LocalStorage(tmp_path)
    write_snapshot(storage, ROWS, META, rows_per_file=3)
    manifest = json.loads((tmp_path / "snapshots/window_end=2026-01-02T03-05-00Z" / MANIFEST_NAME).read_text())
    # WHEN the manifest is checked by hand
    hashes = [hashlib.sha256((tmp_path / f["key"]).read_bytes()).hexdigest() for f in manifest["files"]]
    # THEN it has every contract field, and the checksum is sha256 of the concatenated file hashes
    assert manifest["format"] == "geo-rebalancer.snapshot/1"
    assert (manifest["window_start"], manifest["window_end"]) == ("2026-01-02T03:04:00Z", "2026-01-02T03:05:00Z")
    assert (manifest["grid_zoom"], manifest["zoom"], manifest["refine_events"]) == (2, 3, 10)
    assert (manifest["rows"], manifest["total_events"], manifest["has_cost"], manifest["batch_id"]) == (5, 36, True, 7)
    assert hashes == [f["sha256"] for f in manifest["files"]]
    assert manifest["checksum"] == hashlib.sha256("".join(hashes).encode()).hexdigest()


def test_read_back_feeds_the_partitioner(tmp_path: Path) -> None:
    # GIVEN a written snapshot
    storage = LocalStorage(tmp_path)
    write_snapshot(storage, ROWS, META, rows_per_file=2)
    # WHEN read back (verified) and parsed by partitioner.load.counts
    manifest, text = read_snapshot(storage, snapshot_prefix(META.window_end))
    counts = read_snapshot_rows(text, "test", use_cost=False)
    # THEN the partitioner sees the grid total, and the cost where present
    assert manifest["rows"] == 5
    assert counts.total == 36
    assert read_snapshot_rows(text, "test").total == pytest.approx(30 + 5 + 0.25)


def test_retry_of_the_same_batch_is_idempotent(tmp_path: Path) -> None:
    # GIVEN a snapshot written once
    storage = RecordingStorage(tmp_path)
    write_snapshot(storage, ROWS, META)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # WHEN the same batch is written again
    again = write_snapshot(storage, iter(ROWS), META)
    # THEN nothing changes and nothing is rewritten
    assert again.skipped
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert len(storage.puts) == 2


def test_a_crash_before_the_manifest_leaves_no_snapshot_and_a_retry_completes_it(tmp_path: Path) -> None:
    # GIVEN a writer that dies when writing the manifest
    with pytest.raises(OSError, match="injected"):
        write_snapshot(RecordingStorage(tmp_path, fail_on=MANIFEST_NAME), ROWS, META)
    # WHEN a reader looks, THEN there is no snapshot (data files alone are never read)
    with pytest.raises(SnapshotError, match="no manifest"):
        read_snapshot(LocalStorage(tmp_path), snapshot_prefix(META.window_end))
    # AND WHEN the batch is retried, THEN the snapshot is complete and valid
    write_snapshot(LocalStorage(tmp_path), ROWS, META)
    manifest, _ = read_snapshot(LocalStorage(tmp_path), snapshot_prefix(META.window_end))
    assert manifest["rows"] == 5


def test_a_later_batch_rewriting_a_window_keeps_the_old_snapshot_readable_until_its_manifest_lands(tmp_path: Path) -> None:
    # GIVEN a snapshot from batch 7, and batch 8 rewriting the same window but dying before its manifest
    write_snapshot(LocalStorage(tmp_path), ROWS, META)
    later = META._replace(batch_id=8)
    with pytest.raises(OSError):
        write_snapshot(RecordingStorage(tmp_path, fail_on=MANIFEST_NAME), ROWS[:2], later)
    # WHEN read, THEN the reader still gets batch 7's complete, verified snapshot
    manifest, _ = read_snapshot(LocalStorage(tmp_path), snapshot_prefix(META.window_end))
    assert (manifest["batch_id"], manifest["rows"]) == (7, 5)


def test_tampered_data_is_detected(tmp_path: Path) -> None:
    # GIVEN a written snapshot whose data file is then modified
    storage = LocalStorage(tmp_path)
    write_snapshot(storage, ROWS, META)
    part = next(tmp_path.rglob("part-*.csv"))
    part.write_text(part.read_text().replace("30", "31"))
    # WHEN / THEN reading it fails naming the file
    with pytest.raises(SnapshotError, match="sha256"):
        read_snapshot(storage, snapshot_prefix(META.window_end))


def test_unsorted_rows_are_refused(tmp_path: Path) -> None:
    # GIVEN rows out of quadkey order / WHEN written / THEN a clear error names both quadkeys
    with pytest.raises(SnapshotError, match="'01' after '13'"):
        write_snapshot(LocalStorage(tmp_path), [ROWS[4], ROWS[3]], META)


def test_quarantine_records_are_json_lines_with_the_contract_fields(tmp_path: Path) -> None:
    # GIVEN two quarantine records
    recs = [QuarantineRecord("bad_type: lat must be a JSON number, got 'x'", '{"lat": "x"}', "f:1", "2026-01-01T00:00:00Z"),
            QuarantineRecord("unparsable_json: not valid JSON: {", "{", "f:2", "2026-01-01T00:00:00Z")]
    # WHEN written for batch 3
    uris = write_quarantine(LocalStorage(tmp_path), recs, 3)
    # THEN one JSON-lines file holds both, with reason, raw, source and quarantined_at
    assert uris == [str(tmp_path / "quarantine/batch=00000003/part-00000.jsonl")]
    lines = [json.loads(line) for line in Path(uris[0]).read_text().splitlines()]
    assert [set(d) for d in lines] == [{"reason", "raw", "source", "quarantined_at"}] * 2
    assert lines[1]["raw"] == "{"


def test_storage_for_refuses_unknown_schemes() -> None:
    # GIVEN / WHEN / THEN an unsupported URI is refused, naming it
    with pytest.raises(ValueError, match="'gs://b/x'"):
        storage_for("gs://b/x")


def test_s3_storage_writes_the_same_layout_in_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an S3 bucket in moto (in-process) and a prefixed S3 storage
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="snaps")
        storage = storage_for("s3://snaps/pre", s3_client=s3)
        # WHEN a snapshot is written twice (retry)
        first = write_snapshot(storage, ROWS, META, rows_per_file=3)
        second = write_snapshot(storage, ROWS, META, rows_per_file=3)
        # THEN the keys follow the contract, the manifest lists full keys, and it reads back verified
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="snaps")["Contents"])
        assert keys == ["pre/snapshots/window_end=2026-01-02T03-05-00Z/_manifest.json",
                        "pre/snapshots/window_end=2026-01-02T03-05-00Z/data/part-b00000007-00000.csv",
                        "pre/snapshots/window_end=2026-01-02T03-05-00Z/data/part-b00000007-00001.csv"]
        manifest, text = read_snapshot(storage, first.prefix)
        assert manifest["files"][0]["key"].startswith("pre/snapshots/")
        assert first.manifest_uri == "s3://snaps/pre/snapshots/window_end=2026-01-02T03-05-00Z/_manifest.json"
        assert second.skipped and text.count("\n") == 6
