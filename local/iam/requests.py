"""What a request to the twin's AWS endpoint asks IAM to allow: who signed it, and each (action, resource) it needs.

:func:`read_call` reads one WSGI request as AWS receives it: the access key and service from the SigV4
``Authorization`` header, the operation from ``X-Amz-Target`` (Kinesis, DynamoDB, KMS, SQS: JSON protocols) or from
the method and path (S3, path-style), and the resources from the request's own parameters (a stream's name or ARN,
a shard iterator, a table's name, each table of a batch, a bucket and key, a queue URL, the event bus of each
``PutEvents`` entry). Each is one
:class:`Check`, plus the KMS permission an encrypted target implies (:func:`implied_kms`).

Notes
-----
* Account-level actions (``kinesis:DescribeLimits``, ``kinesis:ListStreams``, ``dynamodb:ListTables``) are checked
  against resource ``*``, as IAM does for actions without a resource type
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesisdatastreams.html).
* A request whose resource cannot be read from it (a ``ListShards`` continued by ``NextToken`` alone) gets a check
  with resource ``None``: the gate allows it when some statement allows the action at all, and counts it apart.
* S3 operations map to IAM actions as IAM names them (``ListObjectsV2`` needs ``s3:ListBucket``, ``HeadObject``
  ``s3:GetObject``; https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-with-s3-policy-actions.html).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from local.iam.policy import matches
from local.wiring.template import ACCOUNT_ID

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")
_TARGETS = {"Kinesis_20131202": "kinesis", "DynamoDB_20120810": "dynamodb", "TrentService": "kms",
            "AmazonSQS": "sqs", "AWSEvents": "events"}
#: Kinesis actions with no resource type (checked against ``*``).
KINESIS_ACCOUNT_ACTIONS = frozenset({"DescribeLimits", "ListStreams", "DescribeAccountSettings"})
#: DynamoDB transaction parts -> the action each needs on its table.
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem",
             "Get": "GetItem"}


@dataclass(frozen=True)
class Check:
    """One authorization a request needs: ``action`` on ``resource`` (None: not readable from the request)."""

    action: str
    resource: str | None
    implied: bool = False  # a KMS permission that the target's encryption implies


@dataclass(frozen=True)
class Call:
    """One signed request: who, which API operation, and what it needs allowed."""

    access_key: str
    service: str
    operation: str
    checks: tuple[Check, ...]


def signer(environ: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(access key, region, service) of a SigV4-signed request, or None when it is not signed."""
    m = _CREDENTIAL.search(str(environ.get("HTTP_AUTHORIZATION", "")))
    return (m.group(1), m.group(2), m.group(3)) if m else None


def read_call(environ: Mapping[str, Any], body: bytes, region: str,
              encryption_keys: Mapping[str, str]) -> Call | None:
    """The :class:`Call` of a request (None for an unsigned one, such as moto's own ``/moto-api``)."""
    signed = signer(environ)
    if signed is None:
        return None
    key, _, service = signed
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        prefix, _, operation = target.partition(".")
        service = _TARGETS.get(prefix, service)
        params = _json(body)
        checks = _json_checks(service, operation, params, region)
    elif service == "s3":
        operation, checks = s3_checks(str(environ.get("REQUEST_METHOD", "GET")), str(environ.get("PATH_INFO", "/")),
                                      str(environ.get("QUERY_STRING", "")), environ, body)
    else:
        params = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        operation = str(params.get("Action", "?"))
        checks = (Check(f"{service}:{operation}", _query_resource(service, params, region)),)
    return Call(key, service, operation, checks + implied_kms(checks, encryption_keys))


