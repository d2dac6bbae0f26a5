"""Reads and writes of control-table records through the Lambdas' adapter (``docs/CONTRACTS.md``).

The records and their codecs are defined once in :mod:`geokernel.contracts` (``pk="desired"`` and
``pk="active"``: :mod:`~geokernel.contracts.spec_pointer`; ``pk="snapshot"``, ``pk="policy"`` and
``pk="latency"``: :mod:`~geokernel.contracts.control`). Here: reading them through a
:class:`~lambdas.runtime.dynamodb.ControlTable` (a malformed item raises :class:`RecordError`), and the snapshot-to-live
latency the deploy controller records at each flip for the partitioner's forecast.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from geokernel.contracts.control import ControlKey, LatencySample, latency_item, latency_samples
from geokernel.contracts.errors import ContractError
from geokernel.contracts.spec_pointer import ActivePointer, DesiredPointer
from geokernel.partition_spec.model import Spec
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import AdapterError, LambdaError
from lambdas.runtime.timestamps import now_iso


class RecordError(LambdaError, ValueError):
    """A control-table item is malformed; the message names the item and the bad field."""


class ControlRecord(Protocol):
    """A control-table record of :mod:`geokernel.contracts`: it writes its own item body."""

    def to_item(self) -> dict[str, Any]: ...


def to_item(record: ControlRecord) -> dict[str, Any]:
    """Return a record's control-table item body (``pk`` excluded): ``record.to_item()``."""
    return record.to_item()


def read_desired(control: ControlTable) -> DesiredPointer | None:
    """The ``pk="desired"`` pointer, None before the first publish (:class:`RecordError` when malformed)."""
    item = control.get(ControlKey.DESIRED)
    try:
        return None if item is None else DesiredPointer.from_item(item)
    except ContractError as exc:
        raise RecordError(str(exc)) from None


def read_active(control: ControlTable) -> ActivePointer | None:
    """The ``pk="active"`` pointer, None before the first flip (:class:`RecordError` when malformed)."""
    item = control.get(ControlKey.ACTIVE)
    try:
        return None if item is None else ActivePointer.from_item(item)
    except ContractError as exc:
        raise RecordError(str(exc)) from None


def read_latency_samples(control: ControlTable) -> tuple[LatencySample, ...]:
    """The recorded snapshot-to-live samples, oldest first (empty when none or malformed)."""
    try:
        return latency_samples(control.get(ControlKey.LATENCY))
    except ContractError:
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
        control.put(ControlKey.LATENCY, latency_item([*kept, sample]))
    except AdapterError:
        return None
    return sample
