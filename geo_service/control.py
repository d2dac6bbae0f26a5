"""What a worker reads of the control table: the active version and the deploy plan (``docs/CONTRACTS.md``).

``pk="active"`` is the version the router routes by; ``pk="plan"`` is the swap the deploy controller
started (``lambdas/deploy/plan.py`` writes it; the worker image does not ship ``lambdas/``, so the few
fields it reads are parsed here): ``from_version``, ``to_version``, ``mode`` and ``kept`` (the slots whose
workers carry over), and ``status`` (``started``, ``rolled_back``, ``done``). Both are read in one
strongly consistent ``BatchGetItem``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geo_service.errors import GeoServiceError
from partitioner.contracts import ControlKey, PlanStatus


class ControlError(GeoServiceError, RuntimeError):
    """A control item is malformed; the message names the item and the bad field."""


@dataclass(frozen=True)
class PlanView:
    """The deploy plan as a worker needs it."""

    from_version: int | None
    to_version: int
    mode: str
    kept: frozenset[str]
    status: str

    @property
    def started(self) -> bool:
        return self.status == PlanStatus.STARTED

    @property
    def rolled_back(self) -> bool:
        return self.status == PlanStatus.ROLLED_BACK

    def keeps(self, version: int, worker_id: str) -> bool:
        """True when this started carry plan moves slot ``worker_id`` of ``version`` over to ``to_version``."""
        return (self.started and self.mode == "carry" and self.from_version == version and self.to_version > version
                and worker_id in self.kept)


@dataclass(frozen=True)
class ControlView:
    """``active`` version (None before the first flip) and the current plan (None before the first deploy)."""

    active: int | None = None
    plan: PlanView | None = None

    def dropped(self, version: int) -> bool:
        """True when ``version`` will never go live: its plan was rolled back before any flip to it."""
        p = self.plan
        return p is not None and p.to_version == version and p.rolled_back and (self.active or 0) < version


def _number(item: Mapping[str, Any], key: str, pk: str) -> int | None:
    attr = item.get(key)
    if attr is None or "NULL" in attr:
        return None
    raw = attr.get("N", attr.get("S"))
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ControlError(f"control item {pk!r} has a bad {key!r}: {attr!r}") from None


def parse_plan(item: Mapping[str, Any]) -> PlanView:
    """Decode a raw ``pk="plan"`` item."""
    to_version = _number(item, "to_version", ControlKey.PLAN)
    if to_version is None:
        raise ControlError(f"control item 'plan' has no 'to_version': {dict(item)!r}")
    kept = item.get("kept", {}).get("L", [])
    return PlanView(from_version=_number(item, "from_version", ControlKey.PLAN), to_version=to_version,
                    mode=item.get("mode", {}).get("S", ""), kept=frozenset(k["S"] for k in kept if "S" in k),
                    status=item.get("status", {}).get("S", ""))


def read_control(dynamodb: Any, table: str) -> ControlView:
    """Read ``active`` and ``plan`` in one consistent batch."""
    keys = [{"pk": {"S": ControlKey.ACTIVE}}, {"pk": {"S": ControlKey.PLAN}}]
    items: dict[str, Mapping[str, Any]] = {}
    for _attempt in range(5):
        resp = dynamodb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": True}})
        for item in resp.get("Responses", {}).get(table, []):
            items[item["pk"]["S"]] = item
        keys = resp.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        if not keys:
            break
    active = items.get(ControlKey.ACTIVE)
    plan = items.get(ControlKey.PLAN)
    return ControlView(active=_number(active, "version", ControlKey.ACTIVE) if active else None,
                       plan=parse_plan(plan) if plan else None)
