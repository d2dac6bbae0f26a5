"""georebal.smoke's parts against moto: each check on a good and a bad state, the waits with a fake clock, the
events, the plan's cdk command lines and the tools it needs (no cdk runs, no real AWS)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from geokernel.contracts.enriched import encode_lines, enriched_key
from geokernel.contracts.event_fields import EventFields
from geokernel.events import ValidEvent, parse_event
from georebal.aws import Session, caller_account
from georebal.errors import AwsError, SmokeError
from georebal.smoke import events
from georebal.smoke.checks import (
    ACCESS_DENIED_PATTERN,
    check_delivery,
    check_failure_queue,
    count_access_denied,
    geo_streams,
    remove_geo_streams,
)
from georebal.smoke.plan import Outputs, read_outputs, retained_resources
from georebal.smoke.tools import check_bootstrap, check_tools
from georebal.smoke.waits import OUTPUT_PREFIX, OutputScanner, wait_for_active, wait_for_output
from tests.georebal.smoke_fakes import PREFIX, STACK, FakeClock, log, make_deployment, moto_aws

T0 = float(int(time.time()) // 86400 * 86400)  # today 00:00Z (moto drops log events older than 14 days)
SINCE = datetime.fromtimestamp(T0, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def deployment() -> Iterator[tuple[Any, dict[str, str]]]:
    with mock_aws():
        aws = moto_aws()
        yield aws, make_deployment(aws)


def lines(verdict: Any) -> list[str]:
    return list(verdict.lines())


# --- events ------------------------------------------------------------------------------------------------------

def test_probes_are_valid_events_in_real_places_spread_over_entities() -> None:
    # GIVEN 1,000 probes WHEN each is parsed as the router parses an ingest record
    probes = events.probes("run", 1000, 1_700_000_000_000)
    parsed = [parse_event(json.dumps(p).encode()) for p in probes]
    # THEN every one is valid, with its own id, over 50 entities, near one of the cities
    assert all(isinstance(p, ValidEvent) for p in parsed)
    assert len({p["event_id"] for p in probes}) == 1000 and len({p["entity_id"] for p in probes}) == events.ENTITIES
    assert {p["place"] for p in probes} == {name for name, _, _ in events.PLACES}
    berlin = next(p for p in probes if p["place"] == "Berlin")
    assert abs(berlin["lat"] - 52.52) < 0.006 and abs(berlin["lon"] - 13.405) < 0.006
    assert [p["event_id"] for p in probes] == events.probe_ids("run", 1000)


def test_events_use_the_deployments_field_names() -> None:
    # GIVEN a deployment whose producers name lat/lon/ts otherwise WHEN probes and ticks are made
    fields = EventFields.from_mapping({"lat": "latitude", "lon": "longitude", "ts": "time"}, "test")
    now_ms = 1_767_225_600_000  # 2026-01-01: a time the worker's timestamp rule takes (issue #56)
    made = [*events.probes("run", 3, now_ms, fields), *events.ticks("run", 7, now_ms + 1, fields)]
    # THEN they carry the mapped keys, and parse as valid with that mapping
    assert {"latitude", "longitude", "time"} <= set(made[0]) and "lat" not in made[0]
    assert all(isinstance(parse_event(json.dumps(e).encode(), fields), ValidEvent) for e in made)
    assert [e["event_id"] for e in made[3:]] == [f"run-tick-0007-{j}" for j in range(events.TICKS_PER_POLL)]


class Throttling:
    """A Kinesis client refusing the first ``refusals`` records of its calls number ``on`` (1-based; None: all)."""

    def __init__(self, refusals: int, on: set[int] | None) -> None:
        self.refusals, self.on = refusals, on
        self.calls: list[int] = []
        self.put: list[dict[str, Any]] = []

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(len(Records))
        refuse = self.refusals if self.on is None or len(self.calls) in self.on else 0
        self.put += Records[refuse:]
        results = [{"ErrorCode": "ProvisionedThroughputExceededException"}] * refuse + \
                  [{"SequenceNumber": "1", "ShardId": "s"}] * (len(Records) - refuse)
        return {"FailedRecordCount": refuse, "Records": results}


def test_refused_records_are_put_again_with_progress_per_batch() -> None:
    # GIVEN a stream that throttles 10 records of the first call of each batch
    kinesis, clock, seen = Throttling(10, {1, 3}), FakeClock(T0), []
    # WHEN 1,000 events are put
    put = events.put_events(kinesis, "s", events.probes("run", 1000, 1), clock,
                            progress=lambda done, total: seen.append((done, total)))
    # THEN each of the two batches of 500 got in whole, the throttled records on a second try after a back-off
    assert put == 1000 and len(kinesis.put) == 1000 and kinesis.calls == [500, 10, 500, 10]
    assert seen == [(500, 1000), (1000, 1000)] and clock.sleeps == [0.4, 0.4]
    # AND records that never get in stop the run, naming the stream and the error
    with pytest.raises(SmokeError, match=r"10 event\(s\) could not be put to the ingest stream 's' after 8 attempts "
                                         r"\(ProvisionedThroughputExceededException\)"):
        events.put_events(Throttling(10, None), "s", events.probes("run", 20, 1), FakeClock(T0))


def test_events_reach_the_ingest_stream_partitioned_by_entity(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN moto's ingest stream WHEN 1,200 events are put (three PutRecords calls)
    aws, outputs = deployment
    events.put_events(aws.client("kinesis"), outputs["IngestStreamName"], events.probes("run", 1200, 1), FakeClock(T0))
    # THEN the stream holds each, its partition key its entity
    kinesis = aws.client("kinesis")
    it = kinesis.get_shard_iterator(StreamName=outputs["IngestStreamName"], ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = kinesis.get_records(ShardIterator=it, Limit=10000)["Records"]
    assert len(records) == 1200 and all(json.loads(r["Data"])["entity_id"] == r["PartitionKey"] for r in records)


# --- the waits -----------------------------------------------------------------------------------------------------

def test_no_active_spec_after_the_timeout_names_what_is_missing(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN a control table without 'active' nor 'desired', and a fake clock
    aws, outputs = deployment
    clock, said, polls = FakeClock(T0), list[str](), list[int]()
    # WHEN v1 is awaited for at most 600 s, polling every 60 s
    verdict = wait_for_active(aws.client("dynamodb"), outputs["ControlTable"], clock, started=T0, timeout_s=600,
                              poll_s=60, on_poll=polls.append, say=said.append)
    # THEN it gives up at 600 s, having ticked at each of the 10 polls, and says no spec was published and where to look
    assert not verdict.ok and clock.t == T0 + 600 and polls == list(range(10))
    assert lines(verdict) == [
        f"FAIL  spec active: no spec active 10 min 0 s after the first event: control item 'active' is missing in "
        f"{outputs['ControlTable']}, and so is 'desired': no spec was published, no snapshot reached the partitioner: "
        "look at the Spark job (LogGroupAggregation, EmrJobRunId or GlueJobName), the snapshots bucket, the "
        "partitioner's log"]
    assert said[0] == f"wait for v1: 0 s of at most 10 min 0 s; control item 'active' not in {outputs['ControlTable']} yet"


def test_a_published_spec_that_never_went_live_points_at_the_deployer(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN 'desired' v1 but no 'active'
    aws, outputs = deployment
    aws.client("dynamodb").put_item(TableName=outputs["ControlTable"], Item={
        "pk": {"S": "desired"}, "version": {"N": "1"}, "spec_key": {"S": "specs/v00000001.json"}})
    # WHEN the wait times out THEN the message names the published version and the deployer
    verdict = wait_for_active(aws.client("dynamodb"), outputs["ControlTable"], FakeClock(T0), started=T0,
                              timeout_s=30, poll_s=15, on_poll=lambda n: None, say=lambda line: None)
    assert not verdict.ok and "v1 was published (control item 'desired') but did not go live: look at the deployer's " \
                              "and the workers' logs (LogGroupDeployer, LogGroupWorkers)" in verdict.detail


def test_the_active_spec_is_seen_with_the_time_from_the_first_event(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN 'active' v1 appearing 95 s after the first event (the clock's third sleep)
    aws, outputs = deployment
    clock = FakeClock(T0)
    item = {"pk": {"S": "active"}, "version": {"N": "1"}, "spec_key": {"S": "specs/v00000001.json"},
            "stream_name": {"S": f"{PREFIX}-geo-v1"}, "flipped_at": {"S": "x"}}
    clock.hooks.append(lambda now: aws.client("dynamodb").put_item(TableName=outputs["ControlTable"], Item=item)
                       if now - T0 >= 90 else None)
    # WHEN awaited from 5 s before the first poll, polling every 30 s
    verdict = wait_for_active(aws.client("dynamodb"), outputs["ControlTable"], clock, started=T0 - 5, timeout_s=600,
                              poll_s=30, on_poll=lambda n: None, say=lambda line: None)
    # THEN it passes at the first poll that sees it
    assert lines(verdict) == [f"ok    spec active: v1 active 1 min 35 s after the first event (geo stream {PREFIX}-geo-v1)"]


def put_output(aws: Any, bucket: str, key: str, ids: list[str]) -> None:
    body = encode_lines([json.dumps({"event_id": i, "spec_version": 1, "partition_id": "p", "worker_id": "0",
                                     "stray": False}) for i in ids])
    aws.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def out_key(version: int, worker: str, written_ms: int) -> str:
    """An output object's key for events of the smoke's time (T0)."""
    return enriched_key(int(T0 * 1000), version, worker, written_ms)


def test_the_output_is_read_over_versions_and_workers_deduplicated(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN output over two versions and two workers, one event twice, a non-record line, a body that is not
    # gzip'd and a foreign key
    aws, outputs = deployment
    bucket = outputs["OutputBucket"]
    put_output(aws, bucket, out_key(1, "0", 1), ["a", "b"])
    put_output(aws, bucket, out_key(1, "1", 2), ["c"])
    put_output(aws, bucket, out_key(2, "0", 3), ["b", "d"])
    aws.client("s3").put_object(Bucket=bucket, Key="enriched/README.txt", Body=b"not output")
    aws.client("s3").put_object(Bucket=bucket, Key=out_key(2, "1", 4), Body=encode_lines(['{"event_id": "e"}', "no"]))
    aws.client("s3").put_object(Bucket=bucket, Key=out_key(2, "1", 5), Body=b'{"event_id": "f"}\n')
    scanner = OutputScanner(aws.client("s3"), bucket)
    # WHEN scanned
    scanner.scan()
    # THEN each event id is counted per record, objects that are no output are skipped, bad lines counted
    assert scanner.counts == Counter({"a": 1, "b": 2, "c": 1, "d": 1, "e": 1}) and scanner.bad_lines == 2
    assert out_key(1, "0", 1).startswith(OUTPUT_PREFIX) and scanner.holding(["a", "x", "e"]) == 2
    # AND the delivery check dedupes: 4 of 4 out, b noted as delivered twice
    verdict = check_delivery(["a", "b", "c", "d"], scanner.counts, scanner.where, waited_s=3)
    assert lines(verdict) == [f"ok    events in vs out: 4 in, 4 out, 0 lost; 1 delivered more than once "
                              f"(at-least-once) (s3://{bucket}/enriched/)"]
    # AND a second scan reads only what is new
    put_output(aws, bucket, out_key(3, "0", 5), ["f"])
    scanner.scan()
    assert scanner.counts["b"] == 2 and scanner.counts["f"] == 1


def test_an_event_missing_from_the_output_is_lost_by_name(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN 1,000 expected ids of which the output holds all but one
    aws, outputs = deployment
    ids = events.probe_ids("run", 1000)
    put_output(aws, outputs["OutputBucket"], out_key(1, "0", 1), [i for i in ids if i != "run-00417"])
    scanner, clock, said = OutputScanner(aws.client("s3"), outputs["OutputBucket"]), FakeClock(T0), list[str]()
    # WHEN the output is awaited for at most 120 s
    waited = wait_for_output(scanner, ids, clock, timeout_s=120, poll_s=60, say=said.append)
    verdict = check_delivery(ids, scanner.counts, scanner.where, waited_s=waited)
    # THEN it gave up after 120 s with progress at each poll, and the verdict names the lost event
    assert waited == 120 and said[0].startswith("wait for the output: 999/1,000 events in s3://")
    assert lines(verdict) == [
        f"FAIL  events in vs out: 1,000 in, 999 out, 1 lost: not in s3://{outputs['OutputBucket']}/enriched/ after "
        "2 min 0 s (run-00417)",
        "        look at: the router failure queue, the quarantine bucket (quarantine/router/, quarantine/geo/), the "
        "router's and the workers' logs"]


# --- the checks ----------------------------------------------------------------------------------------------------

def test_the_failure_queue_is_empty_or_its_messages_are_counted(deployment: tuple[Any, dict[str, str]]) -> None:
    aws, outputs = deployment
    url, sqs = outputs["RouterFailureQueue"], aws.client("sqs")
    # GIVEN an empty queue THEN the check passes
    assert lines(check_failure_queue(sqs, url)) == [f"ok    router failure queue empty: 0 messages in {url}"]
    # GIVEN one message (what Lambda's on-failure destination sends) THEN it fails, saying what a message is
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"KinesisBatchInfo": {"shardId": "shardId-0"}}))
    assert lines(check_failure_queue(sqs, url)) == [
        f"FAIL  router failure queue empty: 1 message(s) in {url}: a router batch failed after its retries",
        "        each names a shard and a sequence range of the ingest stream (docs/DEPLOY.md, RouterFailures)"]
    # GIVEN a queue that does not exist THEN it fails as not read
    verdict = check_failure_queue(sqs, url + "-gone")
    assert not verdict.ok and "could not be read" in verdict.detail


def judged(outputs: dict[str, str]) -> dict[str, str]:
    return Outputs.from_stack(outputs, "test").judged_log_groups


def test_access_denied_is_counted_in_the_lambdas_and_workers_logs(deployment: tuple[Any, dict[str, str]]) -> None:
    aws, outputs = deployment
    log(aws, "LogGroupRouter", '{"level":"INFO","message":"routed 500"}', T0 + 10)
    log(aws, "LogGroupWorkers", "[worker] ready", T0 + 11)
    log(aws, "LogGroupAggregation", "AccessDenied probing a bucket region", T0 + 12)  # not a judged group
    log(aws, "LogGroupDeployer", "An error occurred (AccessDeniedException) when calling CreateStream", T0 - 60)
    # GIVEN clean logs since T0 (an older denial, the Spark job's own) THEN the count is 0 over the 5 groups
    verdict = count_access_denied(aws.client("logs"), judged(outputs), int(T0 * 1000))
    assert lines(verdict) == ["ok    no AccessDenied in logs: 0 in 5 log groups (LogGroupRouter, LogGroupPartitioner, "
                              f"LogGroupDeployer, LogGroupHooks, LogGroupWorkers) since {SINCE}"]
    # GIVEN a worker's denial since T0 THEN it is counted and shown
    denied = ("botocore.exceptions.ClientError: An error occurred (AccessDeniedException) when calling the "
              "GetRecords operation: User: arn:aws:sts::123456789012:assumed-role/w is not authorized")
    log(aws, "LogGroupWorkers", denied, T0 + 30)
    verdict = count_access_denied(aws.client("logs"), judged(outputs), int(T0 * 1000))
    assert not verdict.ok and verdict.detail.startswith("1 in 5 log groups")
    assert verdict.lines()[1] == f"        LogGroupWorkers: {denied}"
    # AND the pattern asked is a regex (a plain term would not match inside AccessDeniedException)
    assert ACCESS_DENIED_PATTERN == "%AccessDenied%"


def test_a_log_group_that_cannot_be_read_fails_the_check(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN one judged log group that does not exist WHEN counted THEN the check fails naming it
    aws, outputs = deployment
    groups = {**judged(outputs), "LogGroupHooks": "/aws/lambda/gone"}
    verdict = count_access_denied(aws.client("logs"), groups, int(T0 * 1000))
    assert not verdict.ok and "not read: LogGroupHooks (/aws/lambda/gone): ResourceNotFoundException" in verdict.detail


def test_the_deployments_geo_streams_are_deleted_and_gone(deployment: tuple[Any, dict[str, str]]) -> None:
    # GIVEN two geo streams of this prefix, and streams that only look alike
    aws, _ = deployment
    kinesis = aws.client("kinesis")
    for name in (f"{PREFIX}-geo-v1", f"{PREFIX}-geo-v2", "georebal-smoke-zzzzz-geo-v1", f"{PREFIX}-geo-vx"):
        kinesis.create_stream(StreamName=name, ShardCount=1)
    assert geo_streams(kinesis, PREFIX) == [f"{PREFIX}-geo-v1", f"{PREFIX}-geo-v2"]
    # WHEN removed THEN exactly those two are deleted, and Kinesis lists none of the prefix
    verdict = remove_geo_streams(kinesis, PREFIX, FakeClock(T0), timeout_s=60, poll_s=10)
    assert lines(verdict) == [f"ok    geo streams gone: Kinesis lists no {PREFIX}-geo-v* (deleted {PREFIX}-geo-v1, "
                              f"{PREFIX}-geo-v2: the deployer creates them at run time)"]
    left = kinesis.list_streams()["StreamNames"]
    assert "georebal-smoke-zzzzz-geo-v1" in left and f"{PREFIX}-geo-vx" in left and geo_streams(kinesis, PREFIX) == []


class Undying:
    """A Kinesis that lists a geo stream whatever is deleted."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def get_paginator(self, name: str) -> Any:
        return type("P", (), {"paginate": lambda self: [{"StreamNames": [f"{PREFIX}-geo-v3"]}]})()

    def delete_stream(self, StreamName: str, EnforceConsumerDeletion: bool) -> None:
        self.deleted.append(StreamName)


