"""The deployment item (control ``pk="deploy"``) as a record, and the groups of statuses the controller tests.

One deployment at a time; :class:`lambdas.deploy.controller.DeployController` moves it through its statuses
(:class:`~partitioner.contracts.DeployStatus`) and saves it with an optimistic lock on ``rev``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partitioner.contracts.control import DeployStatus

#: A swap is under way: its geo stream, plan or fleet exist and must be finished or rolled back.
IN_FLIGHT = (DeployStatus.DEPLOYING, DeployStatus.WAITING_GREEN, DeployStatus.FLIPPED, DeployStatus.DRAINING)
#: No swap under way: the next step may start one (a newer desired or queued version).
FINISHED = (DeployStatus.IDLE, DeployStatus.DONE, DeployStatus.ROLLED_BACK, DeployStatus.QUEUED)


@dataclass(frozen=True)
class DeployState:
    """The ``pk="deploy"`` item."""

    version: int | None = None
    status: str = DeployStatus.IDLE
    started_at: float = 0.0
    updated_at: float = 0.0
    reason: str = ""
    old_version: int | None = None
    queued_version: int | None = None
    failed_version: int = 0
    stage_since: float = 0.0
    rev: int | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> DeployState:
        def opt(k: str) -> int | None:
            v = item.get(k)
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        return cls(version=opt("version"), status=str(item.get("status", DeployStatus.IDLE)),
                   started_at=float(item.get("started_at") or 0.0), updated_at=float(item.get("updated_at") or 0.0),
                   reason=str(item.get("reason", "")), old_version=opt("old_version"),
                   queued_version=opt("queued_version"), failed_version=opt("failed_version") or 0,
                   stage_since=float(item.get("stage_since") or 0.0), rev=opt("rev"))

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT
