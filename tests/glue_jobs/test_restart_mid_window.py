"""A restart of the streaming job mid-window, on moto: without its checkpoint (what a code change did on AWS: a new run
on an empty checkpoint, read from the stream's tip) the window it started in is written partial and sizes no spec;
on its checkpoint (what a code change does now, and the local loop's ``spark-kill``) it resumes and the window is
whole.

The job runs in-process (the session's local Spark) on the local Kinesis source over a moto server, with
``starting_position=LATEST`` as the EMR job; "stop" is a query stop, as a cancelled job run. The partitioner's own
logic (:func:`lambdas.partitioner.logic.process_snapshot`) reads the snapshots from the same moto server.

Spark 4 only (the Python streaming data source); needs boto3 and moto.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from tests.glue_jobs.conftest import SPARK_MAJOR

if SPARK_MAJOR < 4:
    pytest.skip(f"the Python streaming data source needs Spark 4, have {pyspark.__version__}", allow_module_level=True)
boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

from geokernel.contracts.snapshot import manifest_key, snapshot_prefix  # noqa: E402
from geokernel.partition_spec.parse import spec_from_json  # noqa: E402
from glue_jobs.batch import JobConfig, start_streaming  # noqa: E402
from glue_jobs.quadkey_counts import kinesis_stream  # noqa: E402
from glue_jobs.transform import RollupSpec, WindowSpec  # noqa: E402
from lambdas.partitioner.logic import PartitionerDeps, process_snapshot  # noqa: E402
from lambdas.runtime.clients import make_clients  # noqa: E402
from lambdas.runtime.config import LambdaConfig  # noqa: E402
from local.aws import SerialMotoServer  # noqa: E402

pytestmark = pytest.mark.spark

REGION = "us-east-1"
WINDOW_S = 60
#: The window's true load: 20 events before the restart, 10 while the job is down, 10 after it is back.
TRUE_LOAD = 40
CFG = dict(window=WindowSpec(f"{WINDOW_S} seconds", None, "2 seconds"),
           rollup=RollupSpec(grid_zoom=10, zoom=14, refine_events=5), starting_position="LATEST")


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server on 127.0.0.1 (Kinesis, S3, DynamoDB)."""
    server = SerialMotoServer().start()
    yield server.url
    server.stop()


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _event(i: int, ts_s: float) -> bytes:
    return json.dumps({"event_id": f"e{i}", "entity_id": f"u{i % 5}", "ts": int(ts_s * 1000),
                       "lat": 52.5 + (i % 3) * 0.05, "lon": 13.4 + (i % 4) * 0.05}).encode()


