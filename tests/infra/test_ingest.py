"""infra.ingest: the ingest stream is on-demand and KMS-encrypted with a rotating customer-managed key."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match


def test_ingest_stream_is_on_demand_and_kms_encrypted(emr: Any) -> None:
    # GIVEN the synthesized stack WHEN the Kinesis stream is inspected
    # THEN it is on-demand, retained under a generated name (a redeploy after destroy does not collide), encrypted
    emr.template.has_resource_properties(
        "AWS::Kinesis::Stream",
        {
            "Name": Match.absent(),
            "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
            "StreamEncryption": {"EncryptionType": "KMS", "KeyId": {"Fn::GetAtt": [Match.string_like_regexp("^IngestKey"), "Arn"]}},
        },
    )
    # AND the key rotates
    emr.template.has_resource_properties("AWS::KMS::Key", {"Description": "georebal: ingest stream encryption", "EnableKeyRotation": True})
    # AND the stream is the only CloudFormation-managed stream (geo streams are created at run time)
    assert len(emr.resources("AWS::Kinesis::Stream")) == 1


def test_a_provisioned_ingest_stream_and_fixed_names_when_not_retained(custom: Any) -> None:
    # GIVEN ingest_shards=4 and retain_data=false WHEN synthesized (the fixture)
    synth = custom
    # THEN the stream is provisioned with 4 shards under the prefix's name (destroyed with the stack)
    synth.template.has_resource_properties(
        "AWS::Kinesis::Stream", {"Name": "georebal-ingest", "ShardCount": 4, "StreamModeDetails": {"StreamMode": "PROVISIONED"}})
    synth.template.has_resource_properties("AWS::DynamoDB::Table", {"TableName": "georebal-control"})
    # AND nothing outlives `cdk destroy`: not the stream, nor a KMS key, nor the custom resources' log group
    kept = {k: (r["Type"], r.get("DeletionPolicy")) for k, r in synth.template.to_json()["Resources"].items()
            if r.get("DeletionPolicy", "Delete") != "Delete"}
    assert kept == {}


def test_the_leases_table_is_pre_warmed_only_when_asked(emr: Any, custom: Any) -> None:
    # GIVEN the default stack and one with leases_warm_writes=6000, leases_warm_reads=20000 WHEN their tables are
    # inspected
    # THEN by default no table is pre-warmed (no one-time charge)
    assert not [r for r in emr.resources("AWS::DynamoDB::Table").values() if "WarmThroughput" in r["Properties"]]
    # AND with the settings the leases table (only) sustains 6,000 write and 20,000 read units/s from the start
    custom.template.has_resource_properties("AWS::DynamoDB::Table", {
        "TableName": "georebal-leases", "WarmThroughput": {"WriteUnitsPerSecond": 6000, "ReadUnitsPerSecond": 20000}})
    custom.template.has_resource_properties("AWS::DynamoDB::Table", {
        "TableName": "georebal-control", "WarmThroughput": Match.absent()})