def test_a_geo_stream_still_listed_after_the_timeout_fails() -> None:
    kinesis, clock = Undying(), FakeClock(T0)
    verdict = remove_geo_streams(kinesis, PREFIX, clock, timeout_s=60, poll_s=20)
    assert kinesis.deleted == [f"{PREFIX}-geo-v3"] and clock.t == T0 + 60
    assert lines(verdict) == [
        f"FAIL  geo streams gone: {PREFIX}-geo-v3 still listed 1 min 0 s after the delete (deleted {PREFIX}-geo-v3: "
        "the deployer creates them at run time)",
        f"        delete by hand: aws kinesis delete-stream --stream-name {PREFIX}-geo-v3"]


# --- outputs, template, tools -------------------------------------------------------------------------------------

def test_outputs_and_retained_resources_are_read_from_cdks_files(tmp_path: Path,
                                                                 deployment: tuple[Any, dict[str, str]]) -> None:
    _, outputs = deployment
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({STACK: outputs}))
    read = read_outputs(path, STACK)
    assert read.ingest_stream == outputs["IngestStreamName"] and set(read.judged_log_groups) == {
        "LogGroupRouter", "LogGroupPartitioner", "LogGroupDeployer", "LogGroupHooks", "LogGroupWorkers"}
    # GIVEN outputs without the control table THEN the missing output is named
    path.write_text(json.dumps({STACK: {k: v for k, v in outputs.items() if k != "ControlTable"}}))
    with pytest.raises(SmokeError, match="the stack has no output ControlTable"):
        read_outputs(path, STACK)
    with pytest.raises(SmokeError, match="no outputs of stack 'other-stack'"):
        read_outputs(path, "other-stack")
    # AND a template's retained resources are listed, the deleted ones not
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"Resources": {"Key": {"Type": "AWS::KMS::Key", "DeletionPolicy": "Retain"},
                                                  "Q": {"Type": "AWS::SQS::Queue", "DeletionPolicy": "Delete"},
                                                  "T": {"Type": "AWS::DynamoDB::Table"}}}))
    assert retained_resources(template) == ["AWS::KMS::Key Key (Retain)"]


