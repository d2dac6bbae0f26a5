"""The deploy plan of a swap (control ``pk="plan"``) and its head (control ``pk="swap"``), and how swaps are made.

The deploy controller writes :class:`PlanItem` when green starts (before the fleet starts) and updates its status
(``started`` -> ``done`` or ``rolled_back``); it reads it back to resume a swap, and the local report reads it.
Right after every write of the plan it writes :class:`SwapHead`, the few fields every worker polls (with
``pk="active"``, in one eventually consistent ``BatchGetItem``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from geokernel.contracts.control import ControlKey, control_item
from geokernel.contracts.dynamo import plain_item
from geokernel.contracts.errors import ContractError
from geokernel.contracts.fields import optional_int, text


class SwapMode(StrEnum):
    """How a new spec version reaches the workers (``SWAP_MODE`` of the deploy Lambdas and of the worker image).

    ``carry``: a slot that exists in both versions stays in the process that holds it, which loads only what it
    gains; only new slots start workers and only removed slots stop. ``whole``: every version starts a whole new
    fleet (ECS's own blue/green deployment in AWS) and the old one drains and stops.
    """

    CARRY = "carry"
    WHOLE = "whole"

    @classmethod
    def parse(cls, value: str, where: str) -> SwapMode:
        """``carry`` (also when empty) or ``whole``, any case; :class:`ContractError` naming ``where`` otherwise."""
        try:
            return cls(value.strip().lower() or cls.CARRY.value)
        except ValueError:
            raise ContractError(f"{where} must be one of {[m.value for m in cls]}, got {value!r}") from None


class PlanStatus(StrEnum):
    """Where the plan stored at ``pk="plan"`` is: workers prepare ``started`` plans and drop ``rolled_back`` ones."""

    STARTED = "started"
    ROLLED_BACK = "rolled_back"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class PlanItem:
    """Control ``pk="plan"``: a swap's slot ids and counts (no cell labels: those grow with the specs).

    ``kept`` slots stay in the process that holds them (``carry``), ``started`` get a fresh worker, ``stopped``
    drain and exit; ``moved_cells`` counts the cells that change worker and ``gains`` the cells each kept slot gains.
    ``fleet_started`` is set once the fleet's part of the swap was launched (a crash before it is resumed).
    """

    from_version: int | None
    to_version: int
    mode: SwapMode
    kept: tuple[str, ...]
    started: tuple[str, ...]
    stopped: tuple[str, ...]
    moved_cells: int
    gains: Mapping[str, int]
    status: PlanStatus
    updated_at: float
    fleet_started: bool = False

    def to_item(self) -> dict[str, Any]:
        """The item body (``pk`` excluded), in the field order the controller has always written."""
        item = {"from_version": self.from_version, "to_version": self.to_version, "mode": self.mode.value,
                "kept": list(self.kept), "started": list(self.started), "stopped": list(self.stopped),
                "moved_cells": self.moved_cells, "gains": dict(self.gains), "status": self.status.value,
                "updated_at": self.updated_at}
        return {**item, "fleet_started": True} if self.fleet_started else item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> PlanItem:
        """Decode the item's plain values; :class:`ContractError` naming the bad field and value."""
        what = control_item(ControlKey.PLAN)

        def ids(key: str) -> tuple[str, ...]:
            value = item.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ContractError(f"{what}: {key!r} must be a list of worker ids, got {value!r}")
            return tuple(value)

        to_version, from_version = item.get("to_version"), item.get("from_version")
        if not isinstance(to_version, int) or not (from_version is None or isinstance(from_version, int)):
            raise ContractError(f"{what}: bad versions {from_version!r} -> {to_version!r}")
        kept, started, stopped = ids("kept"), ids("started"), ids("stopped")
        mode = SwapMode.parse(text(item, "mode"), f"{what} mode")
        status = item.get("status")
        if status not in {s.value for s in PlanStatus}:
            raise ContractError(f"{what}: 'status' must be one of {[s.value for s in PlanStatus]}, got {status!r}")
        moved, gains, at = item.get("moved_cells", 0), item.get("gains", {}), item.get("updated_at", 0.0)
        return cls(from_version, to_version, mode, kept, started, stopped,
                   moved if isinstance(moved, int) else 0,
                   {str(k): v for k, v in gains.items()} if isinstance(gains, Mapping) else {},
                   PlanStatus(status), float(at) if isinstance(at, int | float) else 0.0,
                   bool(item.get("fleet_started", False)))


@dataclass(frozen=True, slots=True)
class SwapHead:
    """Control ``pk="swap"``: what a worker needs of the deploy plan, small enough for every worker to poll.

    The full plan (``pk="plan"``: kept, started and stopped slot lists, per-slot gains) grows with the number of
    workers; a thousand workers polling it would read O(workers) bytes each, O(workers^2) in all, from one item
    (one DynamoDB partition: 3,000 read units/s,
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html). A worker derives
    what the plan does to its own slot from the two specs instead (:meth:`keeps`): in ``carry`` mode a slot of both
    specs is kept, in ``whole`` mode none is (``lambdas/deploy/plan.py`` ``plan_swap``).
    """

    from_version: int | None
    to_version: int
    mode: str
    status: str
    updated_at: float = 0.0

    @property
    def started(self) -> bool:
        return self.status == PlanStatus.STARTED

    @property
    def rolled_back(self) -> bool:
        return self.status == PlanStatus.ROLLED_BACK

    def keeps(self, version: int, worker_id: str, new_ids: frozenset[str] | set[str]) -> bool:
        """True when this started carry swap moves slot ``worker_id`` of ``version`` over to ``to_version``.

        ``new_ids`` are the worker ids of ``to_version``'s spec."""
        return (self.started and self.mode == SwapMode.CARRY and self.from_version == version
                and self.to_version > version and worker_id in new_ids)

    def to_item(self) -> dict[str, Any]:
        """The item's attributes as plain values (``pk`` excluded)."""
        return {"from_version": self.from_version, "to_version": self.to_version, "mode": self.mode,
                "status": self.status, "updated_at": self.updated_at}

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> SwapHead:
        """Decode the item's plain values; :class:`ContractError` naming the bad attribute."""
        what = control_item(ControlKey.SWAP)
        to_version = optional_int(item, "to_version", what)
        if to_version is None:
            raise ContractError(f"{what} has no 'to_version': {dict(item)!r}")
        updated = item.get("updated_at")
        return cls(from_version=optional_int(item, "from_version", what), to_version=to_version,
                   mode=text(item, "mode"), status=text(item, "status"),
                   updated_at=float(updated) if isinstance(updated, int | float) else 0.0)

    @classmethod
    def from_raw(cls, item: Mapping[str, Mapping[str, Any]]) -> SwapHead:
        """Decode an item in attribute-value form (as ``BatchGetItem`` returns it)."""
        return cls.from_item(plain_item(item))
