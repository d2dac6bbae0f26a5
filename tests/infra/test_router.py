"""infra.router: Kinesis event source with batching, bisect, partial batch responses and an encrypted failure queue."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match


def test_router_event_source_mapping(emr: Any) -> None:
    # GIVEN the router's event source mapping THEN it reads the ingest stream with the configured batching, from the
    # stream's oldest record, and holds failed records by their age (retention 24 h less 6 h left to redrive), not by
    # a retry count: nothing sent before the first spec is active is discarded
    emr.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [Match.string_like_regexp("^IngestStream"), "Arn"]},
            "FunctionName": {"Ref": Match.string_like_regexp("^RouterFunction")},
            "StartingPosition": "TRIM_HORIZON",
            "BatchSize": 500,
            "MaximumBatchingWindowInSeconds": 1,
            "BisectBatchOnFunctionError": True,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "MaximumRetryAttempts": Match.absent(),
            "MaximumRecordAgeInSeconds": 18 * 3600,
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


def test_the_router_knows_its_parallelization_factor_only_when_it_is_not_one(emr: Any, glue: Any) -> None:
    # GIVEN the default synth (factor 1) and the glue synth with router_parallelism=2
    # THEN the second's router gets ROUTER_PARALLELISM=2 beside its mapping's factor (the routers sharing a geo shard
    # while catching up, lambdas.runtime.pacing), and the default's gets nothing
    glue.template.has_resource_properties("AWS::Lambda::EventSourceMapping", {"ParallelizationFactor": 2})
    glue.template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "lambdas.router.handler.handler",
        "Environment": {"Variables": Match.object_like({"ROUTER_PARALLELISM": "2"})}})
    for fn in emr.template.find_resources("AWS::Lambda::Function").values():
        assert "ROUTER_PARALLELISM" not in fn["Properties"].get("Environment", {}).get("Variables", {})
    # AND only the router: the other functions and the workers of the glue synth do not get it
    for fn in glue.template.find_resources("AWS::Lambda::Function").values():
        if fn["Properties"].get("Handler") != "lambdas.router.handler.handler":
            assert "ROUTER_PARALLELISM" not in fn["Properties"].get("Environment", {}).get("Variables", {})
