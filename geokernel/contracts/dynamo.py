"""DynamoDB's attribute-value form, decoded to plain values: so each item record has one decoder.

The Lambdas read items through ``lambdas.runtime.dynamodb.ControlTable`` (plain values); the geo worker and the deploy
controller's lease reads get the attribute-value form (``{"N": "3"}``) from botocore. Both go through the same
``from_item`` of a record: the attribute-value form is first turned into plain values here, with the same rules as
the Lambdas' adapter (a whole ``N`` is an ``int``, any other a ``float``; ``NULL`` is None).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from geokernel.contracts.errors import ContractError


def plain_value(attr: Mapping[str, Any]) -> Any:
    """One attribute value (``{"N": "3"}``, ``{"M": {...}}``, ...) as a plain Python value."""
    if len(attr) != 1:
        raise ContractError(f"not a DynamoDB attribute value (one type key): {dict(attr)!r}")
    (kind, v), = attr.items()
    if kind == "NULL":
        return None
    if kind == "BOOL":
        return bool(v)
    if kind == "N":
        d = Decimal(v)
        return int(d) if d == d.to_integral_value() and "." not in v and "e" not in v.lower() else float(d)
    if kind == "S":
        return v
    if kind == "M":
        return {k: plain_value(x) for k, x in v.items()}
    if kind == "L":
        return [plain_value(x) for x in v]
    if kind == "SS":
        return list(v)
    raise ContractError(f"unsupported DynamoDB attribute type {kind!r}")


def plain_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A whole item in attribute-value form (as ``GetItem`` / ``BatchGetItem`` return it) as plain values."""
    return {str(k): plain_value(v) for k, v in item.items()}
