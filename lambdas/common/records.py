"""Typed control-table records (``docs/CONTRACTS.md``, "AWS names and records").

``pk="desired"`` -> :class:`DesiredPointer`, ``pk="active"`` -> :class:`ActivePointer`,
``pk="snapshot"`` -> :class:`SnapshotMark` (the partitioner's idempotence record),
``pk="policy"`` -> :class:`PolicyMark`. ``pk="deploy"`` is :class:`lambdas.deploy.controller.DeployState`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lambdas.common.aws import ControlTable

DESIRED = "desired"
ACTIVE = "active"
DEPLOY = "deploy"
POLICY = "policy"
SNAPSHOT = "snapshot"


class RecordError(ValueError):
    """A control-table item is malformed; the message names the item and the bad field."""


def _int(item: Mapping[str, Any], key: str, pk: str) -> int:
    v = item.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise RecordError(f"control item {pk!r}: {key!r} must be an integer, got {v!r}")
    return v


def _str(item: Mapping[str, Any], key: str, pk: str) -> str:
    v = item.get(key)
    if not isinstance(v, str):
        raise RecordError(f"control item {pk!r}: {key!r} must be a string, got {v!r}")
    return v


@dataclass(frozen=True)
class DesiredPointer:
    """The latest published spec."""

    version: int
    spec_key: str
    published_at: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> DesiredPointer:
        return cls(_int(item, "version", DESIRED), _str(item, "spec_key", DESIRED), str(item.get("published_at", "")))


@dataclass(frozen=True)
class ActivePointer:
    """The spec the router routes by (flipped by the deploy controller)."""

    version: int
    spec_key: str
    stream_name: str
    flipped_at: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ActivePointer:
        return cls(_int(item, "version", ACTIVE), _str(item, "spec_key", ACTIVE), _str(item, "stream_name", ACTIVE),
                   str(item.get("flipped_at", "")))


@dataclass(frozen=True)
class SnapshotMark:
    """The last snapshot the partitioner processed (idempotence and staleness)."""

    manifest_key: str
    checksum: str
    window_end: str
    processed_at: str
    outcome: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> SnapshotMark:
        return cls(*(str(item.get(k, "")) for k in ("manifest_key", "checksum", "window_end", "processed_at",
                                                     "outcome")))


@dataclass(frozen=True)
class PolicyMark:
    """When the partitioner last published, and its last decision."""

    last_published_at: float | None
    last_decision: Mapping[str, Any]

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> PolicyMark:
        v = item.get("last_published_at")
        d = item.get("last_decision")
        return cls(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None,
                   dict(d) if isinstance(d, Mapping) else {})


def read_desired(control: ControlTable) -> DesiredPointer | None:
    item = control.get(DESIRED)
    return None if item is None else DesiredPointer.from_item(item)


def read_active(control: ControlTable) -> ActivePointer | None:
    item = control.get(ACTIVE)
    return None if item is None else ActivePointer.from_item(item)


def to_item(record: Any) -> dict[str, Any]:
    """Return a record dataclass as a control-table item body (``pk`` excluded)."""
    return asdict(record)
