"""Watches the control and leases tables: the timeline the report and the invariants use.

:class:`ControlObserver` polls DynamoDB every ``interval_s`` (default 0.5 s) and records:

* every change of the control records ``desired``, ``active``, ``deploy``, ``policy`` and the other
  :class:`~geokernel.contracts.control.ControlKey` items, read by key in one ``BatchGetItem`` (not a scan:
  with state handoff the control table also holds an item per state handed over, thousands in a run, and a scan
  of them every 0.5 s took half the embedded server's time and held the router back);
* per spec version, when its leases were first all owned, unexpired and ``ready`` (green
  ready) and when they were first all ``drained`` (blue drained);
* **lease safety**: an owner change on one lease while the previous owner's lease was still
  unexpired and not released is two owners of one partition (a violation);
* **flip safety**: when ``active`` moves to a version, that version must already be green
  ready in the same or an earlier observation (a violation otherwise);
* every **tenure** of a lease (:class:`LeaseTenure`: one owner's hold of ``v<version>#<worker>``, with the
  times the worker wrote on the item: ``claimed_at``, ``ready_at``, ``serving_at``, ``drained_at``,
  ``released_at``) and every deploy **plan** (control ``pk="plan"``): the report's swap section
  (:mod:`local.report.swaps`) tells from them which slots carried over in the same process;
* **served**: spans when the version control ``active`` names (the router's target) had no lease held by a
  running worker process (owner set, unexpired, not drained, the owner's pid alive: ``alive_pids``), e.g. after
  ECS stopped a version's tasks; the run fails if one lasts longer than a lease duration (a version
  the router sends to must always have a worker reading it).

It reads the tables the way an operator would, so it checks the real components rather
than trusting them; leases and the active pointer are decoded with their records of :mod:`geokernel.contracts`
(:class:`~geokernel.contracts.lease.LeaseRecord`, :class:`~geokernel.contracts.spec_pointer.ActivePointer`);
the deployment and the plans with :class:`~geokernel.contracts.control.DeployState` and
:class:`~geokernel.contracts.plan.PlanItem` (a plan item the contract rejects is a violation, named).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from geokernel.contracts.control import ControlKey, DeployState
from geokernel.contracts.errors import ContractError
from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord
from geokernel.contracts.plan import PlanItem
from geokernel.contracts.slot import SlotId
from geokernel.contracts.spec_pointer import ActivePointer, parse_spec_key, spec_key
from local.aws import EmbeddedAws
from local.loops import LoopThread


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


@dataclass
class VersionTimeline:
    """What the observer saw of one spec version's fleet (epoch seconds)."""

    version: int
    slots: int = 0
    first_lease_at: float | None = None
    green_ready_at: float | None = None
    flipped_at: float | None = None
    flip_observed_at: float | None = None
    drained_at: float | None = None
    deploy_started_at: float | None = None
    statuses: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class LeaseTenure:
    """One owner's hold of one lease, with the times (epoch s) the worker wrote on the item."""

    key: str
    version: int
    worker: str
    owner: str
    first_seen: float
    claimed_at: float | None = None
    ready_at: float | None = None
    serving_at: float | None = None
    drained_at: float | None = None
    released_at: float | None = None

    @property
    def pid(self) -> int | None:
        """The process id in the owner (``<host>:<pid>:<random>``)."""
        return _owner_pid(self.owner)


_TENURE_TIMES = ("claimed_at", "ready_at", "serving_at", "drained_at", "released_at")


@dataclass
class LeaseSample:
    owner: str | None
    expires_at: float
    released: bool
    at: float


