"""infra.partitioner_fn: the partitioner runs on each snapshot manifest (S3 ObjectCreated *_manifest.json)."""

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


def test_partitioner_has_memory_for_scipy_and_a_five_minute_budget(emr: Any) -> None:
    # GIVEN the partitioner function THEN it has 4 GB (2,435 MB measured at 4M quadkeys, +25 % is 3,044) and 300 s
    emr.template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "lambdas.partitioner.handler.handler", "MemorySize": 4096, "Timeout": 300}
    )
