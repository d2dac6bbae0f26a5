"""DeployController: the blue/green deploy state machine, the same in AWS (hooks) and in the local loop.

One deployment at a time, persisted in control ``pk="deploy"`` (optimistic lock on ``rev``)::

    {version, status, started_at, updated_at, reason,          # the contract's fields
     old_version, queued_version, failed_version, stage_since, rev}

Statuses and transitions (:meth:`DeployController.step` applies as many as are possible now)::

    idle/done/rolled_back --(a newer desired or queued version)--> deploying      start(): geo stream created
    deploying   --(stream ACTIVE)--> start_fleet() -------------> waiting_green   plan stored, fleet.start(plan)
    waiting_green --(fleet never started)--> resume_fleet() -----> waiting_green  a crash between save and start
    waiting_green --(green_ready)--> flip() --------------------> flipped         active pointer moved forward
    waiting_green --(GREEN_TIMEOUT_S)--> rollback() ------------> rolled_back     plan rolled back, fleet.abort(plan),
                                                                                  green stream deleted, blue serves
    flipped     --(no old version)------------------------------> done
    flipped     ------------------------------------------------> draining
    draining    --(blue_drained)--> retire(old) ----------------> done            fleet.stop(plan), old stream deleted
    draining    --(DRAIN_TIMEOUT_S)-----------------------------> done            old stream KEPT (reason says so)

**The deploy plan** (:mod:`lambdas.deploy.plan`): when the new stream is ready the controller computes
``plan_swap(spec(blue), spec(green), swap_mode)``, stores it at control ``pk="plan"`` (status ``started``;
the workers read it) and hands it to the fleet. In ``carry`` mode (the default) the plan keeps every slot
that is in both specs: the worker process holding ``v<blue>#w`` claims ``v<green>#w`` itself and loads only
what it gains, so the fleet starts workers for the new slots only, and after blue drained it stops the
removed slots only. In ``whole`` mode every green slot starts a fresh worker and every blue one stops. The
readiness test (every green lease live and ready), the flip and the drain test (every blue lease drained)
are the same in both modes.

* :meth:`request` records a newly published version as ``queued_version``; a newer one supersedes
  a queued one, and a deployment in flight is never interrupted. A rolled-back version is not retried
  (``failed_version``); the next published version is.
* ``deploying`` and ``waiting_green`` also time out after ``GREEN_TIMEOUT_S`` counted from ``started_at``;
  if evaluating the next step raises (say the version's spec became unreadable) past that timeout,
  :meth:`fail` marks the version rolled back without needing its spec; before it, the error propagates.
* The primitive steps are public so a driver can run them one by one: :meth:`start`,
  :meth:`green_ready`, :meth:`flip`, :meth:`blue_drained`, :meth:`retire`, :meth:`rollback`.

The fleet is an adapter (:class:`Fleet`: ``start(plan)``, ``stop(plan)``, ``abort(plan)``):
:class:`lambdas.common.aws.EcsFleet` in AWS (``carry``: the service's desired count only; ``whole``: a
task-definition revision carrying ``SPEC_VERSION``, i.e. ECS's own blue/green deployment), worker processes
in the local loop (``local/fleet.py``'s ``LocalFleet``, same three methods).

Local-loop driving::

    ctl = DeployController(control, leases, specs, streams, fleet, prefix="georebal")
    ctl.request(desired_version)          # after the partitioner published
    while True:
        state = ctl.step()                # call every second or so; it never blocks for long
        if state.status in ("done", "rolled_back") and state.version == desired_version:
            break

In AWS the deployer Lambda calls ``request`` + ``step(allow_start=True)`` (and, in ``carry`` mode, where no
ECS deployment and so no lifecycle hook is involved, keeps stepping while it runs); in ``whole`` mode the
lifecycle hook calls ``step(allow_start=False)`` and maps the status to ``hookStatus`` (:mod:`lambdas.deploy.hooks`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from lambdas.common import records as latency_records  # issue 11: snapshot-to-live per version
from lambdas.common.aws import ControlTable, GeoStreams, LeaseTable, SpecStore, now_iso
from lambdas.common.errors import LambdaError
from lambdas.common.records import read_active, read_desired, to_item
from lambdas.deploy.plan import DeployPlan, plan_from_item, plan_item, plan_swap
from partitioner.contracts.control import ControlKey, DeployStatus
from partitioner.contracts.plan import PlanStatus, SwapHead, SwapMode
from partitioner.contracts.spec_pointer import ActivePointer, spec_key
from partitioner.contracts.stream import StreamManifest, geo_stream_name
from partitioner.spec import Spec

IN_FLIGHT = (DeployStatus.DEPLOYING, DeployStatus.WAITING_GREEN, DeployStatus.FLIPPED, DeployStatus.DRAINING)
FLEET_STARTED = "fleet_started"  # plan item flag: start_fleet completed (a crash before it is resumed)
FLEET_START_GRACE_S = 30.0  # a waiting_green swap whose fleet has not started this long after the save is resumed
FINISHED = (DeployStatus.IDLE, DeployStatus.DONE, DeployStatus.ROLLED_BACK, DeployStatus.QUEUED)


ADVANCE_EVERY_S = 5.0  # see DeployController(advance_every_s=)


class DeployError(LambdaError, RuntimeError):
    """The controller cannot proceed (e.g. a requested version has no spec); the message says why."""


class Fleet(Protocol):
    """Where workers run: ECS (AWS) or local processes. Each call gets the swap's :class:`DeployPlan`."""

    def start(self, plan: DeployPlan) -> Any:
        """Before the flip: fresh workers for ``plan.started`` (kept slots are claimed by their own workers)."""

    def stop(self, plan: DeployPlan) -> Any:
        """After the old version drained: stop the workers of ``plan.stopped`` (they drained and exit)."""

    def abort(self, plan: DeployPlan) -> Any:
        """Rollback before the flip: stop what :meth:`start` started (kept slots drop their claims themselves)."""

    def advance(self, plan: DeployPlan) -> bool:
        """While green warms up: start the next part of what :meth:`start` began (a fleet that paces its launches);
        True once everything the plan starts was launched."""


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