def _json(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def stream_arn(name: str, region: str) -> str:
    return f"arn:aws:kinesis:{region}:{ACCOUNT_ID}:stream/{name}"


def table_arn(name: str, region: str) -> str:
    return f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{name}"


def _json_checks(service: str, op: str, p: Mapping[str, Any], region: str) -> tuple[Check, ...]:
    action = f"{service}:{op}"
    if service == "kinesis":
        return (Check(action, _kinesis_resource(op, p, region)),)
    if service == "dynamodb":
        return _dynamodb_checks(op, p, region)
    if service == "sqs":
        return (Check(action, queue_arn(str(p["QueueUrl"]), region) if "QueueUrl" in p else "*"),)
    if service == "events" and op == "PutEvents":  # each entry needs it on its bus
        buses = sorted({str(e.get("EventBusName") or "default") for e in p.get("Entries", [])}) or ["default"]
        return tuple(Check(action, event_bus_arn(b, region)) for b in buses)
    if service == "kms":
        key = str(p.get("KeyId", "*"))
        return (Check(action, key if key.startswith("arn:") or key == "*" else
                      f"arn:aws:kms:{region}:{ACCOUNT_ID}:{key if key.startswith('alias/') else 'key/' + key}"),)
    return (Check(action, "*"),)


def _kinesis_resource(op: str, p: Mapping[str, Any], region: str) -> str | None:
    if op in KINESIS_ACCOUNT_ACTIONS:
        return "*"
    if p.get("StreamARN"):
        return str(p["StreamARN"])
    if p.get("StreamName"):
        return stream_arn(str(p["StreamName"]), region)
    if p.get("ShardIterator"):
        from moto.kinesis.utils import decompose_shard_iterator  # moto's iterator format (the twin's server)

        try:
            return stream_arn(decompose_shard_iterator(str(p["ShardIterator"]))[0], region)
        except (ValueError, IndexError):
            return None
    return None


def _dynamodb_checks(op: str, p: Mapping[str, Any], region: str) -> tuple[Check, ...]:
    if op in ("BatchGetItem", "BatchWriteItem"):
        return tuple(Check(f"dynamodb:{op}", table_arn(t, region)) for t in sorted(p.get("RequestItems", {})))
    if op in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for item in p.get("TransactItems", []):
            for part, body in item.items():
                out.append(Check(f"dynamodb:{_TRANSACT.get(part, part)}", table_arn(str(body.get("TableName")), region)))
        return tuple(out)
    if "TableName" in p:
        arn = table_arn(str(p["TableName"]), region)
        return (Check(f"dynamodb:{op}", f"{arn}/index/{p['IndexName']}" if p.get("IndexName") else arn),)
    return (Check(f"dynamodb:{op}", "*"),)


def event_bus_arn(name: str, region: str) -> str:
    """An EventBridge bus's ARN from its name (or the ARN itself)."""
    return name if name.startswith("arn:") else f"arn:aws:events:{region}:{ACCOUNT_ID}:event-bus/{name}"


def queue_arn(url: str, region: str) -> str:
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{region}:{account}:{name}"


def _query_resource(service: str, params: Mapping[str, str], region: str) -> str:
    if service == "sqs" and "QueueUrl" in params:
        return queue_arn(params["QueueUrl"], region)
    if service == "sts" and "RoleArn" in params:
        return params["RoleArn"]
    return "*"


def _sub(query: Mapping[str, Any], *names: str) -> bool:
    return any(n in query for n in names)


def s3_checks(method: str, path: str, query_string: str, environ: Mapping[str, Any],
              body: bytes) -> tuple[str, tuple[Check, ...]]:
    """(operation, checks) of a path-style S3 request."""
    q = parse_qs(query_string, keep_blank_values=True)
    bucket, _, key = unquote(path.lstrip("/")).partition("/")
    b_arn, o_arn = f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/{key}"
    if not key:
        if method in ("GET", "HEAD"):
            if _sub(q, "location"):
                return "GetBucketLocation", (Check("s3:GetBucketLocation", b_arn),)
            if _sub(q, "versions"):
                return "ListObjectVersions", (Check("s3:ListBucketVersions", b_arn),)
            if _sub(q, "uploads"):
                return "ListMultipartUploads", (Check("s3:ListBucketMultipartUploads", b_arn),)
            return ("ListObjectsV2" if _sub(q, "list-type") else "ListObjects" if method == "GET" else "HeadBucket",
                    (Check("s3:ListBucket", b_arn),))
        if method == "POST" and _sub(q, "delete"):
            keys = re.findall(rb"<Key>([^<]*)</Key>", body)
            return "DeleteObjects", tuple(Check("s3:DeleteObject", f"{b_arn}/{k.decode()}") for k in keys)
        return f"{method} bucket", (Check({"PUT": "s3:CreateBucket", "DELETE": "s3:DeleteBucket"}.get(method, "s3:*"),
                                          b_arn),)
    if method in ("GET", "HEAD"):
        if _sub(q, "tagging"):
            return "GetObjectTagging", (Check("s3:GetObjectTagging", o_arn),)
        if _sub(q, "uploadId"):
            return "ListParts", (Check("s3:ListMultipartUploadParts", o_arn),)
        action = "s3:GetObjectVersion" if _sub(q, "versionId") else "s3:GetObject"
        return ("GetObject" if method == "GET" else "HeadObject"), (Check(action, o_arn),)
    if method == "DELETE":
        if _sub(q, "uploadId"):
            return "AbortMultipartUpload", (Check("s3:AbortMultipartUpload", o_arn),)
        return "DeleteObject", (Check("s3:DeleteObjectVersion" if _sub(q, "versionId") else "s3:DeleteObject", o_arn),)
    if method == "PUT" and _sub(q, "tagging"):
        return "PutObjectTagging", (Check("s3:PutObjectTagging", o_arn),)
    checks = [Check("s3:PutObject", o_arn)]
    source = str(environ.get("HTTP_X_AMZ_COPY_SOURCE", ""))
    if method == "PUT" and source:
        checks.append(Check("s3:GetObject", f"arn:aws:s3:::{unquote(source.lstrip('/')).split('?')[0]}"))
        return "CopyObject", tuple(checks)
    return ("PutObject" if method == "PUT" and not _sub(q, "partNumber") else "MultipartUpload"), tuple(checks)


#: (action, the KMS action its encrypted target needs of the caller)
_IMPLIED = (
    ("kinesis:PutRecord", "kms:GenerateDataKey"), ("kinesis:PutRecords", "kms:GenerateDataKey"),
    ("kinesis:GetRecords", "kms:Decrypt"),
    ("s3:PutObject", "kms:GenerateDataKey"), ("s3:GetObject", "kms:Decrypt"),
    ("sqs:SendMessage", "kms:GenerateDataKey"), ("sqs:SendMessage", "kms:Decrypt"),
)
# Kinesis: producers need kms:GenerateDataKey, consumers kms:Decrypt
#   (https://docs.aws.amazon.com/streams/latest/dev/permissions-user-key-KMS.html);
# S3 SSE-KMS: an upload needs kms:GenerateDataKey, a download kms:Decrypt
#   (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html);
# SQS SSE-KMS: a producer needs kms:GenerateDataKey and kms:Decrypt
#   (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html).


def implied_kms(checks: tuple[Check, ...], encryption_keys: Mapping[str, str]) -> tuple[Check, ...]:
    """The KMS checks a request's encrypted targets imply (``encryption_keys``: resource ARN or pattern -> key)."""
    out: list[Check] = []
    for check in checks:
        if check.resource is None:
            continue
        target = check.resource.split("/", 1)[0] if check.action.startswith("s3:") else check.resource
        key = next((k for pattern, k in encryption_keys.items() if matches(pattern, target)), None)
        if key is None:
            continue
        out += [Check(kms, key, implied=True) for action, kms in _IMPLIED if action == check.action]
    return tuple(dict.fromkeys(out))
