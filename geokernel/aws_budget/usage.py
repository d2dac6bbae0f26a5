"""What one AWS call uses of each quota it counts against: pure functions of the call's parameters and response.

One call yields one or more :class:`Usage` records: a quota row's key (:data:`geokernel.aws_budget.quotas.BY_KEY`,
or ``"<service>.<Operation>"`` for a call no row covers), the scope it counts in (an account, a stream, a shard, a
table, an item, an S3 prefix) and the amount (calls, records, bytes, read or write units).

Notes
-----
* Kinesis ``GetRecords`` names its shard only through an opaque iterator: :class:`IteratorMap` remembers which
  shard each iterator handed out (``GetShardIterator``, ``NextShardIterator``) belongs to. An iterator it has not
  seen counts against the shard ``"?"``, which is reported, never silently dropped.
* DynamoDB units follow the developer guide's rules: a read unit is one strongly consistent read of up to 4 KB (an
  eventually consistent read costs half); a write unit is one write of up to 1 KB. Item sizes are the sizes of the
  attribute names and values as sent or returned (``ReturnConsumedCapacity`` is not used: moto does not return
  it). A write that fails its condition still consumes a write unit, so failed writes are counted too.
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
* An S3 prefix is the key up to its last ``/``: S3 scales its request rate per prefix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geokernel.aws_budget.quotas import BY_KEY, Scope

ACCOUNT = "account"
UNKNOWN_SHARD = "?"
READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024


@dataclass(frozen=True)
class Usage:
    """``amount`` of quota row ``key`` used in ``scope`` (see the module docstring)."""

    key: str
    scope: str
    amount: float


class IteratorMap:
    """Which shard each Kinesis shard iterator belongs to (bounded: an iterator is forgotten once it is used)."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self._shard: dict[str, str] = {}

    def give(self, iterator: object, shard: str) -> None:
        if isinstance(iterator, str) and iterator:
            if len(self._shard) >= self.LIMIT:
                self._shard.clear()
            self._shard[iterator] = shard

    def take(self, iterator: object) -> str:
        return self._shard.pop(iterator, UNKNOWN_SHARD) if isinstance(iterator, str) else UNKNOWN_SHARD


def _stream(params: Mapping[str, Any]) -> str:
    name = params.get("StreamName") or str(params.get("StreamARN", "")).rpartition("/")[2]
    return str(name or "?")


def _attr_size(value: Any) -> int:
    """The size DynamoDB bills for one attribute value in the low-level wire shape ({"S": ...}, {"M": {...}})."""
    if isinstance(value, Mapping):
        return sum(len(str(k)) + _attr_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_attr_size(v) for v in value)
    if isinstance(value, bytes | bytearray):
        return len(value)
    return len(str(value))


def _item_size(item: Mapping[str, Any] | None) -> int:
    return 0 if not item else sum(len(k) + _attr_size(v) for k, v in item.items())


def _key_of(key: Mapping[str, Any]) -> str:
    return "|".join(f"{k}={_scalar(v)}" for k, v in sorted(key.items()))


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        return str(next(iter(value.values())))
    return str(value)


def _read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units if consistent else units / 2)


def _write_units(size: int) -> float:
    return float(max(1, math.ceil(size / WRITE_UNIT_BYTES)))


def _ddb_reads(table: str, key: str, size: int, consistent: bool) -> list[Usage]:
    units = _read_units(size, consistent)
    return [Usage("dynamodb.read_units.partition", f"{table}#{key}", units),
            Usage("dynamodb.read_units.table", table, units)]


def _ddb_writes(table: str, key: str, size: int) -> list[Usage]:
    units = _write_units(size)
    return [Usage("dynamodb.write_units.partition", f"{table}#{key}", units),
            Usage("dynamodb.write_units.table", table, units)]


def _dynamodb(op: str, params: Mapping[str, Any], response: Mapping[str, Any]) -> list[Usage]:
    table = str(params.get("TableName", "?"))
    consistent = bool(params.get("ConsistentRead", False))
    if op == "GetItem":
        return _ddb_reads(table, _key_of(params.get("Key", {})), _item_size(response.get("Item")), consistent)
    if op == "PutItem":
        return _ddb_writes(table, _key_of(_key_attrs(params.get("Item", {}))), _item_size(params.get("Item")))
    if op in ("UpdateItem", "DeleteItem"):
        size = _item_size(params.get("Key")) + _attr_size(params.get("ExpressionAttributeValues", {}))
        size = max(size, _item_size(response.get("Attributes")))
        return _ddb_writes(table, _key_of(params.get("Key", {})), size)
    if op == "BatchGetItem":
        out: list[Usage] = []
        got = response.get("Responses", {})
        for name, request in params.get("RequestItems", {}).items():
            sizes = {_key_of(_key_attrs(i)): _item_size(i) for i in got.get(name, [])}
            for key in request.get("Keys", []):
                k = _key_of(key)
                out += _ddb_reads(str(name), k, sizes.get(k, 0), bool(request.get("ConsistentRead", False)))
        return out
    if op == "BatchWriteItem":
        out = []
        for name, requests in params.get("RequestItems", {}).items():
            for req in requests:
                item = (req.get("PutRequest") or {}).get("Item") or (req.get("DeleteRequest") or {}).get("Key") or {}
                out += _ddb_writes(str(name), _key_of(_key_attrs(item)), _item_size(item))
        return out
    if op in ("Query", "Scan"):
        size = sum(_item_size(i) for i in response.get("Items", []))
        values = params.get("ExpressionAttributeValues", {})
        scope = f"{table}#{'|'.join(_scalar(v) for _, v in sorted(values.items()))}" if op == "Query" else table
        units = _read_units(size, consistent)
        rows = [Usage("dynamodb.read_units.table", table, units)]
        return rows + ([Usage("dynamodb.read_units.partition", scope, units)] if op == "Query" else [])
    return []


