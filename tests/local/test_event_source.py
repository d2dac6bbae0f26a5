"""local.event_source: the stack's Kinesis event source mapping as the twin plays it (settings from the template).

Each test puts records on a two-shard ingest stream in moto and runs the mapping's polls against a probe handler: the
shards side by side in environments of their own; the starting position; records held while the function fails
(no spec active yet) until they succeed, or discarded to the failure queue after a retry count (the old stack's
settings: every event sent before the first spec was lost).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from local.aws import EmbeddedAws, Names, SerialMotoServer, wait_stream_active
from local.event_source import EventSourceMapping
from local.loops import lambda_environments
from local.wiring.stack_wiring import Component, EventSource

SHARED = '''
import threading

barrier = threading.Barrier(2, timeout=5)
lock = threading.Lock()
busy = set()
calls = []
'''

PROBE = '''
import time

import router_probe_shared as shared

RENDEZVOUS = False

def handler(event, context):
    env = __name__
    with shared.lock:
        overlap = env in shared.busy
        shared.busy.add(env)
        shared.calls.append((env, event["Records"][0]["eventID"].split(":")[0], overlap))
    try:
        if RENDEZVOUS:
            shared.barrier.wait()  # both shards' invocations must be running at once to pass
        else:
            time.sleep(0.2)
    finally:
        with shared.lock:
            shared.busy.discard(env)
    return {"batchItemFailures": []}
'''


def _source(aws: EmbeddedAws, **changes: Any) -> EventSource:
    """The stack's settings (infra/router.py) on the test's stream."""
    source = EventSource(Component.ROUTER, aws.names.ingest_stream, "TRIM_HORIZON", 500, 1.0, True, True, -1, 64800,
                         1, None, True)
    return replace(source, **changes)


@pytest.fixture()
def two_shard_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedAws]:
    (tmp_path / "router_probe_shared.py").write_text(SHARED)
    (tmp_path / "router_probe_handler.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))
    server = SerialMotoServer().start()
    aws = EmbeddedAws(endpoint_url=server.url, names=Names(f"georebal-probe-{uuid.uuid4().hex[:8]}"),
                      server=server)  # moto's backends outlive a server: a stream name per test
    kinesis = aws.client("kinesis")
    kinesis.create_stream(StreamName=aws.names.ingest_stream, ShardCount=2)
    wait_stream_active(kinesis, aws.names.ingest_stream)
    for key in ("0", str(2**127 + 5)):  # one record in each shard's hash range
        kinesis.put_record(StreamName=aws.names.ingest_stream, Data=b"{}", PartitionKey="e", ExplicitHashKey=key)
    try:
        yield aws
    finally:
        server.stop()
        for name in [m for m in sys.modules if m.startswith("router_probe")]:
            del sys.modules[name]


def test_the_shards_are_invoked_side_by_side_each_in_an_environment_of_its_own(two_shard_ingest: EmbeddedAws) -> None:
    # GIVEN two ingest shards with a batch each, two environments, and a handler that returns only when both
    # shards' invocations are running at once
    envs = lambda_environments("router_probe_handler:handler", 2)
    for env in envs:
        env.module.RENDEZVOUS = True
    poller = EventSourceMapping(two_shard_ingest, envs, _source(two_shard_ingest))
    # WHEN the poller polls once
    poller.step()
    # THEN both batches were handled concurrently (the rendezvous passed), in the two environments, and acknowledged
    shared = sys.modules["router_probe_shared"]
    assert poller.errors == []
    assert sorted(shard for _, shard, _ in shared.calls) == ["shardId-000000000000", "shardId-000000000001"]
    assert sorted(env for env, _, _ in shared.calls) == sorted(e.module.__name__ for e in envs)
    assert poller.invocations == 2 and poller.records_in == 2
    assert all(not c.pending for c in poller.cursors)


def test_an_environment_runs_one_invocation_at_a_time(two_shard_ingest: EmbeddedAws) -> None:
    # GIVEN two shards with a batch each and a single environment
    envs = lambda_environments("router_probe_handler:handler", 1)
    poller = EventSourceMapping(two_shard_ingest, envs, _source(two_shard_ingest))
    # WHEN the poller polls once
    poller.step()
    # THEN both batches ran in that environment, one after the other (never two invocations in it at once)
    shared = sys.modules["router_probe_shared"]
    assert poller.errors == []
    assert len(shared.calls) == 2 and not any(overlap for _, _, overlap in shared.calls)


def test_a_stopped_poller_ends_and_lets_its_shard_threads_go(two_shard_ingest: EmbeddedAws) -> None:
    # GIVEN a running poller of two shards that started at the stream's end (nothing to poll)
    poller = EventSourceMapping(two_shard_ingest, lambda_environments("router_probe_handler:handler", 2),
                                _source(two_shard_ingest, starting_position="LATEST", max_batching_window_s=0.1))
    poller.start()
    # WHEN it is stopped
    poller.stop()
    poller.join(timeout=5)
    # THEN its thread ended without an error and its shard threads take no more work
    assert not poller.is_alive() and poller.errors == []
    assert poller._shards is not None
    with pytest.raises(RuntimeError, match="after shutdown"):
        poller._shards.submit(print)


HOLD = '''
import json

state = {"active": False, "raise_over": 0, "seen": []}

def handler(event, context):
    records = event["Records"]
    if state["raise_over"] and len(records) > state["raise_over"]:
        raise RuntimeError("too many records")
    if not state["active"]:  # as the router while no spec is active: every valid record fails, for a retry
        return {"batchItemFailures": [{"itemIdentifier": r["kinesis"]["sequenceNumber"]} for r in records]}
    state["seen"].extend(r["eventID"] for r in records)
    return {"batchItemFailures": []}
'''


@pytest.fixture()
def hold(two_shard_ingest: EmbeddedAws, tmp_path: Path) -> Any:
    (tmp_path / "router_hold_handler.py").write_text(HOLD)
    envs = lambda_environments("router_hold_handler:handler", 1)
    yield envs, envs[0].module.state
    sys.modules.pop("router_hold_handler", None)


def _steps(poller: EventSourceMapping, n: int) -> None:
    for _ in range(n):
        for cursor in poller.cursors:
            cursor.retry_at = 0.0  # the backoff is not what these tests are about
        poller.step()


def test_records_sent_before_any_spec_are_held_until_the_function_succeeds(two_shard_ingest: EmbeddedAws,
                                                                           hold: Any) -> None:
    # GIVEN the stack's settings (TRIM_HORIZON, no retry count) and two records put before the mapping started,
    # and a function that fails every record (no spec is active yet)
    envs, state = hold
    poller = EventSourceMapping(two_shard_ingest, envs, _source(two_shard_ingest))
    # WHEN it polls twenty times while they fail, then once the function succeeds
    _steps(poller, 20)
    assert state["seen"] == [] and poller.gave_up == 0 and poller.failed_items >= 20
    state["active"] = True
    _steps(poller, 1)
    # THEN both were delivered, none discarded
    assert len(state["seen"]) == 2 and poller.gave_up == 0 and not poller.discarded


def test_the_old_stacks_settings_lost_every_event_sent_before_the_first_spec(two_shard_ingest: EmbeddedAws,
                                                                              hold: Any) -> None:
    # GIVEN the settings the stack had before (LATEST, 10 retries) and its failure queue
    envs, state = hold
    aws = two_shard_ingest
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName=aws.names.router_failures_queue)["QueueUrl"]
    queue = f"arn:aws:sqs:us-east-1:123456789012:{aws.names.router_failures_queue}"
    poller = EventSourceMapping(aws, envs, _source(aws, starting_position="LATEST", max_retry_attempts=10,
                                                   on_failure=queue))
    kinesis = aws.client("kinesis")
    kinesis.put_record(StreamName=aws.names.ingest_stream, Data=b"{}", PartitionKey="e", ExplicitHashKey="1")
    # WHEN it polls while no spec is active, for more than its retries, and then a spec is active
    _steps(poller, 12)
    state["active"] = True
    _steps(poller, 1)
    # THEN the two records put before it started were never read, the one after was discarded after 10 retries, and
    # the failure queue holds its shard and sequence range only: all three events were lost
    assert poller.records_in == 1 and poller.gave_up == 1 and state["seen"] == []
    body = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    assert body["KinesisBatchInfo"]["batchSize"] == 1 and body["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert body["KinesisBatchInfo"]["shardId"] == "shardId-000000000000"


def test_a_raised_error_bisects_the_batch(two_shard_ingest: EmbeddedAws, hold: Any) -> None:
    # GIVEN one shard with three records and a function that raises on any batch of more than one
    envs, state = hold
    kinesis = two_shard_ingest.client("kinesis")
    for _ in range(2):
        kinesis.put_record(StreamName=two_shard_ingest.names.ingest_stream, Data=b"{}", PartitionKey="e",
                           ExplicitHashKey="1")
    state.update(active=True, raise_over=1)
    poller = EventSourceMapping(two_shard_ingest, envs, _source(two_shard_ingest))
    # WHEN it polls until nothing is pending
    _steps(poller, 8)
    # THEN each record was delivered once, by halving the failing batch (nothing discarded)
    shard0 = next(c for c in poller.cursors if c.shard_id.endswith("0"))
    assert not shard0.pending and not shard0.later and poller.gave_up == 0
    assert len(state["seen"]) == len(set(state["seen"])) == 4


def test_records_older_than_the_record_age_are_discarded_unread(two_shard_ingest: EmbeddedAws, hold: Any) -> None:
    # GIVEN a record age of 0 s (every record is already too old) WHEN polled
    envs, state = hold
    state["active"] = True
    poller = EventSourceMapping(two_shard_ingest, envs, _source(two_shard_ingest, max_record_age_s=0))
    _steps(poller, 1)
    # THEN both records were discarded before any invocation
    assert poller.gave_up == 2 and poller.invocations == 0 and state["seen"] == []
    assert {d["requestContext"]["condition"] for d in poller.discarded} == {"RecordAgeExceeded"}
