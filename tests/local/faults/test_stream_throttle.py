"""local.faults.stream_throttle and what it relies on: the local AWS's Kinesis throttle hook
(:class:`local.kinesis_faults.KinesisThrottle`: whole calls refused, or single records of a put failed), the router's
put tried once, a worker's read throttled past its retries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from geo_service.adapters.aws import make_clients as make_worker_clients
from geo_service.pipeline.consumer import ShardConsumer, shards_for_hash_key
from geokernel.contracts.stream import StreamManifest
from lambdas.router.handler import put_client
from lambdas.runtime.clients import make_clients
from lambdas.runtime.config import LambdaConfig
from lambdas.runtime.kinesis import GeoStreams, PutEntry
from local.aws import DUMMY_CREDENTIALS, REGION, SerialMotoServer
from local.faults.stream_throttle import StreamThrottle


@pytest.fixture(scope="module")
def server() -> Iterator[SerialMotoServer]:
    """A local AWS (moto behind the serial server) with a geo stream and an ingest stream."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in DUMMY_CREDENTIALS.items():
            mp.setenv(key, value)  # the router's put client reads them, as in a Lambda
        srv = SerialMotoServer().start()
        k = kinesis(srv.url, attempts=1)
        for name in ("t-geo-v1", "t-ingest"):
            k.create_stream(StreamName=name, ShardCount=1)
        yield srv
        srv.stop()


def kinesis(url: str, attempts: int) -> Any:
    return boto3.client("kinesis", endpoint_url=url, region_name=REGION, aws_access_key_id="testing",
                        aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}))


def put(k: Any, stream: str, n: int = 1) -> dict[str, Any]:
    return dict(k.put_records(StreamName=stream, Records=[{"Data": b"x", "PartitionKey": "e"}] * n))


