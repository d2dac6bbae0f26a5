"""What a worker reads of the control table: the active version and the swap head (``docs/CONTRACTS.md``).

``pk="active"`` is the version the router routes by (:class:`~geokernel.contracts.spec_pointer.ActivePointer`;
a worker needs its version only); ``pk="swap"`` (:class:`~geokernel.contracts.plan.SwapHead`) is the few fields
of the deploy plan a worker needs: ``from_version``, ``to_version``, ``mode`` and ``status`` (``started``,
``rolled_back``, ``done``). The full plan (``pk="plan"``) grows with the number of workers and is read by the deploy
controller only; a worker derives what the swap does to its own slot from the two specs
(:meth:`~geokernel.contracts.plan.SwapHead.keeps`).

Every worker polls both items every ``ACTIVE_POLL_S`` (2 s), so they are read in one ``BatchGetItem`` with
**eventual consistency**: half the read units of a strongly consistent read on the partition that holds them
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html), and a value a
moment old only delays what a worker does with it (a drain starts, a carry-over is prepared) by that moment:
claims and lease changes are conditional writes and never depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geo_service.errors import GeoServiceError
from geokernel.contracts.control import ControlKey
from geokernel.contracts.errors import ContractError
from geokernel.contracts.plan import SwapHead
from geokernel.contracts.spec_pointer import ActivePointer


class ControlError(GeoServiceError, RuntimeError):
    """A control item is malformed; the message names the item and the bad field."""


@dataclass(frozen=True, slots=True)
class ControlView:
    """``active`` version (None before the first flip) and the swap head (None before the first deploy)."""

    active: int | None = None
    plan: SwapHead | None = None

    def dropped(self, version: int) -> bool:
        """True when ``version`` will never go live: its plan was rolled back before any flip to it."""
        p = self.plan
        return p is not None and p.to_version == version and p.rolled_back and (self.active or 0) < version


def parse_swap(item: Mapping[str, Any]) -> SwapHead:
    """Decode a raw ``pk="swap"`` item (ControlError naming the bad field)."""
    try:
        return SwapHead.from_raw(item)
    except ContractError as exc:
        raise ControlError(str(exc)) from None


def parse_active(item: Mapping[str, Any]) -> int | None:
    """The version of a raw ``pk="active"`` item (ControlError naming a bad one)."""
    try:
        return ActivePointer.version_of_raw(item)
    except ContractError as exc:
        raise ControlError(str(exc)) from None


def read_control(dynamodb: Any, table: str, consistent: bool = False) -> ControlView:
    """Read ``active`` and ``swap`` in one batch, eventually consistent unless ``consistent``."""
    keys = [{"pk": {"S": ControlKey.ACTIVE}}, {"pk": {"S": ControlKey.SWAP}}]
    items: dict[str, Mapping[str, Any]] = {}
    for _attempt in range(5):
        resp = dynamodb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": consistent}})
        for item in resp.get("Responses", {}).get(table, []):
            items[item["pk"]["S"]] = item
        keys = resp.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        if not keys:
            break
    active = items.get(ControlKey.ACTIVE)
    swap = items.get(ControlKey.SWAP)
    return ControlView(active=parse_active(active) if active else None, plan=parse_swap(swap) if swap else None)