def test_the_cdk_cli_docker_and_the_bootstrap_are_named_when_missing(tmp_path: Path) -> None:
    cdk = tmp_path / "cdk"
    with pytest.raises(SmokeError, match=r"no CDK CLI at '.*/cdk': run `bash scripts/bootstrap.sh cdk`"):
        check_tools(tmp_path, Path("cdk"), which=lambda name: "/bin/docker")
    cdk.write_text("#!/bin/sh\n")
    cdk.chmod(0o755)
    with pytest.raises(SmokeError, match=r"no `docker` on PATH: cdk deploy builds the worker image"):
        check_tools(tmp_path, Path("cdk"), which=lambda name: None)
    check_tools(tmp_path, Path("cdk"), which=lambda name: "/bin/docker")
    with mock_aws():
        ssm = moto_aws().client("ssm")
        with pytest.raises(SmokeError, match=r"account 123456789012 is not bootstrapped for the CDK in eu-central-1 "
                                             r"\(no SSM parameter /cdk-bootstrap/hnb659fds/version\): run "
                                             r"`node_modules/.bin/cdk bootstrap aws://123456789012/eu-central-1` once"):
            check_bootstrap(ssm, "hnb659fds", "123456789012", "eu-central-1")
        ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="29", Type="String")
        assert check_bootstrap(ssm, "hnb659fds", "1", "r") == "CDK bootstrap version 29 (/cdk-bootstrap/hnb659fds/version)"


def test_credentials_that_sts_refuses_are_named() -> None:
    # GIVEN credentials STS refuses (expired) WHEN the account is asked THEN one message says so and what to do
    session = Session(boto3.Session(region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"))
    with Stubber(session.client("sts")) as stub:
        stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token included in the request is "
                                                                     "expired")
        with pytest.raises(AwsError, match=r"the AWS credentials were refused by STS in eu-west-1 \(ExpiredToken: The "
                                           r"security token included in the request is expired\); renew them"):
            caller_account(session)
