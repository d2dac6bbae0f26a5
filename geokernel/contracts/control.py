"""The control table (key ``pk``): which items exist, the deployment's states, and the partitioner's own items.

The spec pointers ``desired`` and ``active`` are in :mod:`geokernel.contracts.spec_pointer`; the deploy plan and
its head (``plan``, ``swap``) in :mod:`geokernel.contracts.plan`. Here: :class:`ControlKey` (every ``pk``),
:class:`DeployStatus` and :class:`DeployState` (``pk="deploy"``), :class:`SnapshotMark` (``pk="snapshot"``), :class:`PolicyMark`
(``pk="policy"``) and :class:`LatencySample` (``pk="latency"``: written by the deploy controller at each flip, read
by the partitioner's forecast). Each record's ``to_item`` is the item body (``pk`` excluded) in plain values, as
``lambdas.runtime.dynamodb.ControlTable`` stores it; ``from_item`` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from geokernel.contracts.fields import require_int, require_number, require_str, text


class ControlKey(StrEnum):
    """The ``pk`` of each item of the control table."""

    DESIRED = "desired"    # the newest published spec version (partitioner)
    ACTIVE = "active"      # the version the router routes to (deploy controller, at the flip)
    DEPLOY = "deploy"      # the deployment in progress (deploy controller)
    PLAN = "plan"          # the swap plan of that deployment (workers read it to carry slots over)
    POLICY = "policy"      # the partitioner policy's last decision
    SNAPSHOT = "snapshot"  # the last snapshot the partitioner processed (idempotence)
    LATENCY = "latency"    # snapshot-to-live samples recorded at each flip
    SWAP = "swap"          # the few fields of "plan" a worker reads (SwapHead): a small item every worker polls
    CODE = "code"          # the last redeploy of the live spec for new worker code (deploy controller)


def control_item(key: ControlKey) -> str:
    """How messages name an item: ``control item 'desired'``."""
    return f"control item {key.value!r}"


class DeployStatus(StrEnum):
    """The ``status`` of the deployment item (control ``pk="deploy"``)."""

    IDLE = "idle"
    QUEUED = "queued"
    DEPLOYING = "deploying"
    WAITING_GREEN = "waiting_green"
    FLIPPED = "flipped"
    DRAINING = "draining"
    DONE = "done"
    ROLLED_BACK = "rolled_back"


#: A swap is under way: its geo stream, plan or fleet exist and must be finished or rolled back.
IN_FLIGHT = (DeployStatus.DEPLOYING, DeployStatus.WAITING_GREEN, DeployStatus.FLIPPED, DeployStatus.DRAINING)
#: No swap under way: the next step may start one (a newer desired or queued version).
FINISHED = (DeployStatus.IDLE, DeployStatus.DONE, DeployStatus.ROLLED_BACK, DeployStatus.QUEUED)


@dataclass(frozen=True)
class DeployState:
    """Control ``pk="deploy"``: the deployment in progress, written by the deploy controller only.

    Readers: the controller (to step it), the lifecycle hooks (is a swap in flight) and the local loop's observer
    (status timeline of each version). ``rev`` is the optimistic lock: the controller writes only over the ``rev``
    it read. Times are epoch seconds.
    """

    version: int | None = None
    status: str = DeployStatus.IDLE.value
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
        """A swap is under way (:data:`IN_FLIGHT`)."""
        return self.status in IN_FLIGHT

    def to_item(self) -> dict[str, Any]:
        """The item body (``pk`` excluded), in field order."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SnapshotMark:
    """Control ``pk="snapshot"``: the last snapshot the partitioner processed (idempotence and staleness).

    ``window_end`` is ``YYYY-MM-DDTHH:MM:SSZ`` (it sorts as text: the partitioner's condition compares it).
    """

    manifest_key: str
    checksum: str
    window_end: str
    processed_at: str
    outcome: str

    def to_item(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> SnapshotMark:
        return cls(*(text(item, k) for k in ("manifest_key", "checksum", "window_end", "processed_at", "outcome")))


@dataclass(frozen=True, slots=True)
class PolicyMark:
    """Control ``pk="policy"``: when the partitioner last published (epoch s), and its last decision."""

    last_published_at: float | None
    last_decision: Mapping[str, Any]

    def to_item(self) -> dict[str, Any]:
        return {"last_published_at": self.last_published_at, "last_decision": dict(self.last_decision)}

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> PolicyMark:
        v = item.get("last_published_at")
        d = item.get("last_decision")
        return cls(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None,
                   dict(d) if isinstance(d, Mapping) else {})


#: The most recent flips kept in ``pk="latency"``.
LATENCY_SAMPLES = 20


@dataclass(frozen=True, slots=True)
class LatencySample:
    """One flip: the spec's snapshot window end, when it went live, and the seconds in between."""

    version: int
    snapshot_end: str  # the spec's source.window_end ("YYYY-MM-DDTHH:MM:SSZ")
    live_at: str  # ISO time of the flip
    latency_s: float

    def to_item(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> LatencySample:
        what = control_item(ControlKey.LATENCY)
        latency_s = require_number(item, "latency_s", what)
        return cls(require_int(item, "version", what), require_str(item, "snapshot_end", what),
                   require_str(item, "live_at", what), latency_s)


def latency_item(samples: Sequence[LatencySample]) -> dict[str, Any]:
    """The ``pk="latency"`` item body: the last :data:`LATENCY_SAMPLES` of ``samples`` (oldest first)."""
    return {"samples": [s.to_item() for s in samples[-LATENCY_SAMPLES:]]}


def latency_samples(item: Mapping[str, Any] | None) -> tuple[LatencySample, ...]:
    """The samples of a ``pk="latency"`` item, oldest first (empty without an item or a ``samples`` list).

    Raises
    ------
    ContractError
        If a sample is malformed (the message names the field and the value).
    """
    samples = item.get("samples") if item else None
    if not isinstance(samples, list):
        return ()
    return tuple(LatencySample.from_item(s) for s in samples if isinstance(s, Mapping))
