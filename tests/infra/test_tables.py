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
