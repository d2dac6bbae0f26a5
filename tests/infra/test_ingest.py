"""infra.ingest: the ingest stream is on-demand and KMS-encrypted with a rotating customer-managed key."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match


def test_ingest_stream_is_on_demand_and_kms_encrypted(emr: Any) -> None:
    # GIVEN the synthesized stack WHEN the Kinesis stream is inspected
    # THEN it is on-demand, named from the prefix, encrypted with a CMK
    emr.template.has_resource_properties(
        "AWS::Kinesis::Stream",
        {
            "Name": "georebal-ingest",
            "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
            "StreamEncryption": {"EncryptionType": "KMS", "KeyId": {"Fn::GetAtt": [Match.string_like_regexp("^IngestKey"), "Arn"]}},
        },
    )
    # AND the key rotates
    emr.template.has_resource_properties("AWS::KMS::Key", {"Description": "georebal: ingest stream encryption", "EnableKeyRotation": True})
    # AND the stream is the only CloudFormation-managed stream (geo streams are created at run time)
    assert len(emr.resources("AWS::Kinesis::Stream")) == 1
