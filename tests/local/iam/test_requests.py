"""local.iam.requests: what a signed request asks IAM to allow (the action on each resource, and implied KMS)."""

from __future__ import annotations

import json
from typing import Any

from local.iam.requests import Check, read_call

REGION = "us-east-1"
STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/georebal-geo-v1"
KEYS = {"arn:aws:kinesis:us-east-1:123456789012:stream/georebal-geo-v*": "arn:aws:kms:us-east-1:123456789012:key/Geo",
        "arn:aws:s3:::specs": "arn:aws:kms:us-east-1:123456789012:key/Storage",
        "arn:aws:sqs:us-east-1:123456789012:failures": "arn:aws:kms:us-east-1:123456789012:key/Q"}


def _environ(service: str, *, target: str = "", method: str = "POST", path: str = "/", query: str = "",
             **headers: str) -> dict[str, Any]:
    env = {"HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential=AKIAPART/20261207/{REGION}/{service}/aws4_request, "
                                 "SignedHeaders=host, Signature=abc",
           "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query}
    if target:
        env["HTTP_X_AMZ_TARGET"] = target
    env.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    return env


def _checks(env: dict[str, Any], body: dict[str, Any] | bytes = b"") -> tuple[Check, ...]:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    call = read_call(env, raw, REGION, KEYS)
    assert call is not None and call.access_key == "AKIAPART"
    return call.checks


def test_a_put_to_an_encrypted_geo_stream_needs_the_put_and_the_keys_generate_data_key() -> None:
    # GIVEN a PutRecords to geo stream v1 (encrypted with the geo streams' key) WHEN read THEN both are needed
    checks = _checks(_environ("kinesis", target="Kinesis_20131202.PutRecords"),
                     {"StreamName": "georebal-geo-v1", "Records": []})
    assert checks == (Check("kinesis:PutRecords", STREAM),
                      Check("kms:GenerateDataKey", "arn:aws:kms:us-east-1:123456789012:key/Geo", implied=True))


def test_an_account_level_action_is_checked_on_star() -> None:
    # GIVEN DescribeLimits (no resource type in IAM) WHEN read THEN its resource is "*"
    assert _checks(_environ("kinesis", target="Kinesis_20131202.DescribeLimits"), {}) == (
        Check("kinesis:DescribeLimits", "*"),)


def test_a_batch_or_transaction_needs_each_of_its_tables() -> None:
    # GIVEN a BatchGetItem over two tables and a transaction that puts in one and checks another
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/"
    batch = _checks(_environ("dynamodb", target="DynamoDB_20120810.BatchGetItem"),
                    {"RequestItems": {"leases": {}, "control": {}}})
    txn = _checks(_environ("dynamodb", target="DynamoDB_20120810.TransactWriteItems"),
                  {"TransactItems": [{"Put": {"TableName": "control"}}, {"ConditionCheck": {"TableName": "leases"}}]})
    # THEN each table is one check, with the action each part of the transaction needs
    assert batch == (Check("dynamodb:BatchGetItem", table + "control"), Check("dynamodb:BatchGetItem", table + "leases"))
    assert txn == (Check("dynamodb:PutItem", table + "control"), Check("dynamodb:ConditionCheckItem", table + "leases"))


def test_s3_operations_map_to_the_iam_actions_iam_names() -> None:
    # GIVEN a listing, a head, a get of an encrypted bucket, a copy and a multi-object delete (path-style)
    listing = _checks(_environ("s3", method="GET", path="/specs", query="list-type=2&prefix=specs%2F"))
    head = _checks(_environ("s3", method="HEAD", path="/out/a/b.json"))
    get = _checks(_environ("s3", method="GET", path="/specs/specs/v1.json"))
    copy = _checks(_environ("s3", method="PUT", path="/out/new", x_amz_copy_source="/specs/specs/v1.json"))
    delete = _checks(_environ("s3", method="POST", path="/out", query="delete"),
                     b"<Delete><Object><Key>a</Key></Object><Object><Key>b/c</Key></Object></Delete>")
    # THEN they need s3:ListBucket on the bucket, s3:GetObject (+ kms:Decrypt of the bucket's key), PutObject on the
    # copy and GetObject on its source, and a DeleteObject per key
    assert listing == (Check("s3:ListBucket", "arn:aws:s3:::specs"),)
    assert head == (Check("s3:GetObject", "arn:aws:s3:::out/a/b.json"),)
    assert get == (Check("s3:GetObject", "arn:aws:s3:::specs/specs/v1.json"),
                   Check("kms:Decrypt", "arn:aws:kms:us-east-1:123456789012:key/Storage", implied=True))
    assert copy[:2] == (Check("s3:PutObject", "arn:aws:s3:::out/new"),
                        Check("s3:GetObject", "arn:aws:s3:::specs/specs/v1.json"))
    assert delete == (Check("s3:DeleteObject", "arn:aws:s3:::out/a"), Check("s3:DeleteObject", "arn:aws:s3:::out/b/c"))


def test_a_message_to_an_encrypted_queue_needs_generate_data_key_and_decrypt() -> None:
    # GIVEN an SQS SendMessage (JSON protocol) to a KMS-encrypted queue WHEN read THEN it needs both key actions
    checks = _checks(_environ("sqs", target="AmazonSQS.SendMessage"),
                     {"QueueUrl": "http://127.0.0.1:5000/123456789012/failures", "MessageBody": "{}"})
    assert [c.action for c in checks] == ["sqs:SendMessage", "kms:GenerateDataKey", "kms:Decrypt"]
    assert checks[0].resource == "arn:aws:sqs:us-east-1:123456789012:failures"


def test_an_unsigned_request_is_not_a_call() -> None:
    # GIVEN moto's own API (unsigned) WHEN read THEN it is nobody's call
    assert read_call({"REQUEST_METHOD": "POST", "PATH_INFO": "/moto-api/reset-auth"}, b"0", REGION, KEYS) is None


def test_a_putevents_call_needs_the_put_on_each_entrys_bus() -> None:
    # GIVEN a PutEvents call with entries for two buses and one for the default bus
    env = _environ("events", target="AWSEvents.PutEvents")
    body = {"Entries": [{"EventBusName": "fences"}, {"EventBusName": "fences"}, {},
                        {"EventBusName": "arn:aws:events:us-east-1:123456789012:event-bus/other"}]}
    # THEN it needs events:PutEvents on each bus once, by its ARN
    assert _checks(env, body) == (
        Check("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/other"),
        Check("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/default"),
        Check("events:PutEvents", "arn:aws:events:us-east-1:123456789012:event-bus/fences"),
    )