class DeployController:
    """Blue/green deploy of spec versions; see the module docstring.

    Parameters
    ----------
    control, leases, specs, streams
        Adapters (:mod:`lambdas.common.aws`).
    fleet : Fleet
    prefix : str
        Resource prefix (geo stream ``<prefix>-geo-v<n>`` when a spec has no ``stream_name``).
    green_timeout_s, drain_timeout_s : float
        Give up waiting for green (-> rollback) / for blue to drain (-> done, old stream kept).
    stream_wait_s : float
        How long :meth:`step` with ``allow_start=True`` may block waiting for a new geo stream to become
        ACTIVE (0 = never; the hooks' ``step(allow_start=False)`` never blocks).
    swap_mode : SwapMode
        ``carry`` (default) or ``whole``: what :func:`~lambdas.deploy.plan.plan_swap` keeps.
    code_stale : callable, optional
        True when the fleet runs other worker code than the stack's (:meth:`lambdas.common.aws.EcsFleet.code_stale`):
        the next swap is then planned ``whole`` (every slot on a fresh worker of the new code) whatever
        ``swap_mode`` says. Default: never.
    fleet_start_grace_s : float
        A ``waiting_green`` swap whose fleet start never completed (the stepper died between saving and starting)
        is resumed by a step this long after the save (:meth:`resume_fleet`).
    advance_every_s : float
        A ``waiting_green`` step lets the fleet launch its next part (:meth:`Fleet.advance`) only this long after
        the fleet started, so the step that started it does not launch a second part in the same second.
    clock : callable
        Epoch seconds (lease ``expires_at`` is epoch seconds).
    """

    def __init__(self, control: ControlTable, leases: LeaseTable, specs: SpecStore, streams: GeoStreams,
                 fleet: Fleet, *, prefix: str = "georebal", green_timeout_s: float = 900.0,
                 drain_timeout_s: float = 900.0, stream_wait_s: float = 0.0,
                 swap_mode: SwapMode = SwapMode.CARRY, code_stale: Callable[[], bool] | None = None,
                 fleet_start_grace_s: float = FLEET_START_GRACE_S, advance_every_s: float = ADVANCE_EVERY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.control = control
        self.leases = leases
        self.specs = specs
        self.streams = streams
        self.fleet = fleet
        self.prefix = prefix
        self.green_timeout_s = green_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.stream_wait_s = stream_wait_s
        self.swap_mode = SwapMode(swap_mode)
        self.code_stale = code_stale or (lambda: False)
        self.fleet_start_grace_s = fleet_start_grace_s
        self.advance_every_s = advance_every_s
        self.clock = clock

    # ------------------------------------------------------------------ state
    def state(self) -> DeployState:
        item = self.control.get(ControlKey.DEPLOY)
        return DeployState() if item is None else DeployState.from_item(item)

    def _save(self, old: DeployState, new: DeployState) -> bool:
        now = self.clock()
        body = asdict(replace(new, updated_at=now, rev=(old.rev or 0) + 1))
        return self.control.put_if_rev(ControlKey.DEPLOY, body, old.rev)

    def spec(self, version: int) -> Spec:
        return self.specs.get(spec_key(version))

    def stream_name(self, spec: Spec) -> str:
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
            latency_records.record_live_latency(self.control, spec, self.clock())  # issue 11; never fails the flip
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

    # ---------------------------------------------------------- orchestration
    def request(self, version: int) -> DeployState:
        """Record that ``version`` was published (a newer request supersedes a queued one)."""
        self.spec(version)  # fails loudly (SpecError naming the object) if there is no such spec
        for _ in range(10):
            st = self.state()
            if version <= max(st.queued_version or 0, st.version or 0 if st.status != DeployStatus.IDLE else 0):
                return st
            new = replace(st, queued_version=version, reason=f"v{version} queued")
            if st.status == DeployStatus.IDLE:
                new = replace(new, status=DeployStatus.QUEUED)
            if self._save(st, new):
                return self.state()
        raise DeployError(f"could not record request for v{version}: control item 'deploy' kept changing")

    def step(self, *, allow_start: bool = True, max_transitions: int = 8) -> DeployState:
        """Advance the deployment as far as possible now; return the resulting state."""
        st = self.state()
        for _ in range(max_transitions):
            try:
                nxt = self._next(st, allow_start)
            except Exception as exc:
                if (st.status in (DeployStatus.DEPLOYING, DeployStatus.WAITING_GREEN)
                        and self.clock() - st.started_at > self.green_timeout_s
                        and not (st.version is not None and self.flipped(st.version))):
                    return self.fail(st, f"v{st.version} failed and timed out after {self.green_timeout_s:g}s: {exc}")
                raise
            if nxt is None:
                return st
            if not self._save(st, nxt[0]):
                st = self.state()  # another stepper moved it; re-evaluate from the stored state
                continue
            if nxt[1] is not None:
                nxt[1]()
            st = self.state()
        return st

    def fail(self, st: DeployState, reason: str) -> DeployState:
        """Mark the in-flight version rolled back without needing its spec; clean up what can be cleaned."""
        v = st.version if st.version is not None else 0
        new = replace(st, status=DeployStatus.ROLLED_BACK, stage_since=self.clock(), failed_version=max(st.failed_version, v),
                      reason=reason)
        if self._save(st, new):
            cleanups: tuple[Callable[[], object], ...] = (lambda: self.rollback(v, st.old_version),
                                                          lambda: self.streams.delete(geo_stream_name(self.prefix, v)))
            for cleanup in cleanups:
                try:
                    cleanup()
                except Exception:  # best effort: the version is already marked failed and never retried
                    continue
        return self.state()

    def _next(self, st: DeployState, allow_start: bool) -> tuple[DeployState, Callable[[], object] | None] | None:
        """Return (next state, side effect to run after saving it) or None when nothing can happen now."""
        now = self.clock()
        if st.status in FINISHED:
            target = self._target(st)
            if target is None or not allow_start:
                return None
            active = read_active(self.control)
            old = active.version if active else None
            short = self.shard_shortfall(target)
            if short is not None:  # the old version keeps serving; this version is not retried (failed_version)
                return (replace(st, version=target, status=DeployStatus.ROLLED_BACK, started_at=now, stage_since=now,
                                old_version=old, queued_version=None, failed_version=max(st.failed_version, target),
                                reason=short), None)
            return (replace(st, version=target, status=DeployStatus.DEPLOYING, started_at=now, stage_since=now, old_version=old,
                            queued_version=None, reason=f"deploying v{target} (blue v{old})"),
                    lambda: self.start(target))
        if st.version is None:
            raise DeployError(f"control item 'deploy' has status {st.status!r} but no version")
        v = st.version
        if st.status == DeployStatus.DEPLOYING:
            name = self.stream_name(self.spec(v))
            status = self.streams.status(name)
            if status is None:
                self.start(v)
            wait = self.stream_wait_s > 0 and allow_start  # hooks never block
            if status != "ACTIVE" and wait:
                self.streams.wait_active(name, self.stream_wait_s)
                status = self.streams.status(name)
            if status == "ACTIVE" and self.streams.start_encryption(name):
                # encryption goes on before any worker reads or the router puts; the stream is UPDATING meanwhile
                if wait:
                    self.streams.wait_active(name, self.stream_wait_s)
                status = self.streams.status(name)
            if status == "ACTIVE":
                old = st.old_version
                return (replace(st, status=DeployStatus.WAITING_GREEN, stage_since=now, reason=f"waiting for v{v} workers"),
                        lambda: self.start_fleet(v, old))
            return self._green_timeout(st, now)
        if st.status == DeployStatus.WAITING_GREEN:
            if self.flipped(v):  # a stepper flipped, then crashed before saving: never roll back past the flip
                return replace(st, status=DeployStatus.FLIPPED, stage_since=now, reason=f"active already at v{v}"), None
            if (allow_start and now - st.stage_since > self.fleet_start_grace_s
                    and not self.fleet_started(v, st.old_version)):
                # the stepper that moved to waiting_green stopped before the fleet started (it saves first, then
                # starts): start it now, once; green would otherwise never come and the swap would roll back
                old = st.old_version
                return (replace(st, stage_since=now, reason=f"waiting for v{v} workers (fleet started on resume)"),
                        lambda: self.resume_fleet(v, old))
            # not in the step that started the fleet: one launch step per deployer step (EcsFleet.advance)
            if (allow_start and now - st.stage_since >= self.advance_every_s
                    and not self.advance_fleet(v, st.old_version)):
                return self._green_timeout(st, now)
            if self.green_ready(v):
                if not self.flip(v):
                    raise DeployError(f"flip to v{v} refused: the active pointer is ahead of it")
                return replace(st, status=DeployStatus.FLIPPED, stage_since=now, reason=f"active flipped to v{v}"), None
            return self._green_timeout(st, now)
        if st.status == DeployStatus.FLIPPED:
            if st.old_version is None or st.old_version >= v:
                return replace(st, status=DeployStatus.DONE, stage_since=now, reason=f"v{v} active (no blue to drain)"), None
            return replace(st, status=DeployStatus.DRAINING, stage_since=now, reason=f"draining blue v{st.old_version}"), None
        if st.status == DeployStatus.DRAINING:
            old = st.old_version if st.old_version is not None else v
            if self.blue_drained(old):
                return (replace(st, status=DeployStatus.DONE, stage_since=now, reason=f"v{v} active; blue v{old} drained, retired"),
                        lambda: self.retire(old, v))
            if now - st.stage_since > self.drain_timeout_s:
                name = self.stream_name(self.spec(old))
                return (replace(st, status=DeployStatus.DONE, stage_since=now,
                                reason=f"v{v} active; blue v{old} did not drain within {self.drain_timeout_s:g}s: "
                                       f"its stream {name!r} is kept for its remaining records"),
                        lambda: self.retire(old, v, delete_stream=False))
        return None

    def _green_timeout(self, st: DeployState, now: float) -> tuple[DeployState, Callable[[], object]] | None:
        if now - st.started_at <= self.green_timeout_s:
            return None
        v = st.version if st.version is not None else 0
        return (replace(st, status=DeployStatus.ROLLED_BACK, stage_since=now, failed_version=max(st.failed_version, v),
                        reason=f"v{v} not ready within {self.green_timeout_s:g}s: rolled back, v{st.old_version} "
                               f"keeps serving"),
                lambda: self.rollback(v, st.old_version))

    def _target(self, st: DeployState) -> int | None:
        desired = read_desired(self.control)
        active = read_active(self.control)
        candidates = [v for v in (st.queued_version, desired.version if desired else None) if v is not None]
        if not candidates:
            return None
        target = max(candidates)
        floor = max(active.version if active else 0, st.failed_version,
                    st.version if st.status == DeployStatus.DONE and st.version else 0)
        return target if target > floor else None
