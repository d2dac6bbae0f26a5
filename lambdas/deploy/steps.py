"""The primitive steps of a blue/green swap: what the deploy controller's transitions do to AWS and the fleet.

:class:`SwapSteps` holds the adapters and performs each step of one swap from ``old_version`` (blue) to ``version``
(green): create the geo stream and publish its shards, plan the swap and start the fleet's part of it, test green's
leases, move the active pointer, test blue's leases, retire blue, roll green back. It decides nothing about *when*:
:class:`lambdas.deploy.controller.DeployController` (a ``SwapSteps``) chooses the step from the deployment's status.
The steps are public so a driver can run them one by one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from geokernel.contracts.control import ControlKey
from geokernel.contracts.plan import PlanStatus, SwapHead, SwapMode
from geokernel.contracts.spec_pointer import ActivePointer, spec_key
from geokernel.contracts.stream import StreamManifest, geo_stream_name
from geokernel.partition_spec.model import Spec
from lambdas.deploy.errors import DeployError
from lambdas.deploy.fleet import Fleet
from lambdas.deploy.plan import DeployPlan, plan_from_item, plan_item, plan_swap
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.records import read_active, record_live_latency, to_item
from lambdas.runtime.s3 import SpecStore
from lambdas.runtime.timestamps import now_iso

FLEET_STARTED = "fleet_started"  # plan item flag: start_fleet completed (a crash before it is resumed)


class SwapSteps:
    """The steps of a swap over the adapters; see the module docstring.

    Parameters
    ----------
    control, leases, specs, streams
        Adapters (:mod:`lambdas.runtime.dynamodb`, :mod:`lambdas.runtime.s3`, :mod:`lambdas.runtime.kinesis`).
    fleet : Fleet
    prefix : str
        Resource prefix (geo stream ``<prefix>-geo-v<n>`` when a spec has no ``stream_name``).
    swap_mode : SwapMode
        ``carry`` or ``whole``: what :func:`~lambdas.deploy.plan.plan_swap` keeps.
    code_stale : callable, optional
        True when the fleet runs other worker code than the stack's: the swap is then planned ``whole``.
    clock : callable
        Epoch seconds (lease ``expires_at`` is epoch seconds).
    """

    def __init__(self, control: ControlTable, leases: LeaseTable, specs: SpecStore, streams: GeoStreams,
                 fleet: Fleet, *, prefix: str, swap_mode: SwapMode, code_stale: Callable[[], bool] | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.control = control
        self.leases = leases
        self.specs = specs
        self.streams = streams
        self.fleet = fleet
        self.prefix = prefix
        self.swap_mode = SwapMode(swap_mode)
        self.code_stale = code_stale or (lambda: False)
        self.clock = clock

    def spec(self, version: int) -> Spec:
        """The spec of ``version`` (raises SpecError naming the object when there is none)."""
        return self.specs.get(spec_key(version))

    def stream_name(self, spec: Spec) -> str:
        """The geo stream of ``spec``: its ``stream_name``, else ``<prefix>-geo-v<version>``."""
        return spec.stream_name or geo_stream_name(self.prefix, spec.version)

    # ------------------------------------------------------------ primitives
    def start(self, version: int) -> str:
        """Create the version's geo stream (provisioned, each worker's shards: ``spec.shard_count``); return its name."""
        spec = self.spec(version)
        name = self.stream_name(spec)
        self.streams.create(name, spec.shard_count)
        return name

    def publish_shards(self, version: int) -> StreamManifest:
        """List the ACTIVE geo stream's shards once and publish them for the workers (one S3 object).

        Workers read this manifest instead of calling Kinesis: ``DescribeStreamSummary`` allows 20 calls/s per
        account, and a thousand workers opening their slots at once would be throttled
        (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamSummary.html)."""
        spec = self.spec(version)
        name = self.stream_name(spec)
        manifest = StreamManifest(version=version, stream_name=name, shards=self.streams.shards(name))
        self.specs.put_stream_manifest(manifest)
        return manifest

    def shard_shortfall(self, version: int) -> str | None:
        """Why the account cannot open ``version``'s geo stream now (None when it can).

        A swap keeps the old version's stream open beside the new one until the old drained, so the new stream's
        shards must fit beside every shard already open in the account and region (the default quota is 20,000
        shards in us-east-1, us-west-2 and eu-west-1 and 1,000 or 6,000 elsewhere,
        https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html). ``CreateStream`` beyond
        the quota fails with ``LimitExceededException``; checking first keeps the old version serving and says why.
        """
        need = self.spec(version).shard_count
        quota = self.streams.shard_quota()
        if quota.room_for(need):
            return None
        return (f"v{version} not deployed: its geo stream needs {need} shards and {quota.open} of the account's "
                f"{quota.limit} shard quota are open in this region ({quota.open + need} > {quota.limit}); the old "
                f"version keeps serving. Raise the Kinesis shard quota (Service Quotas) or lower max_load's worker count")

    def _stored_plan(self, version: int, old_version: int | None) -> dict[str, Any] | None:
        item = self.control.get(ControlKey.PLAN)
        if item is not None and item.get("to_version") == version and item.get("from_version") == old_version:
            return item
        return None

    def plan(self, version: int, old_version: int | None) -> DeployPlan:
        """The swap from ``old_version`` to ``version``: as stored when it started (no spec needed), else planned now."""
        item = self._stored_plan(version, old_version)
        if item is not None:
            return plan_from_item(item)
        old = self.spec(old_version) if old_version is not None else None
        return plan_swap(old, self.spec(version), self.swap_mode)

    def mark_plan(self, plan: DeployPlan, status: PlanStatus) -> None:
        """Set the status of ``plan`` at control ``pk="plan"`` (stored anew if it is not the stored one)."""
        item = self._stored_plan(plan.to_version, plan.from_version)
        body = {**item, "status": status.value, "updated_at": self.clock()} if item else plan_item(
            plan, status, self.clock())
        self._store_plan(plan, status, {k: v for k, v in body.items() if k != "pk"})

    def _store_plan(self, plan: DeployPlan, status: PlanStatus, item: Mapping[str, Any]) -> None:
        """Write the plan (``pk="plan"``, the controller's record) and then its head (``pk="swap"``, what workers poll)."""
        self.control.put(ControlKey.PLAN, item)
        head = SwapHead(from_version=plan.from_version, to_version=plan.to_version, mode=plan.mode.value,
                        status=status.value, updated_at=self.clock())
        self.control.put(ControlKey.SWAP, head.to_item())

    def start_fleet(self, version: int, old_version: int | None = None) -> DeployPlan:
        """Plan the swap, store the plan (workers read it before they claim), then start the fleet's part.

        New worker code (:attr:`code_stale`) makes the swap ``whole``: a carried slot would stay in a process of
        the old code."""
        mode = SwapMode.WHOLE if self.code_stale() else self.swap_mode
        plan = plan_swap(self.spec(old_version) if old_version is not None else None, self.spec(version), mode)
        self.publish_shards(version)
        self._store_plan(plan, PlanStatus.STARTED, plan_item(plan, PlanStatus.STARTED, self.clock()))
        self.fleet.start(plan)
        self._mark_fleet_started(plan)
        return plan

    def _mark_fleet_started(self, plan: DeployPlan) -> None:
        item = self._stored_plan(plan.to_version, plan.from_version)
        if item is not None:
            self.control.put(ControlKey.PLAN, {**{k: v for k, v in item.items() if k != "pk"}, FLEET_STARTED: True})

    def fleet_started(self, version: int, old_version: int | None) -> bool:
        """True once :meth:`start_fleet` completed for this swap (the stored plan says ``fleet_started``)."""
        item = self._stored_plan(version, old_version)
        return item is not None and bool(item.get(FLEET_STARTED))

    def resume_fleet(self, version: int, old_version: int | None) -> DeployPlan:
        """Start the fleet's part of a swap whose stepper stopped (crashed, timed out) before it had: from the stored
        plan if there is one (the workers may already read it), else planned and stored now."""
        item = self._stored_plan(version, old_version)
        if item is None:
            return self.start_fleet(version, old_version)
        plan = plan_from_item(item)
        self.fleet.start(plan)
        self._mark_fleet_started(plan)
        return plan

    def advance_fleet(self, version: int, old_version: int | None) -> bool:
        """Let the fleet launch the next part of a started swap (see :meth:`Fleet.advance`); True once all of it
        was launched (or the fleet has not started it yet: :meth:`resume_fleet` does that)."""
        item = self._stored_plan(version, old_version)
        if item is None or not item.get(FLEET_STARTED):
            return True
        return bool(self.fleet.advance(plan_from_item(item)))

    def green_ready(self, version: int) -> bool:
        """True when every worker of ``version`` has a live lease (owner, not expired) marked ready."""
        spec = self.spec(version)
        states = self.leases.states(version, [w.id for w in spec.workers])
        now = self.clock()
        return all(w.id in states and states[w.id].live_and_ready(now) for w in spec.workers)

    def flip(self, version: int) -> bool:
        """Move control ``pk="active"`` forward to ``version``; True if active is now at ``version`` or later."""
        spec = self.spec(version)
        pointer = ActivePointer(version, spec_key(version), self.stream_name(spec), now_iso(self.clock()))
        if self.control.put_forward(ControlKey.ACTIVE, to_item(pointer)):
            record_live_latency(self.control, spec, self.clock())  # snapshot-to-live seconds; never fails the flip
            return True
        active = read_active(self.control)
        return active is not None and active.version >= version

    def flipped(self, version: int) -> bool:
        """True when control ``pk="active"`` is at ``version`` or later (the router already follows it)."""
        active = read_active(self.control)
        return active is not None and active.version >= version

    def blue_drained(self, old_version: int) -> bool:
        """True when every lease of ``old_version`` says ``drained``."""
        spec = self.spec(old_version)
        states = self.leases.states(old_version, [w.id for w in spec.workers])
        return all(w.id in states and states[w.id].drained for w in spec.workers)

    def retire(self, old_version: int, version: int, *, delete_stream: bool = True) -> None:
        """Stop the workers the plan of ``old_version -> version`` stops and (unless told not to) delete the old stream."""
        plan = self.plan(version, old_version)
        self.fleet.stop(plan)
        self.mark_plan(plan, PlanStatus.DONE)
        if delete_stream:
            self.streams.delete(self.stream_name(self.spec(old_version)))

    def rollback(self, version: int, old_version: int | None = None) -> None:
        """Abandon ``version`` before its flip: drop its plan, stop what it started, delete its stream; blue serves."""
        active = read_active(self.control)
        if active is not None and active.version >= version:
            raise DeployError(f"cannot roll back v{version}: the active pointer already moved to v{active.version}")
        plan = self.plan(version, old_version)
        self.mark_plan(plan, PlanStatus.ROLLED_BACK)  # first: kept slots release their claims on the new version
        self.fleet.abort(plan)
        self.streams.delete(self.stream_name(self.spec(version)))
