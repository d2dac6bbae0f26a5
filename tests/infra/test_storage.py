"""infra.storage: six encrypted, TLS-only, private, logged data buckets with lifecycle rules + an access-log bucket."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

BLOCK_ALL = {"BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}


def _data_buckets(synth: Any) -> dict[str, Any]:
    return {k: v for k, v in synth.resources("AWS::S3::Bucket").items() if k.startswith("Storage") and "AccessLogs" not in k}


def test_seven_buckets_six_of_them_data(emr: Any) -> None:
    # GIVEN the stack WHEN its buckets are listed
    buckets = emr.resources("AWS::S3::Bucket")
    # THEN there are six data buckets plus the access-log bucket
    assert len(_data_buckets(emr)) == 6
    assert len([k for k in buckets if "AccessLogs" in k]) == 1


def test_data_buckets_are_kms_encrypted_private_and_logged(emr: Any) -> None:
    # GIVEN each data bucket
    for logical_id, bucket in _data_buckets(emr).items():
        props = bucket["Properties"]
        # THEN SSE-KMS with bucket keys, all public access blocked, server access logs, lifecycle rules
        (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms", logical_id
        assert rule["BucketKeyEnabled"] is True
        assert props["PublicAccessBlockConfiguration"] == BLOCK_ALL
        assert "DestinationBucketName" in props["LoggingConfiguration"]
        assert props["LifecycleConfiguration"]["Rules"], logical_id


def test_every_bucket_denies_plain_http(emr: Any) -> None:
    # GIVEN the bucket policies WHEN inspected
    policies = emr.resources("AWS::S3::BucketPolicy").values()
    denies = [
        s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]  # fmt: skip
    # THEN each of the seven buckets has a TLS-only deny statement
    assert len(denies) == 7


def test_specs_bucket_is_versioned_and_keeps_noncurrent_versions_90_days(emr: Any) -> None:
    # GIVEN the specs bucket THEN it is versioned and expires old versions
    emr.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": {"Status": "Enabled"},
            "LifecycleConfiguration": {
                "Rules": Match.array_with([Match.object_like({"NoncurrentVersionExpiration": {"NoncurrentDays": 90}})])
            },
        },
    )


def test_quarantine_bucket_has_the_request_metrics_filter_the_alarm_reads(emr: Any) -> None:
    # GIVEN the quarantine bucket THEN it publishes request metrics for quarantine/ under filter QuarantineWrites
    emr.template.has_resource_properties(
        "AWS::S3::Bucket",
        {"MetricsConfigurations": [{"Id": "QuarantineWrites", "Prefix": "quarantine/"}]},
    )


def test_snapshots_expire_and_access_logs_use_s3_managed_encryption(emr: Any) -> None:
    # GIVEN the lifecycle rules and the log bucket
    emr.template.has_resource_properties(
        "AWS::S3::Bucket",
        {"LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like({"Prefix": "snapshots/", "ExpirationInDays": 7})])}},
    )
    # THEN the access-log bucket is SSE-S3 (log delivery cannot use KMS) and owner-enforced
    emr.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


def test_data_is_retained_by_default_and_destroyable_on_request(emr: Any) -> None:
    # GIVEN the default config (retain_data true) THEN data buckets survive a stack deletion
    for bucket in _data_buckets(emr).values():
        assert bucket["DeletionPolicy"] == "Retain"


def test_every_data_bucket_is_versioned_and_expires_noncurrent_versions(emr: Any) -> None:
    # GIVEN each data bucket THEN an overwrite or delete keeps the previous version for a while (checkpoints: 1 day)
    for logical_id, bucket in _data_buckets(emr).items():
        props = bucket["Properties"]
        assert props.get("VersioningConfiguration") == {"Status": "Enabled"}, logical_id
        days = [r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in props["LifecycleConfiguration"]["Rules"]
                if "NoncurrentVersionExpiration" in r]
        expected = 90 if "Specs" in logical_id else 1 if "Checkpoints" in logical_id else 7
        assert days == [expected], logical_id


def test_the_access_log_bucket_acknowledges_checkov_versioning_and_logging(emr: Any) -> None:
    (bucket,) = [b for k, b in emr.resources("AWS::S3::Bucket").items() if "AccessLogs" in k]
    assert [s["id"] for s in bucket["Metadata"]["checkov"]["skip"]] == ["CKV_AWS_21", "CKV_AWS_18"]
