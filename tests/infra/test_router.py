"""infra.router: Kinesis event source with batching, bisect, partial batch responses and an encrypted failure queue."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match


def test_router_event_source_mapping(emr: Any) -> None:
    # GIVEN the router's event source mapping THEN it reads the ingest stream with the configured batching
    emr.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [Match.string_like_regexp("^IngestStream"), "Arn"]},
            "FunctionName": {"Ref": Match.string_like_regexp("^RouterFunction")},
            "StartingPosition": "LATEST",
            "BatchSize": 500,
            "MaximumBatchingWindowInSeconds": 1,
            "BisectBatchOnFunctionError": True,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "MaximumRetryAttempts": 10,
            "MaximumRecordAgeInSeconds": 21600,
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [Match.string_like_regexp("^RouterFailures"), "Arn"]}}},
        },
    )


def test_failure_queue_is_kms_encrypted(emr: Any) -> None:
    # GIVEN the failure destination THEN it is encrypted with a customer-managed key and TLS-only
    emr.template.has_resource_properties(
        "AWS::SQS::Queue",
        {"QueueName": "georebal-router-failures", "KmsMasterKeyId": {"Fn::GetAtt": [Match.string_like_regexp("^RouterFailuresKey"), "Arn"]}},
    )
    emr.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {"PolicyDocument": {"Statement": [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]}},
    )
