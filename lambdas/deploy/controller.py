"""DeployController: the blue/green deploy state machine, the same in AWS (hooks) and in the local loop.

One deployment at a time, persisted in control ``pk="deploy"`` (:class:`geokernel.contracts.control.DeployState`,
optimistic lock on ``rev``)::

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
* The primitive steps (:class:`lambdas.deploy.steps.SwapSteps`, which the controller is) are public so a
  driver can run them one by one: :meth:`start`, :meth:`green_ready`, :meth:`flip`, :meth:`blue_drained`,
  :meth:`retire`, :meth:`rollback`. This module holds the transitions: which step a status leads to, and when.

The fleet is an adapter (:class:`lambdas.deploy.fleet.Fleet`: ``start(plan)``, ``stop(plan)``, ``abort(plan)``):
:class:`lambdas.deploy.fleet.EcsFleet` in AWS (``carry``: the service's desired count only; ``whole``: a
task-definition revision carrying ``SPEC_VERSION``, i.e. ECS's own blue/green deployment), worker processes
in the local loop (``local/fleet.py``'s ``LocalFleet``, same three methods).

Local-loop driving::

    ctl = DeployController(control, leases, specs, streams, fleet, prefix="georebal")
    ctl.request(desired_version)          # after the partitioner published
    while True:
        state = ctl.step()                # call every second or so; it never blocks for long
        if state.status in (DeployStatus.DONE, DeployStatus.ROLLED_BACK) and state.version == desired_version:
            break

In AWS the deployer Lambda calls ``request`` + ``step(allow_start=True)`` (and, in ``carry`` mode, where no
ECS deployment and so no lifecycle hook is involved, keeps stepping while it runs); in ``whole`` mode the
lifecycle hook calls ``step(allow_start=False)`` and maps the status to ``hookStatus`` (:mod:`lambdas.deploy.hooks`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from geokernel.contracts.control import FINISHED, ControlKey, DeployState, DeployStatus
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.stream import StreamStatus, geo_stream_name
from lambdas.deploy.errors import DeployError
from lambdas.deploy.fleet import Fleet
from lambdas.deploy.steps import SwapSteps
from lambdas.runtime.dynamodb import ControlTable, LeaseTable
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.records import read_active, read_desired
from lambdas.runtime.s3 import SpecStore

FLEET_START_GRACE_S = 30.0  # a waiting_green swap whose fleet has not started this long after the save is resumed
ADVANCE_EVERY_S = 5.0  # see DeployController(advance_every_s=)

#: The next deployment item and the step to run once it is saved (None: the item alone is the transition).
Transition = tuple[DeployState, Callable[[], object] | None]


class DeployController(SwapSteps):
    """Blue/green deploy of spec versions; see the module docstring.

    Parameters
    ----------
    control, leases, specs, streams
        Adapters (:mod:`lambdas.runtime.dynamodb`, :mod:`lambdas.runtime.s3`, :mod:`lambdas.runtime.kinesis`).
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
        True when the fleet runs other worker code than the stack's (:meth:`lambdas.deploy.fleet.EcsFleet.code_stale`):
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
        super().__init__(control, leases, specs, streams, fleet, prefix=prefix, swap_mode=swap_mode,
                         code_stale=code_stale, clock=clock)
        self.green_timeout_s = green_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.stream_wait_s = stream_wait_s
        self.fleet_start_grace_s = fleet_start_grace_s
        self.advance_every_s = advance_every_s

    # ------------------------------------------------------------------ state
    def state(self) -> DeployState:
        item = self.control.get(ControlKey.DEPLOY)
        return DeployState() if item is None else DeployState.from_item(item)

    def _save(self, old: DeployState, new: DeployState) -> bool:
        now = self.clock()
        body = replace(new, updated_at=now, rev=(old.rev or 0) + 1).to_item()
        return self.control.put_if_rev(ControlKey.DEPLOY, body, old.rev)

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

    # ------------------------------------------------------------ transitions
    def _next(self, st: DeployState, allow_start: bool) -> Transition | None:
        """Return (next state, side effect to run after saving it) or None when nothing can happen now.

        The transition table: a finished deployment may start the next version; each in-flight status has its
        own transition (:meth:`_from_deploying`, :meth:`_from_waiting_green`, :meth:`_from_flipped`,
        :meth:`_from_draining`)."""
        now = self.clock()
        if st.status in FINISHED:
            return self._from_finished(st, now, allow_start)
        if st.version is None:
            raise DeployError(f"control item 'deploy' has status {st.status!r} but no version")
        in_flight: dict[str, Callable[[DeployState, int, float, bool], Transition | None]] = {
            DeployStatus.DEPLOYING: self._from_deploying,
            DeployStatus.WAITING_GREEN: self._from_waiting_green,
            DeployStatus.FLIPPED: self._from_flipped,
            DeployStatus.DRAINING: self._from_draining,
        }
        transition = in_flight.get(st.status)
        return None if transition is None else transition(st, st.version, now, allow_start)

    def _from_finished(self, st: DeployState, now: float, allow_start: bool) -> Transition | None:
        """idle/done/rolled_back/queued -> deploying (start: the geo stream), or -> rolled_back when the account
        has no room for its shards; nothing without a newer version or when starts are not allowed."""
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

    def _from_deploying(self, st: DeployState, v: int, now: float, allow_start: bool) -> Transition | None:
        """deploying -> waiting_green (start_fleet) once the geo stream is ACTIVE, this deployment's and encrypted, in
        a step that may start (the deployer's: a hook's changes no fleet and writes no manifest); else the green
        timeout."""
        name = self.stream_name(self.spec(v))
        status = self.streams.status(name)
        if status is None:
            self.start(v)
        wait = self.stream_wait_s > 0 and allow_start  # hooks never block
        if status != StreamStatus.ACTIVE and wait:
            self.streams.wait_active(name, self.stream_wait_s)
            status = self.streams.status(name)
        if status == StreamStatus.ACTIVE and not self.streams.owned(name):
            # left by an earlier deployment with this prefix (a stack destroyed before its streams were): another
            # version's shards and records under this name. Delete it; a later step creates this version's anew
            self.streams.delete(name)
            return self._green_timeout(st, now)
        if status == StreamStatus.ACTIVE and self.streams.start_encryption(name):
            # encryption goes on before any worker reads or the router puts; the stream is UPDATING meanwhile
            if wait:
                self.streams.wait_active(name, self.stream_wait_s)
            status = self.streams.status(name)
        if status == StreamStatus.ACTIVE and allow_start:  # the fleet is started by the deployer only, never by a hook
            old = st.old_version
            return (replace(st, status=DeployStatus.WAITING_GREEN, stage_since=now, reason=f"waiting for v{v} workers"),
                    lambda: self.start_fleet(v, old))
        return self._green_timeout(st, now)

    def _from_waiting_green(self, st: DeployState, v: int, now: float, allow_start: bool) -> Transition | None:
        """waiting_green -> flipped once green is ready (or already flipped); resumes or advances the fleet's
        start meanwhile; else the green timeout."""
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

    def _from_flipped(self, st: DeployState, v: int, now: float, allow_start: bool) -> Transition | None:
        """flipped -> draining, or -> done when there is no older version to drain."""
        if st.old_version is None or st.old_version >= v:
            return replace(st, status=DeployStatus.DONE, stage_since=now, reason=f"v{v} active (no blue to drain)"), None
        return replace(st, status=DeployStatus.DRAINING, stage_since=now, reason=f"draining blue v{st.old_version}"), None

    def _from_draining(self, st: DeployState, v: int, now: float, allow_start: bool) -> Transition | None:
        """draining -> done (retire blue) once blue drained, or past the drain timeout (its stream kept)."""
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

    def _green_timeout(self, st: DeployState, now: float) -> Transition | None:
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
