"""The AWS API budget: the quota table, the usage of each call, the botocore hooks (on moto) and the report."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from geokernel.aws_budget.calls import CallLog, watch
from geokernel.aws_budget.quotas import BY_KEY, QUOTAS, BudgetError, Quota, Scope, Unit, warm_table
from geokernel.aws_budget.report import MIN_MARGIN, budget, failures, growth, rates_per_api, render
from geokernel.aws_budget.usage import IteratorMap, Usage, usages


def test_every_quota_row_cites_an_aws_page_and_keys_are_unique() -> None:
    # GIVEN the quota table WHEN its rows are listed THEN each cites docs.aws.amazon.com and no key repeats
    assert len(BY_KEY) == len(QUOTAS)
    assert all(q.source.startswith("https://docs.aws.amazon.com/") for q in QUOTAS)
    assert BY_KEY["kinesis.DescribeStreamSummary"].per_second == 20
    assert BY_KEY["fargate.task_launches"].burst == 100


def test_a_quota_without_a_source_or_with_a_bad_rate_is_refused() -> None:
    # GIVEN rows with a bad rate and no URL WHEN built THEN the error names the value
    with pytest.raises(BudgetError, match="-1"):
        Quota("x", "x", Scope.ACCOUNT, Unit.CALLS, -1, "https://docs.aws.amazon.com/x")
    with pytest.raises(BudgetError, match="'docs'"):
        Quota("x", "x", Scope.ACCOUNT, Unit.CALLS, 1, "docs")


def test_dynamodb_units_follow_item_size_and_consistency() -> None:
    # GIVEN a 9 KB item read strongly and eventually, and a 2.5 KB write
    item = {"pk": {"S": "active"}, "blob": {"S": "x" * 9000}}
    strong = usages("dynamodb", "GetItem", {"TableName": "t", "Key": {"pk": {"S": "active"}}, "ConsistentRead": True},
                    {"Item": item}, IteratorMap())
    weak = usages("dynamodb", "GetItem", {"TableName": "t", "Key": {"pk": {"S": "active"}}}, {"Item": item},
                  IteratorMap())
    write = usages("dynamodb", "PutItem", {"TableName": "t", "Item": {"pk": {"S": "a"}, "v": {"S": "y" * 2500}}},
                   {}, IteratorMap())
    # THEN 3 units strongly (9 KB / 4 KB rounded up), 1.5 eventually, 3 write units; the item is the partition
    assert Usage("dynamodb.read_units.partition", "t#pk=active", 3.0) in strong
    assert Usage("dynamodb.read_units.partition", "t#pk=active", 1.5) in weak
    assert Usage("dynamodb.write_units.partition", "t#pk=a", 3.0) in write


def test_s3_calls_count_per_prefix_and_unknown_calls_are_kept() -> None:
    # GIVEN a PUT under an hour of enriched/ and an ECS call no row covers WHEN counted THEN prefix and name are kept
    put = usages("s3", "PutObject", {"Bucket": "out", "Key": "enriched/dt=2025-11-21/hour=04/v3-w1-1-0.jsonl.gz"}, {}, IteratorMap())
    ecs = usages("ecs", "ListClusters", {}, {}, IteratorMap())
    assert put == [Usage("s3.put.prefix", "out/enriched/dt=2025-11-21/hour=04", 1)]
    assert ecs == [Usage("ecs.ListClusters", "account", 1)]
    # AND an unknown call is reported with its rate and no margin, never dropped
    log = CallLog(clock=lambda: 1000.0)
    log.record_call("ecs", "ListClusters", {}, {})
    (row,) = budget(log)
    assert row.key == "ecs.ListClusters" and row.total == 1 and row.margin is None


def test_a_putevents_call_is_one_call_against_the_account_quota_carrying_its_entries() -> None:
    # GIVEN a geofence sink's PutEvents call of 10 entries, 2000 of them in one second
    found = usages("events", "PutEvents", {"Entries": [{}] * 10}, {}, IteratorMap())
    log = CallLog(clock=lambda: 1000.0)
    for _ in range(2000):
        log.record_call("events", "PutEvents", {"Entries": [{}] * 10}, {})
    # THEN the call counts once against the account's PutEvents quota (10,000 a second), its entries apart
    assert found == [Usage("events.PutEvents", "account", 1), Usage("events.PutEvents.entries", "account", 10.0)]
    rows = {r.key: r for r in budget(log)}
    assert rows["events.PutEvents"].peak == 2000 and rows["events.PutEvents"].margin == 5.0
    assert rows["events.PutEvents.entries"].total == 20000 and rows["events.PutEvents.entries"].margin is None


def test_every_ecs_action_the_system_calls_has_its_categorys_token_bucket() -> None:
    # GIVEN the ECS actions the deployer, the hooks and the workers call
    # WHEN their rows are read THEN each has the bucket and refill of its category on ECS's request-throttling page
    buckets = {k: (BY_KEY[k].burst, BY_KEY[k].per_second) for k in (
        "ecs.UpdateService", "ecs.DescribeServices", "ecs.DescribeTaskDefinition", "ecs.RegisterTaskDefinition",
        "ecs.UpdateTaskProtection")}
    assert buckets == {"ecs.UpdateService": (50, 5), "ecs.DescribeServices": (100, 20),
                       "ecs.DescribeTaskDefinition": (50, 20), "ecs.RegisterTaskDefinition": (20, 1),
                       "ecs.UpdateTaskProtection": (200, 80)}
    # AND 30 UpdateService calls in one second use 60 % of the bucket: below the 2x margin
    log = CallLog(clock=lambda: 1000.0)
    for _ in range(30):
        log.record_call("ecs", "UpdateService", {}, {})
    (row,) = budget(log)
    assert row.margin == pytest.approx(5 / 3) and not row.ok


def test_hooks_count_every_call_on_moto_with_shards_followed_through_iterators() -> None:
    # GIVEN a watched Kinesis client on moto and a log on a fixed clock
    log = CallLog(clock=lambda: 1000.0)
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        watch(kinesis.meta.events, log)
        kinesis.create_stream(StreamName="s", ShardCount=2)
        kinesis.put_records(StreamName="s", Records=[{"Data": b"abc", "PartitionKey": "k"}] * 3)
        shard = kinesis.list_shards(StreamName="s")["Shards"][0]["ShardId"]
        it = kinesis.get_shard_iterator(StreamName="s", ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        got = kinesis.get_records(ShardIterator=it["ShardIterator"])
        kinesis.get_records(ShardIterator=got["NextShardIterator"])
        with pytest.raises(kinesis.exceptions.ResourceNotFoundException):
            kinesis.describe_stream_summary(StreamName="missing")
    # WHEN the log is read
    by_key: dict[str, dict[str, float]] = {}
    for s in log.series():
        by_key.setdefault(s.key, {})[s.scope] = sum(s.seconds.values())
    # THEN each call is there once, GetRecords counted on its shard, and the failed call counted too
    assert by_key["kinesis.CreateStream"] == {"account": 1}
    assert by_key["kinesis.PutRecords"] == {"account": 1}
    assert sum(by_key["kinesis.PutRecords.records"].values()) == 3
    assert by_key["kinesis.ListShards"] == {"s": 1}
    assert by_key["kinesis.GetRecords"] == {f"s/{shard}": 2}
    assert by_key["kinesis.DescribeStreamSummary"] == {"account": 1}



def test_a_call_that_gets_no_answer_is_counted_and_raises_its_own_error() -> None:
    # GIVEN a watched client whose endpoint refuses connections (botocore then emits after-call-error with the
    # exception and the context only, no operation model), retries off
    from botocore.config import Config
    from botocore.exceptions import EndpointConnectionError
    log = CallLog(clock=lambda: 1000.0)
    kinesis = boto3.client("kinesis", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                           aws_access_key_id="k", aws_secret_access_key="s",
                           config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1))
    watch(kinesis.meta.events, log)
    # WHEN a call gets no answer
    with pytest.raises(EndpointConnectionError):
        kinesis.describe_stream_summary(StreamName="s")
    # THEN the caller sees the connection error (not the hook's), and the call is in the log once
    assert {s.key: sum(s.seconds.values()) for s in log.series()} == {"kinesis.DescribeStreamSummary": 1}


def test_a_failed_getrecords_keeps_its_iterator_so_the_retry_still_names_the_shard() -> None:
    # GIVEN an iterator handed out for shard s/0
    its = IteratorMap()
    usages("kinesis", "GetShardIterator", {"StreamName": "s", "ShardId": "0"}, {"ShardIterator": "i1"}, its)
    throttled = {"Error": {"Code": "ProvisionedThroughputExceededException"}}
    # WHEN a read with it is throttled, another gets no answer, and the next one reads
    first = usages("kinesis", "GetRecords", {"ShardIterator": "i1"}, throttled, its)
    second = usages("kinesis", "GetRecords", {"ShardIterator": "i1"}, {}, its)
    third = usages("kinesis", "GetRecords", {"ShardIterator": "i1"}, {"Records": [], "NextShardIterator": "i2"}, its)
    # THEN every call counts against s/0, not an unknown shard, and the iterator moved on only after the read
    assert {u.scope for u in first + second + third if u.key == "kinesis.GetRecords"} == {"s/0"}
    assert its.take("i2") == "s/0" and its.take("i1") != "s/0"


def test_a_pre_warmed_table_is_held_against_its_warm_throughput_and_the_others_against_the_default() -> None:
    # GIVEN 3,000 write units/s on the leases table and 10/s on the control table
    log = CallLog()
    for t in range(10):
        log.add([Usage("dynamodb.write_units.table", "leases", 3000), Usage("dynamodb.write_units.table", "control", 10)],
                at=float(t))
    # WHEN held against a new on-demand table's 4,000 THEN the row is below the 2x margin
    (plain,) = budget(log)
    assert plain.scope == "leases" and not plain.ok
    # WHEN the leases table is pre-warmed to 8,000 THEN its margin is 8,000 / 3,000 and the row passes
    writes = "dynamodb.write_units.table"
    (warm,) = budget(log, overrides={(writes, "leases"): warm_table(writes, 8000)})
    assert warm.scope == "leases" and warm.margin == pytest.approx(8000 / 3000) and warm.ok
    # AND a pre-warmed table with little use does not hide another table near its default quota
    (other,) = budget(log, overrides={(writes, "control"): warm_table(writes, 8000)})
    assert other.scope == "leases" and not other.ok


def test_report_holds_peak_and_sustained_against_the_quota() -> None:
    # GIVEN 15 DescribeStreamSummary calls in one second (quota 20/s) and 3/s of launches for 20 s
    log = CallLog()
    log.add([Usage("kinesis.DescribeStreamSummary", "account", 15)], at=5.0)
    for t in range(20):
        log.add([Usage("fargate.task_launches", "account", 3)], at=float(t))
    # WHEN the budget is taken
    rows = {r.key: r for r in budget(log)}
    # THEN the call is at 75 % of its quota (below the 2x margin) and the launches well within theirs
    assert rows["kinesis.DescribeStreamSummary"].margin == pytest.approx(20 / 15)
    assert rows["fargate.task_launches"].sustained == pytest.approx(3.0)
    assert rows["fargate.task_launches"].margin == pytest.approx(20 / 3)
    assert [f.split(":")[0] for f in failures(list(rows.values()))] == ["kinesis.DescribeStreamSummary"]
    assert "BELOW" in render(list(rows.values())) and MIN_MARGIN == 2.0


def test_the_log_survives_a_round_trip_and_merges() -> None:
    # GIVEN two processes' logs WHEN one is sent as JSON and merged THEN the totals add
    a, b = CallLog(), CallLog()
    a.add([Usage("s3.put.prefix", "out/x", 2)], at=1.0)
    b.add([Usage("s3.put.prefix", "out/x", 3)], at=1.0)
    a.merge(b.to_json())
    assert rates_per_api(a, 1.0) == {"s3.put.prefix": 5.0}
    with pytest.raises(BudgetError, match="not a call log"):
        a.merge({"rows": []})


def test_growth_tells_linear_from_squared() -> None:
    # GIVEN one API growing with workers and one with workers squared
    workers = [100, 300, 1000]
    totals = [{"dynamodb.GetItem": w * 0.5, "dynamodb.Query": (w / 100) ** 2} for w in workers]
    # WHEN the exponents are fitted THEN the first is linear, the second is not
    found = {g.key: g for g in growth(workers, totals, keys=["dynamodb.GetItem", "dynamodb.Query"])}
    assert found["dynamodb.GetItem"].exponent == pytest.approx(1.0) and found["dynamodb.GetItem"].linear
    assert found["dynamodb.Query"].exponent == pytest.approx(2.0) and not found["dynamodb.Query"].linear
