"""Execution environments of a Lambda handler in the local loop (local.loops.lambda_environments) and the
event source mapping that invokes them per shard (local.loops.RouterPoller)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local.aws import EmbeddedAws, Names, SerialMotoServer, wait_stream_active
from local.loops import RouterPoller, lambda_environments

HANDLER = '''
import functools

@functools.cache
def runtime():
    return {"invocations": 0}

def handler(event, context):
    runtime()["invocations"] += 1
    return runtime()["invocations"]
'''


def test_each_environment_has_its_own_module_globals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a handler module that counts invocations in a cached global (as the router caches its ledgers)
    (tmp_path / "envs_probe_handler.py").write_text(HANDLER)
    monkeypatch.syspath_prepend(str(tmp_path))
    # WHEN three environments are made and invoked 2, 1 and 0 times
    envs = lambda_environments("envs_probe_handler:handler", 3)
    got: list[Any] = [envs[0].handler({}, None), envs[0].handler({}, None), envs[1].handler({}, None)]
    # THEN each counted only its own invocations: the copies share no globals with the imported module
    assert got == [1, 2, 1]
    assert envs[2].module.runtime() == {"invocations": 0}
    assert [e.name for e in envs] == [f"envs_probe_handler@env{i}" for i in range(3)]
    assert sys.modules["envs_probe_handler@env1"] is envs[1].module
    assert envs[0].module is sys.modules["envs_probe_handler"]


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
    poller = RouterPoller(two_shard_ingest, envs)
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
    poller = RouterPoller(two_shard_ingest, envs)
    # WHEN the poller polls once
    poller.step()
    # THEN both batches ran in that environment, one after the other (never two invocations in it at once)
    shared = sys.modules["router_probe_shared"]
    assert poller.errors == []
    assert len(shared.calls) == 2 and not any(overlap for _, _, overlap in shared.calls)


def test_a_stopped_poller_ends_and_lets_its_shard_threads_go(two_shard_ingest: EmbeddedAws) -> None:
    # GIVEN a running poller of two shards whose gate is closed (nothing is polled)
    poller = RouterPoller(two_shard_ingest, lambda_environments("router_probe_handler:handler", 2), interval_s=0.05,
                          gate=lambda: False)
    poller.start()
    # WHEN it is stopped
    poller.stop()
    poller.join(timeout=5)
    # THEN its thread ended without an error and its shard threads take no more work
    assert not poller.is_alive() and poller.errors == []
    assert poller._shards is not None
    with pytest.raises(RuntimeError, match="after shutdown"):
        poller._shards.submit(print)