class Job:
    """The aggregation job of one test: a stream, a snapshots bucket, runs on a checkpoint, a partitioner."""

    def __init__(self, spark: Any, endpoint: str, name: str, tmp: Path) -> None:
        self.spark, self.endpoint, self.name, self.tmp = spark, endpoint, name, tmp
        self.kinesis = _client("kinesis", endpoint)
        self.kinesis.create_stream(StreamName=name, ShardCount=1)
        s3, dynamodb = _client("s3", endpoint), _client("dynamodb", endpoint)
        for bucket in (f"{name}-snapshots", f"{name}-specs"):
            s3.create_bucket(Bucket=bucket)
        dynamodb.create_table(TableName=f"{name}-control", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        self.s3 = s3
        self.cfg = JobConfig(out=f"s3://{name}-snapshots", **CFG)  # type: ignore[arg-type]
        self.lines: list[str] = []
        self._query: Any = None

    def start(self, checkpoint: str) -> None:
        """Start a run on ``checkpoint`` (a directory under the test's tmp) and wait until it has taken its offsets."""
        raw = kinesis_stream(self.spark, self.name, self.endpoint, REGION, self.cfg.starting_position)
        self._query = start_streaming(raw, self.cfg, str(self.tmp / checkpoint), trigger="1 second",
                                      progress=self.lines.append)
        self.wait(lambda: self._query.lastProgress is not None, "the run's first trigger")

    def stop(self) -> None:
        self._query.stop()

    def put(self, events: list[bytes]) -> None:
        for i, data in enumerate(events):
            self.kinesis.put_record(StreamName=self.name, Data=data, PartitionKey=f"u{i % 5}")

    def read_events(self) -> int:
        """Valid events the job has read so far (its per-batch lines)."""
        return sum(int(n) for line in self.lines for n in re.findall(r" valid=(\d+)", line))

    def wait(self, done: Callable[[], bool], what: str, timeout_s: float = 240.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert self._query.isActive, f"the query stopped waiting for {what}: {self._query.exception()}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}; job lines: {self.lines[-5:]}"
            time.sleep(0.5)

    def manifest(self, window_start_s: float) -> dict[str, Any] | None:
        key = manifest_key(snapshot_prefix(_utc(window_start_s + WINDOW_S)))
        try:
            body = self.s3.get_object(Bucket=f"{self.name}-snapshots", Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return dict(json.loads(body))

    def partitioner(self) -> PartitionerDeps:
        cfg = LambdaConfig.from_env({"CONTROL_TABLE": f"{self.name}-control", "SNAPSHOTS_BUCKET": f"{self.name}-snapshots",
                                     "SPECS_BUCKET": f"{self.name}-specs", "MAX_LOAD": "1000", "GEO_PREFIX": self.name,
                                     "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION})
        return PartitionerDeps.from_config(cfg, make_clients(cfg))

    def spec_loads(self) -> list[float]:
        """``total_load`` of every spec the partitioner published."""
        objs = self.s3.list_objects_v2(Bucket=f"{self.name}-specs", Prefix="specs/").get("Contents", [])
        return [spec_from_json(self.s3.get_object(Bucket=f"{self.name}-specs", Key=o["Key"])["Body"].read(),
                               o["Key"]).total_load for o in objs]


def _utc(ts_s: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts_s, UTC)


def _restart_mid_window(job: Job, start: float, *, second_checkpoint: str) -> None:
    """Run 1 reads the first 20 events of the window [start, start + 60 s); it is stopped (a code change cancels it);
    10 events arrive while no run reads; run 2 starts on ``second_checkpoint``, then the last 10 and an event that
    closes the window (watermark 2 s past its end) arrive."""
    events = [_event(i, start + 1 + i) for i in range(TRUE_LOAD)]
    job.start("ckpt-1")
    job.put(events[:20])
    job.wait(lambda: job.read_events() >= 20, "run 1 to read the window's first 20 events")
    job.stop()
    assert job.manifest(start) is None  # the window was still open when run 1 stopped
    job.put(events[20:30])
    job.start(second_checkpoint)
    job.put([*events[30:], _event(99, start + 3 * WINDOW_S)])
    job.wait(lambda: job.manifest(start) is not None, "run 2 to write the window's snapshot")
    job.stop()


def test_a_restart_without_its_checkpoint_marks_the_window_partial_and_no_spec_is_built_from_it(
        spark, moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    # GIVEN the job (from the stream's tip, as on EMR) and a window that began a minute before now
    job = Job(spark, moto_endpoint, "restart-fresh", tmp_path)
    start = (time.time() // WINDOW_S - 1) * WINDOW_S
    # WHEN it is restarted mid-window on an empty checkpoint (what a code change did on AWS)
    _restart_mid_window(job, start, second_checkpoint="ckpt-2")
    # THEN the partitioner builds no spec from the window (its 10 events of 40 would undersize one)
    manifest = job.manifest(start)
    assert manifest is not None
    out = process_snapshot(job.partitioner(), manifest_key(snapshot_prefix(_utc(start + WINDOW_S))))
    assert (out.status, out.code) == ("rejected", "partial_window"), (
        f"{out.status} v{out.version} from a window of {manifest['total_events']} events (true load {TRUE_LOAD}): "
        f"{out.reason}")
    assert job.spec_loads() == []
    # AND that is because the window is marked partial: run 2 read only the 10 events after it started
    assert (manifest["complete"], manifest["partial_reason"]) == (False, "job_started_mid_window")
    assert manifest["total_events"] == 10
    assert any("partial=job_started_mid_window" in line for line in job.lines)


def test_a_restart_on_its_checkpoint_resumes_and_the_window_sizes_a_spec_at_its_true_load(
        spark, moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    # GIVEN the job (from the stream's tip, as on EMR) and a window that begins after its first run starts reading
    job = Job(spark, moto_endpoint, "restart-resume", tmp_path)
    start = (time.time() // WINDOW_S + 2) * WINDOW_S
    # WHEN it is restarted mid-window on its checkpoint (a code change now; the local loop's spark-kill)
    _restart_mid_window(job, start, second_checkpoint="ckpt-1")
    # THEN run 2 resumed from run 1's offsets and open windows: the window is whole, with the events put while down
    manifest = job.manifest(start)
    assert manifest is not None and "complete" not in manifest and manifest["total_events"] == TRUE_LOAD
    # AND the partitioner sizes a spec from it at its true load
    out = process_snapshot(job.partitioner(), manifest_key(snapshot_prefix(_utc(start + WINDOW_S))))
    assert out.status == "published", out.reason
    assert job.spec_loads() == [pytest.approx(TRUE_LOAD)]
