"""Typed reads of one field of a stored item, each failure a :class:`ContractError` naming the item and value.

``what`` names the record in messages, e.g. ``control item 'desired'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geokernel.contracts.errors import ContractError


def require_int(item: Mapping[str, Any], key: str, what: str) -> int:
    """``item[key]`` as an integer (not a bool)."""
    v = item.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ContractError(f"{what}: {key!r} must be an integer, got {v!r}")
    return v


def require_str(item: Mapping[str, Any], key: str, what: str) -> str:
    """``item[key]`` as a string."""
    v = item.get(key)
    if not isinstance(v, str):
        raise ContractError(f"{what}: {key!r} must be a string, got {v!r}")
    return v


def require_number(item: Mapping[str, Any], key: str, what: str) -> float:
    """``item[key]`` as a float (an integer or a float, not a bool)."""
    v = item.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ContractError(f"{what}: {key!r} must be a number, got {v!r}")
    return float(v)


def optional_int(item: Mapping[str, Any], key: str, what: str) -> int | None:
    """``item[key]`` as an integer, None when absent or null; a decimal string counts (a number stored as ``S``)."""
    v = item.get(key)
    if v is None:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            pass
    raise ContractError(f"{what} has a bad {key!r}: {v!r}")


def text(item: Mapping[str, Any], key: str) -> str:
    """``item[key]`` as text, ``""`` when absent or null (fields a reader only shows or compares)."""
    v = item.get(key)
    return "" if v is None else str(v)
