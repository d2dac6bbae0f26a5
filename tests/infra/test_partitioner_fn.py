"""infra.partitioner_fn: the partitioner runs on each snapshot manifest (S3 ObjectCreated *_manifest.json) and on
each router's surge signal (control/surge/*.json in the specs bucket: the fast path)."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match


def test_partitioner_is_triggered_by_manifests_only(emr: Any) -> None:
    # GIVEN the bucket notifications WHEN the snapshots bucket's are inspected
    emr.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": Match.array_with([{"Name": "suffix", "Value": "_manifest.json"}, {"Name": "prefix", "Value": "snapshots/"}])}},
                        "LambdaFunctionArn": {"Fn::GetAtt": [Match.string_like_regexp("^PartitionerFunction"), "Arn"]},
                    }
                ]
            }
        },
    )


def test_partitioner_is_triggered_by_the_routers_surge_signals(emr: Any) -> None:
    # GIVEN the bucket notifications WHEN the specs bucket's are inspected
    # THEN the partitioner is invoked for objects under control/surge/ ending .json (not control/surges.json)
    emr.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": Match.array_with([
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": Match.array_with([{"Name": "suffix", "Value": ".json"},
                                                                            {"Name": "prefix", "Value": "control/surge/"}])}},
                        "LambdaFunctionArn": {"Fn::GetAtt": [Match.string_like_regexp("^PartitionerFunction"), "Arn"]},
                    }
                ])
            }
        },
    )


def test_the_router_gets_its_surge_meter_settings(emr: Any) -> None:
    # GIVEN the default context (surge: {}) THEN the router's SURGE_JSON spells out the meter's defaults
    from geokernel.surge.meter import SurgeSettings

    emr.template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "lambdas.router.handler.handler",
        "Environment": {"Variables": Match.object_like({"SURGE_JSON": SurgeSettings().to_json()})}})


def test_partitioner_has_memory_for_scipy_and_a_five_minute_budget(emr: Any) -> None:
    # GIVEN the partitioner function THEN it has 4 GB (2,435 MB measured at 4M quadkeys, +25 % is 3,044) and 300 s
    emr.template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "lambdas.partitioner.handler.handler", "MemorySize": 4096, "Timeout": 300}
    )
