"""Typed control-table records (``docs/CONTRACTS.md``, "AWS names and records").

``pk="desired"`` -> :class:`DesiredPointer`, ``pk="active"`` -> :class:`ActivePointer`,
``pk="snapshot"`` -> :class:`SnapshotMark` (the partitioner's idempotence record),
``pk="policy"`` -> :class:`PolicyMark`, ``pk="latency"`` -> :class:`LatencySample` list (snapshot-to-live per
version: written by the deploy controller at each flip, read by the partitioner's forecast).
``pk="deploy"`` is :class:`lambdas.deploy.controller.DeployState`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from lambdas.common.dynamodb import ControlTable
from lambdas.common.errors import AdapterError, LambdaError
from lambdas.common.timestamps import now_iso
from partitioner.contracts import ControlKey
from partitioner.spec.model import Spec

LATENCY_SAMPLES = 20  # the most recent flips kept in pk="latency"


class RecordError(LambdaError, ValueError):
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
        key = ControlKey.DESIRED
        return cls(_int(item, "version", key), _str(item, "spec_key", key), str(item.get("published_at", "")))


@dataclass(frozen=True)
class ActivePointer:
    """The spec the router routes by (flipped by the deploy controller)."""

    version: int
    spec_key: str
    stream_name: str
    flipped_at: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ActivePointer:
        key = ControlKey.ACTIVE
        return cls(_int(item, "version", key), _str(item, "spec_key", key), _str(item, "stream_name", key),
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
    item = control.get(ControlKey.DESIRED)
    return None if item is None else DesiredPointer.from_item(item)


def read_active(control: ControlTable) -> ActivePointer | None:
    item = control.get(ControlKey.ACTIVE)
    return None if item is None else ActivePointer.from_item(item)


def to_item(record: Any) -> dict[str, Any]:
    """Return a record dataclass as a control-table item body (``pk`` excluded)."""
    return asdict(record)


@dataclass(frozen=True)
class LatencySample:
    """One flip: the spec's snapshot window end, when it went live, and the seconds in between."""

    version: int
    snapshot_end: str  # the spec's source.window_end ("YYYY-MM-DDTHH:MM:SSZ")
    live_at: str  # ISO time of the flip
    latency_s: float

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LatencySample:
        v = item.get("latency_s")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise RecordError(f"control item {ControlKey.LATENCY!r}: 'latency_s' must be a number, got {v!r}")
        key = ControlKey.LATENCY
        return cls(_int(item, "version", key), _str(item, "snapshot_end", key), _str(item, "live_at", key),
                   float(v))


def read_latency_samples(control: ControlTable) -> tuple[LatencySample, ...]:
    """The recorded snapshot-to-live samples, oldest first (empty when none or malformed)."""
    item = control.get(ControlKey.LATENCY)
    samples = item.get("samples") if item else None
    if not isinstance(samples, list):
        return ()
    try:
        return tuple(LatencySample.from_item(s) for s in samples if isinstance(s, Mapping))
    except RecordError:
        return ()


def median_latency_s(samples: Sequence[LatencySample]) -> float | None:
    """The median snapshot-to-live seconds of ``samples`` (None without samples)."""
    return statistics.median(s.latency_s for s in samples) if samples else None


def record_live_latency(control: ControlTable, spec: Spec, live_at: float) -> LatencySample | None:
    """Record, at the flip of ``spec``, how long its snapshot took to go live (keeps the last 20 samples).

    Returns the sample, or None when the spec names no snapshot window end (``source.window_end``)
    or the control table could not be written: a flip never fails for its latency record.
    """
    end = spec.source.get("window_end") if isinstance(spec.source, Mapping) else None
    if not isinstance(end, str):
        return None
    try:
        ended = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    ended = ended if ended.tzinfo else ended.replace(tzinfo=UTC)
    sample = LatencySample(spec.version, end, now_iso(live_at), max(0.0, live_at - ended.timestamp()))
    try:
        kept = [s for s in read_latency_samples(control) if s.version != spec.version]
        samples = [*kept, sample][-LATENCY_SAMPLES:]
        control.put(ControlKey.LATENCY, {"samples": [asdict(s) for s in samples]})
    except AdapterError:
        return None
    return sample