class ControlObserver(LoopThread):
    """Polls the control and leases tables; see the module docstring."""

    def __init__(self, aws: EmbeddedAws, interval_s: float = 0.5,
                 alive_pids: Callable[[], set[int]] | None = None) -> None:
        super().__init__("observer", interval_s)
        self.alive_pids = alive_pids
        #: (from, to, version): spans the active version had no lease held by a running process (see module doc)
        self.unserved: list[tuple[float, float, int]] = []
        self._unserved_since: tuple[float, int] | None = None
        self.last_step_at = 0.0  # wall time of the last completed step (open spans end there)
        ddb = self._ddb = aws.resource("dynamodb")
        self.control = ddb.Table(aws.names.control_table)
        self.leases = ddb.Table(aws.names.leases_table)
        self.records: dict[str, dict[str, Any]] = {}
        self.changes: list[tuple[float, str, dict[str, Any]]] = []
        self.versions: dict[int, VersionTimeline] = {}
        self.lease_last: dict[str, LeaseSample] = {}
        self.owner_changes: list[tuple[float, str, str | None, str | None]] = []
        self.violations: list[str] = []
        self.active_version: int | None = None
        self.flips: list[tuple[int | None, int, float]] = []  # (from, to, observed_at)
        self.spec_slots: dict[int, int] = {}
        self.specs: dict[int, Any] = {}  # version -> geokernel.partition_spec.model.Spec, every spec object published
        self.tenures: dict[str, list[LeaseTenure]] = {}  # lease key -> its owners' tenures in order
        self.plans: dict[int, PlanItem] = {}  # to_version -> the last plan seen for it
        self._s3 = aws.client("s3")
        self._specs_bucket = aws.names.specs_bucket

    def timeline(self, version: int) -> VersionTimeline:
        return self.versions.setdefault(version, VersionTimeline(version))

    def step(self) -> None:
        # Control first, leases second: readiness is set before a flip and stays set, so a flip seen
        # in this control scan always has its green readiness visible in the lease scan after it.
        control = {str(i["pk"]): _plain(i) for i in _control_items(self._ddb, self.control.name)}
        now = time.time()  # before the lease scan: an item read later was at least this fresh (a slow scan on a
        # loaded machine must not make a renewed lease look expired)
        leases = [_plain(i) for i in _scan(self.leases)]
        self.last_step_at = time.time()
        for version in self._published_versions():
            if version not in self.specs:
                self._load_spec(version)
        self._observe_leases(leases, now)
        self._observe_control(control, now)
        self._observe_served(leases, now)

    def _observe_served(self, items: Iterable[Mapping[str, Any]], now: float) -> None:
        """Track spans when the router's version had no slot served by a running worker process."""
        v = self.active_version
        if v is None or self.alive_pids is None:
            return
        alive = self.alive_pids()
        served = any(lease.version == v and lease.owner and not lease.drained and lease.expires_at > now
                     and _owner_pid(lease.owner) in alive for lease in _leases(items))
        since = self._unserved_since
        if served and since is not None:
            self.unserved.append((since[0], now, since[1]))
            self._unserved_since = None
        elif not served and since is None:
            self._unserved_since = (now, v)

    def longest_unserved(self) -> tuple[float, int | None]:
        """The longest span (seconds) the active version had no running worker, and that version (open spans count
        up to now)."""
        # an open span counts up to the last observation, not to the report: the teardown that stops the workers
        # comes after the last step, and the time it takes says nothing about the run
        return max(((b - a, v) for a, b, v in self.unserved_spans()), default=(0.0, None))

    def unserved_spans(self) -> list[tuple[float, float, int]]:
        """Every span ``(start, end, version)`` the active version had no running worker, an open one up to the last
        observation (see :meth:`longest_unserved`)."""
        since = self._unserved_since
        return [*self.unserved, *([(since[0], max(since[0], self.last_step_at), since[1])] if since else [])]

    def _observe_leases(self, items: Iterable[Mapping[str, Any]], now: float) -> None:
        by_version: dict[int, list[LeaseRecord]] = {}
        for lease in _leases(items):
            version = lease.version
            if version is None:
                continue
            key = str(SlotId(version, lease.worker_id))
            by_version.setdefault(version, []).append(lease)
            owner = lease.owner or None
            sample = LeaseSample(owner, lease.expires_at, lease.released, now)
            last = self.lease_last.get(key)
            if last is not None and last.owner != sample.owner:
                self.owner_changes.append((now, key, last.owner, sample.owner))
                if (last.owner is not None and sample.owner is not None and not last.released
                        and last.expires_at > now):
                    self.violations.append(
                        f"two owners of lease {key!r}: {sample.owner!r} took it at {now:.1f} while "
                        f"{last.owner!r} held it until {last.expires_at:.1f} (not released)")
            self.lease_last[key] = sample
            self._tenure(key, version, lease, owner, now)
        for version, held in by_version.items():
            tl = self.timeline(version)
            if tl.first_lease_at is None and any(lease.owner for lease in held):
                tl.first_lease_at = now
            slots = self.spec_slots.get(version, 0)
            tl.slots = slots
            if slots and tl.green_ready_at is None and sum(lease.live_and_ready(now) for lease in held) >= slots:
                tl.green_ready_at = now
            if slots and tl.drained_at is None and len(held) >= slots and all(lease.drained for lease in held):
                tl.drained_at = now

    def _tenure(self, key: str, version: int, lease: LeaseRecord, owner: str | None, now: float) -> None:
        """Open a tenure for a new owner; record the lease times on the current (or, once released, last) one."""
        tenures = self.tenures.setdefault(key, [])
        if owner is not None and (not tenures or tenures[-1].owner != owner):
            tenures.append(LeaseTenure(key, version, lease.worker_id, owner, now))
        if not tenures:
            return
        current = tenures[-1]
        for name in _TENURE_TIMES:  # claimed_at first: a later time counts only if it is this owner's (>= its claim)
            stamp = getattr(lease, name)
            if stamp is None or getattr(current, name) is not None:
                continue
            if name == "claimed_at" or (current.claimed_at is not None and stamp >= current.claimed_at):
                setattr(current, name, stamp)

    def _observe_control(self, control: dict[str, dict[str, Any]], now: float) -> None:
        plan_item = control.get(ControlKey.PLAN)
        if plan_item is not None and plan_item != self.records.get(ControlKey.PLAN):
            try:
                plan = PlanItem.from_item(plan_item)
                self.plans[plan.to_version] = plan
            except ContractError as exc:
                self.violations.append(f"unreadable deploy plan at {now:.1f}: {exc}")
        for pk, item in control.items():
            if self.records.get(pk) != item:
                self.records[pk] = item
                self.changes.append((now, pk, item))
                deploy = DeployState.from_item(item) if pk == ControlKey.DEPLOY else None
                if deploy is not None and deploy.version is not None:
                    tl = self.timeline(deploy.version)
                    tl.statuses.append((now, deploy.status))
                    if tl.deploy_started_at is None:
                        tl.deploy_started_at = deploy.started_at or now
        active = control.get(ControlKey.ACTIVE)
        version = _active_version(active)
        if active is None or version is None or version == self.active_version:
            return
        tl = self.timeline(version)
        tl.flip_observed_at = now
        tl.flipped_at = _epoch(active.get("flipped_at")) or now
        if tl.green_ready_at is None:
            self.violations.append(f"flip to v{version} observed at {now:.1f} before its green fleet was ready "
                                   f"(leases of v{version} not all owned, unexpired and ready)")
        self.flips.append((self.active_version, version, now))
        self.active_version = version

    def _published_versions(self) -> list[int]:
        """Versions with a spec object :func:`~geokernel.contracts.spec_pointer.spec_key` (published, immutable)."""
        versions = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._specs_bucket, Prefix="specs/v"):
            for obj in page.get("Contents", []):
                version = parse_spec_key(obj["Key"])
                if version is not None:
                    versions.append(version)
        return versions

    def _load_spec(self, version: int) -> None:
        """Read the spec object of ``version`` (immutable, written before any pointer names it)."""
        from geokernel.partition_spec.parse import spec_from_json

        key = spec_key(version)
        try:
            body = self._s3.get_object(Bucket=self._specs_bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return  # listed a moment ago: retried at the next poll
        spec = spec_from_json(body, where=f"s3://{self._specs_bucket}/{key}")
        self.specs[version] = spec
        self.spec_slots[version] = len(spec.workers)


def _control_items(ddb: Any, table: str) -> list[dict[str, Any]]:
    """Every :class:`ControlKey` item of the control table that exists (consistent reads, unprocessed keys retried)."""
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {table: {"Keys": [{"pk": k.value} for k in ControlKey], "ConsistentRead": True}}
    while request:
        resp = ddb.batch_get_item(RequestItems=request)
        items.extend(resp.get("Responses", {}).get(table, []))
        request = resp.get("UnprocessedKeys") or {}
    return items


def _scan(table: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"ConsistentRead": True}
    while True:
        resp = table.scan(**kwargs)
        items.extend(resp.get("Items", []))
        if "LastEvaluatedKey" not in resp:
            return items
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def _leases(items: Iterable[Mapping[str, Any]]) -> list[LeaseRecord]:
    """The slot leases among scanned leases-table items (the handover summaries are left out)."""
    leases = (LeaseRecord.from_item(i) for i in items if LEASE_KEY_ATTR in i)
    return [lease for lease in leases if lease.version is not None]


def _active_version(item: Mapping[str, Any] | None) -> int | None:
    try:
        return None if item is None else ActivePointer.version_of(item)
    except ContractError:
        return None


def _owner_pid(owner: str) -> int | None:
    """The process id in a lease owner (``<host>:<pid>:<random>``)."""
    parts = owner.split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def _epoch(value: Any) -> float | None:
    """Epoch seconds from a number (s or ms) or an ISO-8601 string; None if absent or unreadable."""
    import datetime as dt

    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
