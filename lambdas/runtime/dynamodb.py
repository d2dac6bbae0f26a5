"""DynamoDB adapters: the control table (conditional writes of plain items) and the leases table (read side).

The control table (key ``pk``) holds the desired/active/deploy/plan/policy/snapshot items (``docs/CONTRACTS.md``);
the leases table holds one item per worker slot ``v<version>#<worker_id>``, written by the workers and read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.dynamo import plain_value
from geokernel.contracts.errors import ContractError
from geokernel.contracts.lease import LeaseRecord, read_lease_batches
from lambdas.runtime.clients import error_code
from lambdas.runtime.errors import AdapterError


def _to_ddb(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, float) and not math.isfinite(value):
        return {"S": repr(value)}  # DynamoDB numbers cannot be NaN or infinite
    if isinstance(value, (int, float, Decimal)):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, Mapping):
        return {"M": {str(k): _to_ddb(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [_to_ddb(v) for v in value]}
    raise AdapterError(f"cannot store {value!r} of type {type(value).__name__} in DynamoDB")


def _from_ddb(attr: Mapping[str, Any]) -> Any:
    """Plain value of one DynamoDB attribute (the contracts' decoder); AdapterError for a type it does not read."""
    try:
        return plain_value(attr)
    except ContractError as exc:
        raise AdapterError(str(exc)) from None


class ControlTable:
    """The control table (key ``pk``): desired/active/deploy/policy/snapshot items, conditional writes."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._ddb = dynamodb
        self.table = table

    def get(self, pk: str) -> dict[str, Any] | None:
        """Return the item ``pk`` as plain Python values (strongly consistent), or None."""
        try:
            resp = self._ddb.get_item(TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True)
        except ClientError as exc:
            raise AdapterError(f"control table {self.table!r}: get {pk!r} failed: {exc}") from exc
        item = resp.get("Item")
        return None if item is None else {k: _from_ddb(v) for k, v in item.items()}

    def put(self, pk: str, item: Mapping[str, Any], *, condition: str | None = None,
            values: Mapping[str, Any] | None = None) -> bool:
        """Put ``item`` at ``pk``; return False when ``condition`` does not hold."""
        body = {"pk": {"S": pk}, **{k: _to_ddb(v) for k, v in item.items() if k != "pk"}}
        kw: dict[str, Any] = {"TableName": self.table, "Item": body}
        if condition:
            kw["ConditionExpression"] = condition
            if values:
                kw["ExpressionAttributeValues"] = {k: _to_ddb(v) for k, v in values.items()}
        try:
            self._ddb.put_item(**kw)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise AdapterError(f"control table {self.table!r}: put {pk!r} failed: {exc}") from exc
        return True

    def put_forward(self, pk: str, item: Mapping[str, Any]) -> bool:
        """Put ``item`` (which has an int ``version``) only if ``pk`` is absent or holds a lower version."""
        return self.put(pk, item, condition="attribute_not_exists(pk) OR version < :v",
                        values={":v": int(item["version"])})

    def put_after(self, pk: str, item: Mapping[str, Any], expected_version: int | None) -> bool:
        """Compare and swap: put ``item`` only if ``pk`` still holds ``expected_version`` (absent when None).

        The partitioner publishes this way: a spec built on version ``n`` becomes ``desired`` only while ``desired``
        is ``n``, so its window path and its fast path never overwrite each other's version unseen.
        """
        if expected_version is None:
            return self.put(pk, item, condition="attribute_not_exists(pk)")
        return self.put(pk, item, condition="version = :p", values={":p": int(expected_version)})

    def put_if_rev(self, pk: str, item: Mapping[str, Any], expected_rev: int | None) -> bool:
        """Optimistic lock: put ``item`` (with ``rev = expected_rev + 1``) only if the stored ``rev`` matches."""
        if expected_rev is None:
            return self.put(pk, item, condition="attribute_not_exists(pk)")
        return self.put(pk, item, condition="rev = :r", values={":r": expected_rev})


class LeaseTable:
    """Reads leases ``v<version>#<worker_id>`` in batches (strongly consistent; the workers write them)."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._ddb = dynamodb
        self.table = table

    def states(self, version: int, worker_ids: Sequence[str]) -> dict[str, LeaseRecord]:
        """Return the leases that exist among ``worker_ids`` of ``version`` (absent workers are left out)."""
        try:
            read = read_lease_batches(self._ddb.batch_get_item, self.table, version, worker_ids)
        except ClientError as exc:
            raise AdapterError(f"leases table {self.table!r}: batch get failed: {exc}") from exc
        if read.unprocessed:
            raise AdapterError(f"leases table {self.table!r}: {read.unprocessed} keys of v{version} left unprocessed")
        return read.leases
