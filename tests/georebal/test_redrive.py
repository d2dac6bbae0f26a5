"""georebal redrive against moto: the acceptance check of issue #57 (a router batch that failed, its failure message
as Lambda sends it, the redrive, then the router routes every record: 0 lost), ranges older than the retention, and
the messages kept or deleted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from geo_service.pipeline.consumer import KinesisRecord
from lambdas.router.routing import ActiveSpecCache, InputRecord, RoutingTable, route_batch
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from local.event_source import on_failure_record
from tests.georebal.day_after import (
    STACK,
    Deployment,
    FakeClock,
    Refusing,
    WithClient,
    day_spec,
    events,
    make_deployment,
    put_events,
)

NOW = time.time()
FAST = ("--wait", "0")


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    with mock_aws():
        yield make_deployment()


def stream_arn(deployment: Deployment) -> str:
    return str(deployment.client("kinesis").describe_stream_summary(
        StreamName=deployment.ingest)["StreamDescriptionSummary"]["StreamARN"])


def shard_records(deployment: Deployment, shard_id: str) -> list[KinesisRecord]:
    return [KinesisRecord.from_get_records(shard_id, r) for r in deployment.read_shard(deployment.ingest, shard_id)]


def router(deployment: Deployment) -> tuple[RoutingTable | None, GeoStreams, QuarantineSink]:
    """What the router routes with now: the active spec (None before the first flip), the geo streams, quarantine."""
    out = deployment.outputs
    cache = ActiveSpecCache(ControlTable(deployment.client("dynamodb"), out["ControlTable"]),
                            SpecStore(deployment.client("s3"), out["SpecsBucket"]))
    return (cache.current(), GeoStreams(deployment.client("kinesis")),
            QuarantineSink(deployment.client("s3"), out["QuarantineBucket"], "router"))


def route(deployment: Deployment, records: Sequence[KinesisRecord]) -> tuple[int, tuple[str, ...]]:
    """One router batch of ``records`` (the router's ``route_batch``): routed count, failed item ids."""
    batch = [InputRecord(r.sequence_number, r.data, f"{deployment.ingest}/{r.shard_id}/{r.sequence_number}")
             for r in records]
    result = route_batch(batch, *router(deployment))
    return result.routed, result.failed_ids


def fail_batch(deployment: Deployment, records: Sequence[KinesisRecord]) -> dict[str, Any]:
    """The router fails the batch (no spec is active: every valid record fails) until the event source gives up,
    then the event source sends its range to the failure queue (the local twin's message)."""
    routed, failed = route(deployment, records)
    assert routed == 0 and list(failed) == [r.sequence_number for r in records]
    message = on_failure_record(stream_arn(deployment), records[0].shard_id, records, "retry attempts exhausted", 2)
    deployment.client("sqs").send_message(QueueUrl=deployment.queue, MessageBody=json.dumps(message))
    return message


def queue_counts(deployment: Deployment) -> tuple[int, int]:
    attrs = deployment.client("sqs").get_queue_attributes(
        QueueUrl=deployment.queue, AttributeNames=["ApproximateNumberOfMessages",
                                                   "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_a_failed_router_batch_redriven_is_routed_whole(deployment: Deployment,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 40 events of 8 entities in the ingest stream (2 shards) before any spec is active, and the router's
    # batch of each shard failed until the event source gave up: two failure messages in the queue
    evs = events(40, entities=8)
    put_events(deployment.client("kinesis"), deployment.ingest, evs)
    shards = {s: shard_records(deployment, s) for s in deployment.read_stream(deployment.ingest)}
    messages = [fail_batch(deployment, records) for records in shards.values() if records]
    assert len(messages) == 2
    # AND a spec went live since
    deployment.activate(day_spec())
    # WHEN the failure queue is redriven
    status = deployment.run("redrive", "--stack", STACK, *FAST, clock=FakeClock(NOW))
    out = capsys.readouterr().out.splitlines()
    # THEN each message's records are at the end of their shard again, same data and keys, in order
    assert status == 0
    for shard, records in shards.items():
        now = shard_records(deployment, shard)
        assert [(r.partition_key, r.data) for r in now] == [(r.partition_key, r.data) for r in records] * 2
    # AND each message was deleted after its records were put, with one line each and a summary
    assert queue_counts(deployment) == (0, 0)
    for message in messages:
        info = message["KinesisBatchInfo"]
        assert any(line.endswith(f"{info['shardId']} {info['startSequenceNumber']}..{info['endSequenceNumber']}: "
                                 f"{info['batchSize']} record(s) redriven to 'dayafter-ingest', deleted")
                   for line in out)
    assert out[-1] == (f"redrive: 2 message(s) from {deployment.queue}: 40 record(s) redriven; 2 whole, "
                       "0 not whole (kept)")
    # AND the router routes the redriven records with the live spec: every event reaches the geo stream, 0 lost
    for shard, records in shards.items():
        routed, failed = route(deployment, shard_records(deployment, shard)[len(records):])
        assert routed == len(records) and not failed
    geo = [json.loads(r["Data"])["event_id"] for recs in deployment.read_stream("dayafter-geo-v3").values()
           for r in recs]
    assert sorted(geo) == sorted(e["event_id"] for e in evs)


def test_keep_messages_redrives_and_leaves_the_message(deployment: Deployment,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN one failure message WHEN redriven with --keep-messages
    put_events(deployment.client("kinesis"), deployment.ingest, events(6, entities=1))
    shard, records = next((s, r) for s in deployment.read_stream(deployment.ingest)
                          if (r := shard_records(deployment, s)))
    fail_batch(deployment, records)
    status = deployment.run("redrive", "--queue-url", deployment.queue, "--keep-messages", *FAST,
                            clock=FakeClock(NOW))
    # THEN the records are put again and the message stays (in flight until its visibility ends)
    assert status == 0 and len(shard_records(deployment, shard)) == 12
    assert queue_counts(deployment) == (0, 1)
    assert capsys.readouterr().out.splitlines()[0].endswith("6 record(s) redriven to 'dayafter-ingest', kept")


@pytest.mark.parametrize(("shard", "gone"), [
    ("shardId-000000000000", "0 of 10 record(s) found"),
    ("shardId-000000000009", "(ResourceNotFoundException: Shard shardId-000000000009 in stream dayafter-ingest"),
])
def test_a_range_older_than_the_retention_warns_naming_the_message(deployment: Deployment, shard: str, gone: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a failure message whose range arrived 30 h ago (the stream keeps 24 h): its records were trimmed, or its
    # shard is gone
    old = KinesisRecord(shard, "1000", "ent-1", b"{}", NOW - 30 * 3600)
    body = on_failure_record(stream_arn(deployment), shard, [old, KinesisRecord(shard, "1009", "ent-1", b"{}",
                                                                                NOW - 30 * 3600)], "retry", 2)
    body["KinesisBatchInfo"]["batchSize"] = 10
    deployment.client("sqs").send_message(QueueUrl=deployment.queue, MessageBody=json.dumps(body))
    # WHEN the queue is redriven
    status = deployment.run("redrive", "--stack", STACK, *FAST, clock=FakeClock(NOW))
    out, err = capsys.readouterr()
    # THEN it warns, naming the message and its range: older than the retention, and not whole; the message is
    # kept; exit 1
    message_id = out.split()[1].rstrip(":")
    lines = err.splitlines()
    assert status == 1 and len(lines) == 2
    assert lines[0].startswith(f"warning: message {message_id}: range dayafter-ingest/{shard} 1000..1009 arrived ")
    assert lines[0].endswith("(30.0 h ago), older than the retention of 'dayafter-ingest' (24.0 h): its records are "
                             "gone, or going")
    assert lines[1].startswith(f"warning: message {message_id}: range dayafter-ingest/{shard} 1000..1009 is not "
                               "whole in the stream") and gone in lines[1]
    assert "0 record(s) redriven to 'dayafter-ingest', kept (not whole)" in out
    assert queue_counts(deployment) == (0, 1)


def test_a_message_file_is_redriven_without_the_queue(deployment: Deployment, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two failure messages saved to a file: one body, then what `aws sqs receive-message` printed
    put_events(deployment.client("kinesis"), deployment.ingest, events(10, entities=4))
    shards = {s: shard_records(deployment, s) for s in deployment.read_stream(deployment.ingest)}
    bodies = [on_failure_record(stream_arn(deployment), s, r, "retry", 2) for s, r in shards.items() if r]
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(bodies[0]) + json.dumps({"Messages": [{"MessageId": "m-2",
                                                                      "Body": json.dumps(bodies[1])}]}))
    # WHEN redriven from the file
    status = deployment.run("redrive", "--message", str(path), clock=FakeClock(NOW),
                            aws=WithClient(deployment.aws, {"sqs": "no queue"}))
    out = capsys.readouterr().out.splitlines()
    # THEN both ranges are put again (nothing to delete) and named by their place in the file
    assert status == 0
    assert out[0].startswith("message messages.json#1: dayafter-ingest/") and out[0].endswith(", kept")
    assert out[1].startswith("message m-2: ")
    for shard, records in shards.items():
        assert len(shard_records(deployment, shard)) == 2 * len(records)


def test_a_message_that_is_not_a_failure_message_is_kept_and_named(deployment: Deployment,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a stray message and then a good one in the queue
    sqs = deployment.client("sqs")
    stray = sqs.send_message(QueueUrl=deployment.queue, MessageBody='{"hello": 1}')["MessageId"]
    put_events(deployment.client("kinesis"), deployment.ingest, events(3, entities=1))
    records = next(r for s in deployment.read_stream(deployment.ingest) if (r := shard_records(deployment, s)))
    fail_batch(deployment, records)
    # WHEN the queue is redriven
    status = deployment.run("redrive", "--stack", STACK, *FAST, clock=FakeClock(NOW))
    out, err = capsys.readouterr()
    # THEN the stray one is named and kept, the good one redriven and deleted; exit 1
    assert status == 1
    assert err == (f"warning: message {stray}: not redriven, kept: message {stray}: no KinesisBatchInfo object (not "
                   "a Kinesis on-failure message): '{\"hello\": 1}'\n")
    assert "3 record(s) redriven to 'dayafter-ingest', deleted" in out
    assert out.splitlines()[-1].endswith("3 record(s) redriven; 1 whole, 0 not whole (kept), 1 unreadable (kept)")
    assert queue_counts(deployment) == (0, 1)


def test_a_dry_run_and_max_messages(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two failure messages
    put_events(deployment.client("kinesis"), deployment.ingest, events(12, entities=6))
    shards = {s: shard_records(deployment, s) for s in deployment.read_stream(deployment.ingest)}
    for records in shards.values():
        fail_batch(deployment, records)
    # WHEN one is redriven with --dry-run
    status = deployment.run("redrive", "--stack", STACK, "--dry-run", "--max-messages", "1", *FAST,
                            clock=FakeClock(NOW))
    out = capsys.readouterr().out.splitlines()
    # THEN it counts its records, puts nothing, deletes nothing, and leaves the other message alone
    assert status == 0 and len(out) == 2 and "record(s) would be redriven to 'dayafter-ingest', kept" in out[0]
    assert {s: len(shard_records(deployment, s)) for s in shards} == {s: len(r) for s, r in shards.items()}
    assert queue_counts(deployment) == (1, 1)


def test_puts_that_keep_failing_stop_the_redrive(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a failure message and a stream that refuses every record
    put_events(deployment.client("kinesis"), deployment.ingest, events(4, entities=1))
    records = next(r for s in deployment.read_stream(deployment.ingest) if (r := shard_records(deployment, s)))
    fail_batch(deployment, records)
    refusing = Refusing(deployment.client("kinesis"), lambda call, i, record: True)
    # WHEN the queue is redriven
    status = deployment.run("redrive", "--stack", STACK, *FAST, clock=FakeClock(NOW),
                            aws=WithClient(deployment.aws, {"kinesis": refusing}))
    err = capsys.readouterr().err
    # THEN one line names the message and says it and the later ones are kept; exit 1; the message stays
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("error: message ") and err.rstrip().endswith("stopped: it and the later messages are kept")
    assert queue_counts(deployment) == (0, 1)


def test_an_empty_queue(deployment: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN no failure message WHEN redriven THEN it says so, exit 0
    assert deployment.run("redrive", "--stack", STACK, *FAST) == 0
    assert capsys.readouterr().out == f"redrive: no message in {deployment.queue}\n"