_KEY_NAMES = ("pk", "sk", "lease_key", "leaseKey", "key", "id")


def _key_attrs(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item's key attributes, by the project's key names (any table here keys on one of them)."""
    found = {k: item[k] for k in _KEY_NAMES if k in item}
    return found or dict(item)


def _kinesis(op: str, params: Mapping[str, Any], response: Mapping[str, Any], iterators: IteratorMap) -> list[Usage]:
    stream = _stream(params)
    if op == "GetShardIterator":
        shard = f"{stream}/{params.get('ShardId', '?')}"
        iterators.give(response.get("ShardIterator"), shard)
        return [Usage("kinesis.GetShardIterator", shard, 1)]
    if op == "GetRecords":
        shard = iterators.take(params.get("ShardIterator"))
        # a call that read nothing because it failed (throttled: an error response; no answer: {}) leaves its
        # iterator valid, and the caller tries it again
        iterators.give(response.get("NextShardIterator") if "Records" in response else params.get("ShardIterator"),
                       shard)
        size = sum(len(r.get("Data", b"")) for r in response.get("Records", []))
        return [Usage("kinesis.GetRecords", shard, 1), Usage("kinesis.GetRecords.bytes", shard, size)]
    if op in ("PutRecords", "PutRecord"):
        entries = params.get("Records", []) if op == "PutRecords" else [params]
        results = response.get("Records", []) if op == "PutRecords" else [response]
        out = [Usage("kinesis.PutRecords", ACCOUNT, 1)]
        for entry, result in zip(entries, results, strict=False):
            shard = f"{stream}/{result.get('ShardId', '?')}"
            size = len(entry.get("Data", b"")) + len(str(entry.get("PartitionKey", "")))
            out += [Usage("kinesis.PutRecords.records", shard, 1), Usage("kinesis.PutRecords.bytes", shard, size)]
        return out
    row = f"kinesis.{op}"
    scope = stream if row in BY_KEY and BY_KEY[row].scope is Scope.STREAM else ACCOUNT
    return [Usage(row, scope, 1)]


_S3_PUTS = {"PutObject", "CopyObject", "DeleteObject", "DeleteObjects", "CreateMultipartUpload", "UploadPart",
            "CompleteMultipartUpload"}
_S3_GETS = {"GetObject", "HeadObject", "ListObjectsV2", "ListObjects"}


def _s3(op: str, params: Mapping[str, Any]) -> list[Usage]:
    bucket = str(params.get("Bucket", "?"))
    key = str(params.get("Key", params.get("Prefix", "")))
    prefix = f"{bucket}/{key.rpartition('/')[0]}"
    if op in _S3_PUTS:
        return [Usage("s3.put.prefix", prefix, 1)]
    if op in _S3_GETS:
        return [Usage("s3.get.prefix", prefix, 1)]
    return [Usage(f"s3.{op}", ACCOUNT, 1)]


def usages(service: str, op: str, params: Mapping[str, Any], response: Mapping[str, Any],
           iterators: IteratorMap) -> list[Usage]:
    """Every quota one call (``service`` as botocore names it, e.g. ``"kinesis"``) uses; see the module notes.

    Examples
    --------
    >>> [u.key for u in usages("s3", "PutObject", {"Bucket": "b", "Key": "out/v1/a.jsonl"}, {}, IteratorMap())]
    ['s3.put.prefix']
    """
    if service == "kinesis":
        return _kinesis(op, params, response, iterators)
    if service == "dynamodb":
        return [Usage(f"dynamodb.{op}", ACCOUNT, 1), *_dynamodb(op, params, response)]
    if service == "s3":
        return _s3(op, params)
    if service == "events" and op == "PutEvents":  # the calls are the quota; the entries are what they carry
        return [Usage("events.PutEvents", ACCOUNT, 1),
                Usage("events.PutEvents.entries", ACCOUNT, float(len(params.get("Entries", []))))]
    return [Usage(f"{service}.{op}", ACCOUNT, 1)]
