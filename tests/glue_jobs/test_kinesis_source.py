"""Tests for glue_jobs.kinesis_source and the streaming CLI mode, against a moto server on 127.0.0.1.

Spark 4 only (Python data source API); needs boto3 and moto (absent from the Spark 3.5 venv).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.glue_jobs.conftest import SPARK_MAJOR

if SPARK_MAJOR < 4:
    pytest.skip(f"the Python streaming data source needs Spark 4, have {pyspark.__version__}", allow_module_level=True)
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

from glue_jobs.kinesis_source import KinesisStreamReader  # noqa: E402
from glue_jobs.snapshot import read_snapshot, storage_for  # noqa: E402
from local.aws import SerialMotoServer  # noqa: E402
from partitioner.load.read import read_snapshot_rows  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
BASE_MS = 1_700_000_040_000  # a multiple of 10 s


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server on 127.0.0.1 (Kinesis and S3)."""
    server = SerialMotoServer().start()
    yield server.url
    server.stop()


def _client(service: str, endpoint: str):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _event(i: int, ms: int) -> str:
    return json.dumps({"event_id": f"e{i}", "entity_id": f"u{i % 4}", "ts": ms, "lat": 48.85 + (i % 7) * 1e-3,
                       "lon": 2.35 + (i % 5) * 1e-3})


def _make_stream(endpoint: str, name: str, records: list[str | bytes]) -> None:
    kinesis = _client("kinesis", endpoint)
    kinesis.create_stream(StreamName=name, ShardCount=2)
    for i, rec in enumerate(records):
        kinesis.put_record(StreamName=name, Data=rec.encode() if isinstance(rec, str) else rec,
                           PartitionKey=f"u{i % 4}")


def _kpl(events: list[str]) -> bytes:
    """``events`` as one KPL aggregated record (aws_kinesis_agg, the real encoder)."""
    from aws_kinesis_agg.aggregator import RecordAggregator

    agg = RecordAggregator()
    for e in events:
        agg.add_user_record(json.loads(e)["entity_id"], e.encode())
    return bytes(agg.clear_and_get().get_contents()[2])


def test_reader_reads_every_shard_and_replays_between_offsets_exactly(moto_endpoint: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # GIVEN a 2-shard stream with 12 records
    records = [_event(i, BASE_MS + i) for i in range(12)]
    _make_stream(moto_endpoint, "reader-test", records)
    reader = KinesisStreamReader({"stream_name": "reader-test", "endpoint_url": moto_endpoint,
                                  "region": "us-east-1", "max_records_per_shard": "4"})
    # WHEN read batch by batch from the initial offset until nothing is left
    offset, batches = reader.initialOffset(), []
    while True:
        rows, end = reader.read(offset)
        rows = list(rows)
        if not rows:
            break
        batches.append((offset, end, rows))
        offset = end
    # THEN every record is read once, at most 4 per shard per batch, with stream/shard/seq sources
    values = [r[0] for _, _, rows in batches for r in rows]
    assert sorted(values) == sorted(r.encode() for r in records)
    assert all(len([r for r in rows if r[3] == s]) <= 4 for _, _, rows in batches for s in {r[3] for r in rows})
    assert all(r[1] == f"reader-test/{r[3]}/{r[4]}" for _, _, rows in batches for r in rows)
    # AND a replay between two offsets returns exactly that batch's records
    for start, end, rows in batches:
        assert sorted(r[1] for r in reader.readBetweenOffsets(start, end)) == sorted(r[1] for r in rows)


def test_reader_rejects_bad_options() -> None:
    # GIVEN / WHEN / THEN missing stream names and bad limits are refused, naming the value
    with pytest.raises(ValueError, match="stream_name"):
        KinesisStreamReader({})
    with pytest.raises(ValueError, match="'many'"):
        KinesisStreamReader({"stream_name": "s", "max_records_per_shard": "many"})


def test_streaming_cli_from_kinesis_to_s3_in_moto_and_clean_sigterm(moto_endpoint: str, tmp_path: Path) -> None:
    # GIVEN a stream with 40 events in window [0, 10 s) (10 one per record, 30 in two KPL aggregated records),
    # one at 30 s (moves the watermark past it), one bad record, and an S3 bucket for snapshots
    window = [_event(i, BASE_MS + i * 200) for i in range(40)]
    records = [*window[:10], _kpl(window[10:25]), _kpl(window[25:]), _event(99, BASE_MS + 30_000), "{oops"]
    _make_stream(moto_endpoint, "ingest-cli", records)
    s3 = _client("s3", moto_endpoint)
    s3.create_bucket(Bucket="snapshots")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "glue_jobs.quadkey_counts", "--kinesis-stream", "ingest-cli",
           "--endpoint-url", moto_endpoint, "--out", "s3://snapshots", "--trigger", "1s", "--window", "10s",
           "--watermark", "5s", "--grid-zoom", "10", "--zoom", "16", "--refine-events", "10",
           "--checkpoint", str(tmp_path / "ckpt")]
    # WHEN the streaming CLI runs until the first window's manifest lands in S3, then gets SIGTERM
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    storage = storage_for("s3://snapshots", s3_client=s3)
    manifest_key = "snapshots/window_end=2023-11-14T22-14-10Z/_manifest.json"
    quarantine: list[str] = []
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and proc.poll() is None:
            quarantine = storage.list("quarantine/")
            if storage.get(manifest_key) is not None and quarantine:
                break
            time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    # THEN it exits 0 after printing progress, the snapshot is complete and verified, the bad record quarantined
    assert proc.returncode == 0, output[-3000:]
    assert "[aggregation] streaming from kinesis stream 'ingest-cli'" in output
    assert "snapshot s3://snapshots/snapshots/window_end=2023-11-14T22-14-10Z/_manifest.json" in output
    assert "[aggregation] stopped" in output
    manifest, text = read_snapshot(storage, "snapshots/window_end=2023-11-14T22-14-10Z/")
    assert manifest["total_events"] == 40 and manifest["zoom"] == 16
    assert read_snapshot_rows(text, "s3").total == 40
    bad = [json.loads(line) for key in quarantine for line in (storage.get(key) or b"").decode().splitlines()]
    assert [b["raw"] for b in bad] == ["{oops"]
    assert bad[0]["source"].startswith("ingest-cli/shardId-")
