"""infra.monitoring: dashboard and alarms (utilisation, iterator age, quarantine rate, failed deploys, spec age)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match


@pytest.mark.parametrize(
    ("namespace", "metric", "threshold"),
    [
        ("GeoRebalancer", "WorkerUtilisation", 0.95),
        ("GeoRebalancer", "SpecAgeSeconds", 86400),
        ("AWS/Lambda", "IteratorAge", 60000),
        ("AWS/S3", "PutRequests", 100),
        ("AWS/Events", "TriggeredRules", 0),
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
