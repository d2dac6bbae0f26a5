"""``hook-fail`` and ``hook-timeout``: an ECS lifecycle hook invocation fails, and ECS rolls the deployment back.

Only in ``--swap-mode whole``, where a swap is an ECS blue/green service deployment with lifecycle hooks
(:class:`local.deploy.DeployDriver` plays it); see :class:`HookFault`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from local.faults.record import TAKEOVER_LEASES, FaultRecord


class HookFailure(NamedTuple):
    """One hook fault: the lifecycle stage whose invocation fails, how it fails, and whether that is before the flip."""

    stage: str
    how: str
    pre_flip: bool


HOOK_FAULTS = {
    "hook-fail": HookFailure("POST_SCALE_UP", "failed: the function errored before it returned a hookStatus", True),
    "hook-timeout": HookFailure("POST_PRODUCTION_TRAFFIC_SHIFT", "timed out: the function returned no hookStatus",
                                False),
}


class Reconcile(NamedTuple):
    """What the deployer's :func:`lambdas.deploy.code.reconcile_fleet` did (``what``: a ``Reconciled`` value), when,
    and the deploy version then (:attr:`local.deploy.DeployDriver.reconciled`)."""

    at: float
    what: str
    version: int | None


class DeployView(Protocol):
    """What :class:`HookFault` reads of the controller's state (:class:`geokernel.contracts.control.DeployState`)."""

    @property
    def version(self) -> int | None: ...

    @property
    def status(self) -> str: ...

    @property
    def old_version(self) -> int | None: ...


class HookFault:
    """Inject and follow ``hook-fail`` (before the flip) or ``hook-timeout`` (after it), ``whole`` mode only.

    The local ECS (:class:`local.deploy.DeployDriver`) asks :meth:`intercept` before each lifecycle hook call; the
    first call of this fault's stage in a deployment that has a blue version fails, and ECS rolls the deployment
    back whatever the hook would have answered ("If your function doesn't return a valid hookStatus, or if it
    fails, Amazon ECS rolls back the deployment",
    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html): the green tasks stop
    and the service runs blue's revision again. The deployer (:func:`lambdas.deploy.code.reconcile_fleet`) must

    * before the flip (``hook-fail`` at ``POST_SCALE_UP``): mark the version rolled back at once, blue serving;
    * after the flip (``hook-timeout`` at ``POST_PRODUCTION_TRAFFIC_SHIFT``, the router already follows green):
      deploy the live version again. Until it runs, the router follows a version with no running worker: an outage
      the fault itself makes, judged against this fault's deadline (``record.outage``), not the one-lease invariant.

    *Detected* when the deployer reconciled (``reconciled`` entries after the injection), *recovered* when the
    router's version has every slot served by a running worker (``served``) and, before the flip, the version is
    marked rolled back; within :data:`TAKEOVER_LEASES` lease durations. ``served(version)`` answers since when (the
    latest claim among its slots' leases, as the workers wrote it) or None: the recovery is dated where it happened,
    not when the loop's poll, seconds later on a loaded machine, saw it.
    """

    def __init__(self, fault: str, deploy: Callable[[], DeployView], active: Callable[[], int | None],
                 reconciled: Callable[[], Sequence[Reconcile]], served: Callable[[int], float | None], *,
                 lease_s: float, clock: Callable[[], float] = time.time) -> None:
        self.stage, self.failure, self.pre_flip = HOOK_FAULTS[fault]  # a HookFailure
        self.deploy = deploy
        self.active = active
        self.reconciled = reconciled
        self.served = served
        self.clock = clock
        self.record = FaultRecord(fault, deadline_s=TAKEOVER_LEASES * lease_s)
        self._version: int | None = None
        self._blue: int | None = None

    def intercept(self, version: int, stage: str) -> str | None:
        """How this hook invocation fails (None: it runs normally)."""
        if self.record.injected_at is not None or stage != self.stage:
            return None
        st, active = self.deploy(), self.active()
        flipped = active is not None and active >= version
        if st.version != version or st.old_version is None or flipped == self.pre_flip:
            return None
        self._version, self._blue = version, st.old_version
        self.record.injected_at = self.clock()
        self.record.mid_swap = True
        self.record.outage = not self.pre_flip  # ECS stops the tasks of the version the router already follows
        self.record.target = (f"lifecycle hook {stage} of the ECS deployment of v{version} (blue v{st.old_version}, "
                              f"{'before' if self.pre_flip else 'after'} the flip): the invocation {self.failure}")
        return self.failure

    def poll(self) -> None:
        r, v = self.record, self._version
        if r.injected_at is None or v is None or r.recovered_at is not None:
            return
        now = self.clock()
        want = "rolled_back" if self.pre_flip else "redeployed"
        seen = [e for e in self.reconciled() if e.what == want and e.at >= r.injected_at]
        if r.detected_at is None and seen:
            r.detected_at = seen[0].at
        if r.detected_at is None:
            return
        active = self.active()
        if self.pre_flip:
            # the deployer marked v rolled back (the reconcile names v: the controller may have moved on to a later
            # version by this poll) and the router never followed v
            rolled = any(e.version == v for e in seen) and active is not None and active != v
            if rolled and active is not None and (at := self.served(active)) is not None:  # the leases read last
                r.recovered_at = min(now, max(r.detected_at, at))
                r.did = (f"ECS rolled v{v} back; the deployer marked v{v} rolled back {r.detected_at - r.injected_at:.1f}s "
                         f"later (not after GREEN_TIMEOUT_S); blue v{active} kept serving")
        elif active == v and (at := self.served(v)) is not None:
            r.recovered_at = min(now, max(r.detected_at, at))
            r.did = (f"ECS rolled v{v} back after the flip (its tasks stopped, blue v{self._blue}'s revision back); "
                     f"the deployer deployed v{v} again {r.detected_at - r.injected_at:.1f}s later; every v{v} slot "
                     f"served by a running worker {r.recovered_at - r.injected_at:.1f}s after the failure")


class SwapForHooks:
    """A swap for a hook fault that found none: in the tail, the live spec published again as a new version.

    A hook fault needs an ECS deployment with a blue version and no other deploy fault open on it; a short run's
    load may make too few (one flip went to the worker and deployer faults, the next to ``hook-timeout``, and the
    replay ended). Each tail tick calls :meth:`waiting`: while a hook fault is armed but not injected, no
    deployment is in flight and no other deploy fault is open, it asks ``publish`` for a new version (the live
    partitions unchanged, what a user's redeploy of the same spec is), at most ``max_swaps`` times. It answers True
    while the tail should wait: a hook fault not injected and the last such swap younger than ``wait_s``.
    """

    def __init__(self, faults: Sequence[HookFault], publish: Callable[[], int], ready: Callable[[], bool],
                 say: Callable[[str], None], *, wait_s: float, max_swaps: int = 2,
                 clock: Callable[[], float] = time.time) -> None:
        self.faults = faults
        self.publish = publish
        self.ready = ready
        self.say = say
        self.wait_s = wait_s
        self.max_swaps = max_swaps
        self.clock = clock
        self.published: list[tuple[float, int]] = []  # (when, version)

    def waiting(self) -> bool:
        left = [f.record.fault for f in self.faults if f.record.injected_at is None]
        if not left:
            return False
        now = self.clock()
        if len(self.published) < self.max_swaps and self.ready():
            version = self.publish()
            self.published.append((now, version))
            self.say(f"no swap left for {', '.join(left)}: the live spec published again as v{version} "
                     f"(partitions unchanged), a deployment for it")
        return bool(self.published) and now - self.published[-1][0] < self.wait_s