def test_partial_puts_write_the_other_records_and_answer_each_in_request_order(server: SerialMotoServer) -> None:
    # GIVEN half the records of each put to t-geo-v* failed (a seeded draw)
    k = kinesis(server.url, attempts=1)
    shard = "shardId-000000000000"
    before = k.get_shard_iterator(StreamName="t-geo-v1", ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    server.throttle.start("t-geo-v", 0.5, 60.0, seed=3, partial=True)
    try:
        # WHEN 40 numbered records are put in one request
        resp = k.put_records(StreamName="t-geo-v1", Records=[{"Data": str(i).encode(), "PartitionKey": "e"}
                                                              for i in range(40)])
    finally:
        server.throttle.until = 0.0
    # THEN the answer has one result per record in request order: some failed with the documented error, counted,
    # and exactly the others are in the stream, in order (a failure does not stop the later records)
    failed = [i for i, r in enumerate(resp["Records"]) if r.get("ErrorCode")]
    assert 0 < len(failed) < 40 and resp["FailedRecordCount"] == len(failed)
    assert {resp["Records"][i]["ErrorCode"] for i in failed} == {"ProvisionedThroughputExceededException"}
    got = [int(r["Data"]) for r in k.get_records(ShardIterator=before)["Records"]]
    assert got == [i for i in range(40) if i not in failed]
    # AND a put to another stream is not touched, and whole calls are never refused in this mode
    assert put(k, "t-ingest", 5)["FailedRecordCount"] == 0


def test_the_throttle_refuses_a_share_of_geo_stream_puts_and_reads_with_the_documented_error(
        server: SerialMotoServer) -> None:
    k = kinesis(server.url, attempts=1)
    it = k.get_shard_iterator(StreamName="t-geo-v1", ShardId="shardId-000000000000",
                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    # GIVEN every call on t-geo-v* refused (the hook's counts go on across starts: a fault takes its deltas)
    refused_before = server.throttle.refused
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        # THEN a put and a read on the geo stream get ProvisionedThroughputExceededException, HTTP 400
        for call in (lambda: put(k, "t-geo-v1"), lambda: k.get_records(ShardIterator=it)):
            with pytest.raises(ClientError) as err:
                call()
            assert err.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
            assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        # AND other streams and other calls pass
        assert put(k, "t-ingest")["FailedRecordCount"] == 0
        k.describe_stream_summary(StreamName="t-geo-v1")
        assert server.throttle.refused - refused_before == 2 and server.throttle.first_refused_at is not None
        # WHEN half the calls are refused THEN some pass and some do not
        server.throttle.start("t-geo-v", 0.5, 60.0, seed=3)
        ok = 0
        for _ in range(20):
            try:
                put(k, "t-geo-v1")
                ok += 1
            except ClientError:
                pass
        assert 0 < ok < 20
    finally:
        server.throttle.until = 0.0
    # WHEN the throttle ended THEN every call passes
    assert put(k, "t-geo-v1")["FailedRecordCount"] == 0
    assert k.get_records(ShardIterator=it)["Records"]


def test_router_puts_are_tried_once_so_a_throttled_put_is_re_delivered_not_retried_late(
        server: SerialMotoServer) -> None:
    # GIVEN the geo stream throttled, and the router's put client
    cfg = LambdaConfig.from_env({"AWS_ENDPOINT_URL": server.url, "AWS_REGION": REGION})
    entries = [PutEntry(b"x", "e", "1")] * 3
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        before = server.throttle.refused
        # WHEN the router puts THEN the put fails at once (one call), every entry reported failed
        assert GeoStreams(put_client(cfg)).put_records("t-geo-v1", entries) == [0, 1, 2]
        assert server.throttle.refused - before == 1
        # AND the clients the rest of the Lambdas use would have retried (and landed seconds later)
        before = server.throttle.refused
        GeoStreams(make_clients(cfg).kinesis).put_records("t-geo-v1", entries)
        assert server.throttle.refused - before > 1
    finally:
        server.throttle.until = 0.0


def test_a_worker_read_throttled_past_its_retries_reads_nothing_and_is_not_caught_up(
        server: SerialMotoServer) -> None:
    # GIVEN a record on the geo stream and a worker's consumer whose client tries once
    k = kinesis(server.url, attempts=1)
    put(k, "t-geo-v1")
    manifest = StreamManifest(1, "t-geo-v1", GeoStreams(k).shards("t-geo-v1"))
    consumer = ShardConsumer(k, "t-geo-v1", shards_for_hash_key(manifest, "1"), {}, min_interval_s=0.0)
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        # WHEN it polls under the throttle THEN nothing is read and the shard is not caught up (no drain)
        batch = consumer.poll()
        assert batch.records == () and batch.millis_behind_latest > 0 and not batch.at_end
    finally:
        server.throttle.until = 0.0
    # WHEN the throttle ended THEN the same consumer reads on
    assert consumer.poll().records



def test_a_worker_makes_one_getrecords_call_per_poll_while_throttled(server: SerialMotoServer) -> None:
    # GIVEN a worker's own clients (geo_service.adapters.aws.make_clients) and a record on the geo stream
    clients = make_worker_clients(server.url, REGION)
    put(kinesis(server.url, attempts=1), "t-geo-v1")
    manifest = StreamManifest(1, "t-geo-v1", GeoStreams(clients.kinesis).shards("t-geo-v1"))
    consumer = ShardConsumer(clients.kinesis, "t-geo-v1", shards_for_hash_key(manifest, "1"), {}, min_interval_s=0.0,
                             reads=clients.kinesis_reads)
    consumer.poll()  # the iterator made before the throttle
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        # WHEN it polls three times under the throttle
        before = server.throttle.refused
        batches = [consumer.poll() for _ in range(3)]
        # THEN each poll made one GetRecords call (no SDK retries adding calls to a throttled shard), read nothing
        assert server.throttle.refused - before == 3
        assert all(b.records == () and b.millis_behind_latest > 0 for b in batches)
    finally:
        server.throttle.until = 0.0
    # AND after the throttle the same consumer reads on
    put(kinesis(server.url, attempts=1), "t-geo-v1")
    assert consumer.poll().records


class Throttle:
    def __init__(self) -> None:
        self.until = 0.0
        self.refused = self.passed = 0
        self.first_refused_at: float | None = None
        self.started: list[tuple[str, float, float]] = []

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0, *,
              partial: bool = False) -> None:
        self.started.append((stream_prefix, share, duration_s))
        self.until = 100.0 + duration_s


def test_stream_throttle_recovers_when_every_event_sent_before_its_end_came_out() -> None:
    # GIVEN a live spec and a throttle armed 5 s later for 10 s
    now = [90.0]
    sent = ["a", "b"]
    out: dict[str, float] = {}
    t = Throttle()
    fault = StreamThrottle(t, "p-geo-v", lambda: sent, lambda: out, lambda: 4, lambda: "done", lambda: 90.0, delay_s=5.0,
                           duration_s=10.0, share=0.5, deadline_s=60.0, clock=lambda: now[0])
    fault.poll()
    now[0] = 100.0
    fault.poll()
    assert t.started == [("p-geo-v", 0.5, 10.0)] and fault.record.injected_at == 100.0
    # WHEN a call was refused THEN detected; while it lasts, not recovered
    t.first_refused_at, t.refused, t.passed = 100.5, 3, 5
    now[0] = 105.0
    fault.poll()
    assert fault.record.detected_at == 100.5 and not fault.record.recovered
    # WHEN it ended but an event sent before the end is not out THEN not recovered; once out, recovered
    now[0] = 111.0
    fault.poll()
    sent.append("c")  # sent after the end: not waited for
    out["a"] = 108.0
    fault.poll()
    assert not fault.record.recovered and "1 of 2 events sent before the end not out yet (e.g. 'b')" in fault.record.did
    out["b"] = 109.5  # written before the throttle's end at 110: recovery no earlier than the end
    fault.poll()
    assert fault.record.recovered_at == 110.0 and "3 of 8 calls refused" in fault.record.did


def test_stream_throttle_recovery_is_dated_by_the_last_output_written_not_the_late_read() -> None:
    # GIVEN a throttle from 100 to 110 and both events sent before its end
    now = [100.0]
    sent, out = ["a", "b"], {}
    t = Throttle()
    fault = StreamThrottle(t, "p-geo-v", lambda: sent, lambda: out, lambda: 0, lambda: "done", lambda: 100.0, delay_s=0.0,
                           duration_s=10.0, share=0.5, deadline_s=60.0, clock=lambda: now[0])
    fault.poll()
    t.first_refused_at = 100.2
    # WHEN the last one was written at 114 but the loop read the output only at 125
    now[0], out["a"], out["b"] = 125.0, 109.0, 114.0
    fault.poll()
    # THEN recovered at 114
    assert fault.record.recovered_at == 114.0
