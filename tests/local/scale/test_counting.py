"""local.scale.counting: the AWS calls per second of the steady phase, all and the state handoff's own; the counted
puts per shard."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from geokernel.aws_budget.calls import CallLog
from geokernel.aws_budget.usage import ACCOUNT, Usage
from geokernel.contracts.enriched import enriched_key, parse_enriched_key
from lambdas.runtime.kinesis import PutEntry
from local.scale.counting import ShardLookup, is_call, steady_calls, steady_output_puts
from local.scale.result import Phase, ScaleConfig, ScaleResult

T0 = 1_000_000.0


def test_units_records_bytes_retries_and_levels_are_not_calls() -> None:
    # GIVEN the kinds of rows a call log holds
    # WHEN each is asked whether it counts calls
    # THEN only the rows of calls say so
    assert is_call("dynamodb.GetItem") and is_call("kinesis.GetRecords") and is_call("s3.put.prefix")
    assert not any(is_call(k) for k in ("dynamodb.read_units.table", "dynamodb.write_units.partition",
                                        "kinesis.PutRecords.records", "kinesis.GetRecords.bytes",
                                        "retries.s3.PutObject", "lambda.concurrency", "fargate.task_launches"))


def test_steady_calls_count_the_steady_phase_only_and_pick_out_the_state_handoffs_calls() -> None:
    # GIVEN a run whose steady phase is its seconds 10..20, with calls before, inside and after it
    log = CallLog(clock=lambda: T0)
    result = ScaleResult(ScaleConfig(events_per_s=1000.0), calls=log, sim_start=T0,
                         phases=[Phase("deploy v1 (fleet start)", 0.0, 10.0, True), Phase("steady", 10.0, 20.0, True)])
    for t in range(0, 30):
        log.add([Usage("dynamodb.GetItem", ACCOUNT, 2), Usage("dynamodb.read_units.table", "t", 7)], at=T0 + t)
    for t in range(10, 20):
        log.add([Usage("s3.get.prefix", "specs/router-ledger/ingest", 1),
                 Usage("s3.put.prefix", "specs/router-ledger/ingest", 1),
                 Usage("s3.put.prefix", "out/state/v1/w0001", 0.5),
                 Usage("s3.put.prefix", "out/enriched/dt=2025-11-21/hour=04", 1)], at=T0 + t)
    log.add([Usage("dynamodb.BatchWriteItem", ACCOUNT, 5)], at=T0 + 15)
    # WHEN its steady calls are counted
    got = steady_calls(result, "specs", "out")
    # THEN all calls per second are the GetItems, ledger, state and output PUTs and the handoff writes (no units)
    assert got is not None
    total, state = got
    assert total == pytest.approx(2 + 1 + 1 + 0.5 + 1 + 0.5)
    # AND the state handoff's own are the ledger's GET and PUT, the state objects and the handoff writes
    assert state == pytest.approx(1 + 1 + 0.5 + 0.5)


def test_steady_output_puts_are_per_slot_from_the_objects_write_times() -> None:
    # GIVEN a run whose steady phase is its seconds 10..40: slot w1 wrote at 12, 22 and 32 s (and at 5 s, before it),
    # slot w2 at 15 and 35 s, w3 once; all in the same hour's folder
    result = ScaleResult(ScaleConfig(), sim_start=T0, phases=[Phase("steady", 10.0, 40.0, True)])
    written = [parse_enriched_key(enriched_key(0, 1, w, int((T0 + t) * 1000))) for w, t in
               (("w1", 5), ("w1", 12), ("w1", 22), ("w1", 32), ("w2", 15), ("w2", 35), ("w3", 20))]
    # WHEN its output PUTs per slot per second are measured
    # THEN they are the intervals between each slot's objects over their length: (2 + 1) / (20 + 20)
    assert steady_output_puts(result, written) == pytest.approx(3 / 40)
    # AND a run without a steady phase has none
    assert steady_output_puts(ScaleResult(ScaleConfig()), written) is None


def test_a_run_without_a_steady_phase_has_no_steady_calls() -> None:
    # GIVEN a run that never reached its steady phase
    result = ScaleResult(ScaleConfig(), phases=[Phase("deploy v1 (fleet start)", 0.0, 900.0, False)])
    # WHEN its steady calls are asked for
    # THEN there are none
    assert steady_calls(result, "specs", "out") is None


def test_shard_lookup_counts_records_and_bytes_per_shard_as_each_record_would() -> None:
    # GIVEN a two-shard stream (moto) and one PutRecords call of 7 records: 5 to the first shard's hash keys (two
    # different keys), 2 to the second's
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        kinesis.create_stream(StreamName="s", ShardCount=2)
        shards = sorted(kinesis.list_shards(StreamName="s")["Shards"],
                        key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        low, high = (s["HashKeyRange"]["StartingHashKey"] for s in shards)
        entries = ([PutEntry(b"x" * 10, "e1", low)] * 3 + [PutEntry(b"y" * 20, "e22", str(int(low) + 5))] * 2
                   + [PutEntry(b"z" * 30, "e3", high)] * 2)
        log = CallLog(clock=lambda: 100.0)
        # WHEN counted
        ShardLookup(kinesis).count(log, "s", entries, at=100.0)
    # THEN one call, and per shard the records and the bytes (data + partition key) of its records
    got = {(r.key, r.scope): r.seconds[100] for r in log.series()}
    first, second = (f"s/{s['ShardId']}" for s in shards)
    assert got == {("kinesis.PutRecords", "account"): 1,
                   ("kinesis.PutRecords.records", first): 5, ("kinesis.PutRecords.bytes", first): 3 * 12 + 2 * 23,
                   ("kinesis.PutRecords.records", second): 2, ("kinesis.PutRecords.bytes", second): 2 * 32}
