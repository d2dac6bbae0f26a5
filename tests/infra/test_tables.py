"""infra.tables: control (pk) and leases (lease_key), on-demand, PITR, KMS, deletion protection."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match


@pytest.mark.parametrize("key", ["pk", "lease_key"])
def test_table_key_pitr_and_encryption(emr: Any, key: str) -> None:
    # GIVEN the stack WHEN the table is inspected
    # THEN it has the contract key, on-demand billing, PITR, a customer-managed KMS key and deletion protection
    emr.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TableName": Match.absent(),  # retained (retain_data): a generated name, so a redeploy does not collide
            "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": Match.any_value()},
            "DeletionProtectionEnabled": True,
        },
    )


def test_the_leases_table_is_warmed_for_the_declared_fleet(emr: Any, glue: Any, custom: Any) -> None:
    # GIVEN the default stack (no fleet declared), one with fleet_workers=1000 (the glue fixture) and one with
    # explicit leases_warm_writes=6000 / leases_warm_reads=20000 (custom) WHEN the tables are inspected
    # THEN fleet_workers=1000 warms the leases table to 6 write and 14 read units/s per worker
    glue.template.has_resource_properties("AWS::DynamoDB::Table", {
        "KeySchema": [{"AttributeName": "lease_key", "KeyType": "HASH"}],
        "WarmThroughput": {"WriteUnitsPerSecond": 6000, "ReadUnitsPerSecond": 14000}})
    # AND the control table is never warmed
    glue.template.has_resource_properties("AWS::DynamoDB::Table", {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "WarmThroughput": Match.absent()})
    # AND explicit numbers are kept as they are, and with no fleet declared no table is warmed
    custom.template.has_resource_properties("AWS::DynamoDB::Table", {
        "KeySchema": [{"AttributeName": "lease_key", "KeyType": "HASH"}],
        "WarmThroughput": {"WriteUnitsPerSecond": 6000, "ReadUnitsPerSecond": 20000}})
    emr.template.has_resource_properties("AWS::DynamoDB::Table", {
        "KeySchema": [{"AttributeName": "lease_key", "KeyType": "HASH"}], "WarmThroughput": Match.absent()})
