"""infra.monitoring: dashboard and alarms (utilisation, iterator age, quarantine rate, failed deploys, spec age, worker
lag, throttles, missing tasks, rollbacks), every custom metric in the deployment's dimension set."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

DEPLOYMENT = [{"Name": "deployment", "Value": "georebal"}]


@pytest.mark.parametrize(
    ("namespace", "metric", "threshold"),
    [
        ("GeoRebalancer", "WorkerUtilisation", 0.95),
        ("GeoRebalancer", "SpecAgeSeconds", 86400),
        ("AWS/Lambda", "IteratorAge", 60000),
        ("AWS/S3", "PutRequests", 100),
        ("AWS/Events", "TriggeredRules", 0),
        ("GeoRebalancer", "MillisBehindLatest", 60000),
        ("GeoRebalancer", "DeployStatus_rolled_back", 0),
    ],
)
def test_alarm_on_each_health_signal(emr: Any, namespace: str, metric: str, threshold: float) -> None:
    # GIVEN the alarms THEN each signal has one, notifying the alarm topic
    emr.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": namespace,
            "MetricName": metric,
            "Threshold": threshold,
            "ComparisonOperator": "GreaterThanThreshold",
            "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarms")}],
        },
    )


@pytest.mark.parametrize(("metric", "service"), [
    ("WorkerUtilisation", "partitioner"), ("SpecAgeSeconds", "partitioner"), ("MillisBehindLatest", "geo-worker"),
    ("DeployStatus_rolled_back", "deployer")])
def test_an_alarm_reads_its_metric_in_the_deployments_dimension_set(emr: Any, metric: str, service: str) -> None:
    # GIVEN a project metric's alarm THEN it names exactly the writer's service and the deployment (the prefix)
    emr.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "GeoRebalancer", "MetricName": metric,
        "Dimensions": [*DEPLOYMENT, {"Name": "service", "Value": service}]})


def _math_alarm(emr: Any, expression: str) -> dict[str, Any]:
    """The alarm whose metric is the math ``expression``; its metrics by id."""
    for alarm in emr.resources("AWS::CloudWatch::Alarm").values():
        queries = alarm["Properties"].get("Metrics", [])
        if any(q.get("Expression") == expression for q in queries):
            stats = {q["Id"]: q["MetricStat"]["Metric"] for q in queries if "MetricStat" in q}
            return stats | {"_": alarm["Properties"]}
    raise AssertionError(f"no alarm on {expression!r}")


def test_throttle_alarms_sum_the_tables_streams_and_functions(emr: Any) -> None:
    # GIVEN the throttle alarms (sums over metrics: one time series each)
    tables = _math_alarm(emr, "table0 + table1 + table2 + table3")
    streams = _math_alarm(emr, "stream0 + stream1 + stream2")
    functions = _math_alarm(emr, "lambda0 + lambda1 + lambda2 + lambda3")
    # THEN they read the read and write throttle events of both tables, the ingest stream's write throttles with the
    # router's and workers' own geo-stream counts, and the four functions' Throttles, sustained for 15 minutes
    assert sorted(m["MetricName"] for k, m in tables.items() if k != "_") == ["ReadThrottleEvents"] * 2 + [
        "WriteThrottleEvents"] * 2
    assert {(m["Namespace"], m["MetricName"]) for k, m in streams.items() if k != "_"} == {
        ("AWS/Kinesis", "WriteProvisionedThroughputExceeded"), ("GeoRebalancer", "GeoWriteThrottled"),
        ("GeoRebalancer", "GeoReadThrottled")}
    assert {m["MetricName"] for k, m in functions.items() if k != "_"} == {"Throttles"}
    assert all(a["_"]["EvaluationPeriods"] == 3 and a["_"]["Threshold"] == 0 for a in (tables, streams, functions))


def test_the_workers_below_desired_alarm_reads_container_insights(emr: Any) -> None:
    # GIVEN the missing-tasks alarm THEN it is desired - running of the worker service, for 15 minutes
    alarm = _math_alarm(emr, "desired - running")
    assert (alarm["desired"]["MetricName"], alarm["running"]["MetricName"]) == ("DesiredTaskCount", "RunningTaskCount")
    assert alarm["desired"]["Namespace"] == "ECS/ContainerInsights"
    assert {"Name": "ServiceName", "Value": "georebal-geo-workers"} in alarm["running"]["Dimensions"]
    assert alarm["_"]["EvaluationPeriods"] == 3


def test_a_contributor_insights_rule_ranks_the_lagging_slots(emr: Any) -> None:
    # GIVEN the insight rule on the workers' log group THEN it sums behind_ms of their EMF lines per slot
    (rule,) = emr.resources("AWS::CloudWatch::InsightRule").values()
    assert rule["Properties"]["RuleName"] == "georebal-worker-lag"
    body = json.dumps(rule["Properties"]["RuleBody"])
    assert '$.behind_ms' in body and '$.worker_id' in body and "LogGroupNames" in body


def test_the_dashboard_has_a_row_per_concern(emr: Any) -> None:
    # GIVEN the dashboard body THEN it has the ingest, control loop, workers and swaps rows
    (dashboard,) = emr.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for row in ("## Ingest", "## Control loop", "## Workers", "## Swaps"):
        assert row in body, row
    assert "MillisBehindLatest" in body and "TransformTime" in body and "RunningTaskCount" in body


def test_failed_deploys_rule_matches_the_worker_service(emr: Any) -> None:
    # GIVEN the EventBridge rule THEN it matches failed ECS deployments of the worker service
    emr.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.ecs"],
                "detail-type": ["ECS Deployment State Change"],
                "detail": {"eventName": ["SERVICE_DEPLOYMENT_FAILED"]},
                "resources": Match.any_value(),
            }
        },
    )


def test_dashboard_and_encrypted_topic(emr: Any) -> None:
    # GIVEN the dashboard and the topic THEN both exist; the topic is KMS-encrypted
    emr.template.has_resource_properties("AWS::SNS::Topic", {"TopicName": "georebal-alarms", "KmsMasterKeyId": Match.any_value()})


def test_a_silent_snapshot_pipeline_raises_the_spec_age_alarm(emr: Any) -> None:
    # GIVEN the SpecAge alarm THEN missing data (no snapshot: the Spark job or the partitioner stopped) breaches,
    # after three windows, not on one late window
    emr.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "SpecAgeSeconds", "TreatMissingData": "breaching", "EvaluationPeriods": 3, "Period": 300})


def test_the_dashboard_name_carries_the_region(emr: Any) -> None:
    # GIVEN the dashboard THEN its name has the region in it (the same prefix in two regions does not collide)
    emr.template.has_resource_properties(
        "AWS::CloudWatch::Dashboard",
        {"DashboardName": {"Fn::Join": ["", ["georebal-geo-rebalancer-", {"Ref": "AWS::Region"}]]}})
