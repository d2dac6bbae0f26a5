"""Faults the local loop injects (``--faults``), and what it measures about the recovery.

``deployer-crash``: the deployer dies inside the next swap's fleet start, after it saved ``waiting_green``
(:class:`CrashingFleet` raises :class:`InjectedCrash` once; the driver ends that "invocation" like a Lambda
that died). Nothing calls the fleet start again but the controller's resume on a later step
(:meth:`lambdas.deploy.controller.DeployController.resume_fleet`, after ``fleet_start_grace_s``; the schedule in
AWS). *Recovered* when that swap's fleet started and the swap flipped.

``spark-kill``: ``kill -9`` of the Spark aggregation job's process group (driver and JVM) once a spec is live
and ``delay_s`` have passed; the loop restarts it on the same checkpoint (as EMR Serverless' job retry policy or
Glue's job restart would). *Detected* when the loop saw the process gone, *recovered* when the restarted job
wrote a snapshot again (its log says ``snapshot``). A window in flight at the kill is recomputed from the
checkpointed offsets; a snapshot rewritten with the same content is skipped (``glue_jobs.snapshot``).

``worker-kill``: ``kill -9`` of one live worker process while a swap is in flight (deploy status
``waiting_green`` or ``draining``, after the first deployment finished; if no swap starts within
``fallback_after_s`` of that, whenever a worker holds a lease). Nothing tells the system: the fleet supervisor (:meth:`local.fleet.LocalFleet.poll`, ECS's service
scheduler in AWS) sees the exit and starts a replacement, the killed process's leases expire after
``lease_s`` and a live worker takes each of them over from its checkpoint. The fault is

* *detected* when the supervisor recorded the exit, and
* *recovered* when every lease the killed process held is owned by another live owner or drained,

and the takeover must finish within two lease durations of the kill (issue 13's target; the seeds' lease
systems promise 10-30 s). Events lost or doubled are the run's own invariants (every event out, the lease
safety checks of :mod:`local.observe`); the fault table (:meth:`FaultRecord.row`) says what the system did.

``stream-throttle``: :class:`StreamThrottle` (the local AWS refuses a share of the geo streams' PutRecords and
GetRecords, :class:`local.aws.KinesisThrottle`). ``snapshot-corrupt`` and ``snapshot-dup``: :mod:`local.snapshot_faults`.
A fault whose promise broke (:attr:`FaultRecord.problems`) fails the run like one that did not recover in time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple, Protocol

from local.errors import LocalRunError
from partitioner.contracts.lease import LEASE_KEY_ATTR, parse_lease_key

FAULTS = ("worker-kill", "spark-kill", "deployer-crash", "snapshot-corrupt", "snapshot-dup", "stream-throttle",
          "hook-fail", "hook-timeout")
WHOLE_ONLY = ("hook-fail", "hook-timeout")  # lifecycle hooks run only in ECS blue/green deployments (whole mode)
IN_SWAP = ("waiting_green", "draining")
TAKEOVER_LEASES = 2.0  # a killed worker's slots are taken over within this many lease durations


class FaultError(LocalRunError, ValueError):
    """A bad ``--faults`` value; the message names it."""


def parse_faults(text: str, swap_mode: str = "carry") -> tuple[str, ...]:
    """``all`` or a comma list of :data:`FAULTS` (empty = none); raise FaultError naming a bad name.

    ``all`` is every fault that can happen in ``swap_mode``: the hook faults (:data:`WHOLE_ONLY`) only in ``whole``
    mode, where swaps are ECS blue/green deployments with lifecycle hooks (a ``carry`` swap changes the desired count
    only, so no hook runs); naming one in ``carry`` mode is an error."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return FAULTS if swap_mode == "whole" else tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    bad = [n for n in names if n not in FAULTS]
    if bad:
        raise FaultError(f"--faults: unknown fault(s) {bad!r}; known: {', '.join(FAULTS)} or all")
    hooks = [n for n in names if n in WHOLE_ONLY]
    if hooks and swap_mode != "whole":
        raise FaultError(f"--faults: {', '.join(hooks)} needs --swap-mode whole (got {swap_mode!r}): lifecycle hooks "
                         f"run only in ECS blue/green deployments, and a carry swap changes the desired count only")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Lease:
    """One lease item: ``key`` (``v<version>#<slot>``), ``owner`` (``host:pid:random``), expiry, drained."""

    key: str
    owner: str | None
    expires_at: float
    drained: bool

    def pid(self) -> int | None:
        parts = (self.owner or "").split(":")
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


class Process(Protocol):
    """What the injector needs of a worker process (:class:`local.fleet.WorkerProcess`)."""

    @property
    def pid(self) -> int: ...

    exited_at: float | None
    worker_id: str
    version: int


@dataclass
class FaultRecord:
    """One injected fault: when it was injected, detected and recovered, and what the system did."""

    fault: str
    injected_at: float | None = None
    detected_at: float | None = None
    recovered_at: float | None = None
    mid_swap: bool = False
    target: str = ""
    leases: tuple[str, ...] = ()
    took_over_by: dict[str, str] = field(default_factory=dict)
    deadline_s: float = 0.0
    did: str = ""  # what the system did, in a few words (the leases taken over when empty)
    events: str = ""  # events lost or doubled while the fault was open (:func:`events_column`)
    problems: list[str] = field(default_factory=list)  # a broken promise (e.g. a bad snapshot published): fails the run

    @property
    def recovered(self) -> bool:
        return self.recovered_at is not None

    @property
    def within_deadline(self) -> bool:
        return (self.recovered_at is not None and self.injected_at is not None
                and self.recovered_at - self.injected_at <= self.deadline_s)

    def row(self, t0: float) -> str:
        """One line of the fault table (times in seconds since ``t0``)."""
        def at(t: float | None) -> str:
            return "-" if t is None else f"{t - t0:7.1f}s"

        took = ", ".join(f"{k} -> {v}" for k, v in sorted(self.took_over_by.items())) or "-"
        did = self.did or f"leases taken over: {took}"
        broken = f"; BROKEN: {' | '.join(self.problems)}" if self.problems else ""
        return (f"{self.fault:<15} injected {at(self.injected_at)}  detected {at(self.detected_at)}  recovered "
                f"{at(self.recovered_at)}  ({'mid-swap' if self.mid_swap else 'not mid-swap'}; {self.target}; "
                f"did: {did}; events: {self.events or '-'}; within {self.deadline_s:g}s: {self.within_deadline}{broken})")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recovered": self.recovered, "within_deadline": self.within_deadline}


class WorkerKill:
    """Inject and follow one ``worker-kill`` fault; call :meth:`poll` every fraction of a second."""

    def __init__(self, processes: Callable[[], Sequence[Process]], leases: Callable[[], Sequence[Lease]],
                 deploy_status: Callable[[], str], *, lease_s: float, fallback_after_s: float,
                 kill: Callable[[int], None] = lambda pid: os.kill(pid, signal.SIGKILL),
                 clock: Callable[[], float] = time.time) -> None:
        self.processes = processes
        self.leases = leases
        self.deploy_status = deploy_status
        self.kill = kill
        self.clock = clock
        self.live_since: float | None = None  # when the first deployment finished
        self.fallback_after_s = fallback_after_s
        self.record = FaultRecord("worker-kill", deadline_s=TAKEOVER_LEASES * lease_s)
        self._victim: Process | None = None
        self._owner = ""

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            self._maybe_inject(now)
        elif self.record.detected_at is None:
            if self._victim is not None and self._victim.exited_at is not None:
                self.record.detected_at = self._victim.exited_at
        elif self.record.recovered_at is None:
            self._check_takeover(now)

    def _maybe_inject(self, now: float) -> None:
        status = self.deploy_status()
        if self.live_since is None:
            if status != "done":
                return  # the first deployment is not a swap: wait until a spec is live
            self.live_since = now
        mid_swap = status in IN_SWAP
        if not mid_swap and now - self.live_since < self.fallback_after_s:
            return
        held = [le for le in self.leases() if le.owner and le.expires_at > now and not le.drained]
        for p in self.processes():
            mine = [le for le in held if le.pid() == p.pid]
            if p.exited_at is None and mine:
                self._victim, self._owner = p, str(mine[0].owner)
                self.record.leases = tuple(sorted(le.key for le in mine))
                self.record.target = f"pid {p.pid} (slot {p.worker_id}, started for v{p.version})"
                self.record.mid_swap = mid_swap
                self.kill(p.pid)
                self.record.injected_at = now
                return

    def _check_takeover(self, now: float) -> None:
        current = {le.key: le for le in self.leases()}
        for key in self.record.leases:
            le = current.get(key)
            if le is None:
                continue  # the version was retired: nothing left to take over
            if le.owner == self._owner and not le.drained:
                return
            if le.owner is None and not le.drained:
                return
            if le.owner != self._owner and not le.drained and le.expires_at <= now:
                return
            self.record.took_over_by[key] = "drained" if le.drained else str(le.owner)
        self.record.recovered_at = now


def leases_from_items(items: Sequence[dict[str, Any]]) -> list[Lease]:
    """Lease records from DynamoDB ``Scan`` items of the leases table (other items, such as a swap's handover
    summary, are skipped)."""
    return [Lease(key=i[LEASE_KEY_ATTR]["S"], owner=i["owner"]["S"] if "owner" in i else None,
                  expires_at=float(i.get("expires_at", {}).get("N", "0")),
                  drained=bool(i.get("drained", {}).get("BOOL", False))) for i in items
            if parse_lease_key(i[LEASE_KEY_ATTR]["S"]) is not None]


class SparkKill:
    """Inject and follow one ``spark-kill`` fault: ``child()`` is the running job, ``restart()`` starts a new one."""

    def __init__(self, child: Callable[[], Any], restart: Callable[[], Any], deploy_status: Callable[[], str], *,
                 delay_s: float, deadline_s: float,
                 kill: Callable[[int], None] = lambda pid: os.killpg(os.getpgid(pid), signal.SIGKILL),
                 clock: Callable[[], float] = time.time) -> None:
        self.child = child
        self.restart = restart
        self.deploy_status = deploy_status
        self.kill = kill
        self.clock = clock
        self.delay_s = delay_s
        self.live_since: float | None = None
        self.record = FaultRecord("spark-kill", deadline_s=deadline_s)
        self._restarted: Any = None
        self._log_offset = 0

    def owns_exit(self) -> bool:
        """True while the job's exit is this fault's (the loop must restart it, not fail)."""
        return self.record.injected_at is not None and self._restarted is None

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            if self.live_since is None:
                if self.deploy_status() == "done":
                    self.live_since = now
                return
            if now - self.live_since < self.delay_s:
                return
            child = self.child()
            self.record.target = f"Spark job pid {child.pid} (driver and JVM, kill -9 of the process group)"
            self.record.mid_swap = self.deploy_status() in IN_SWAP
            self.kill(child.pid)
            self.record.injected_at = now
        elif self._restarted is None:
            old = self.child()
            if not old.alive():
                self.record.detected_at = now
                try:
                    self._log_offset = old.log_path.stat().st_size  # the new job appends to the same log
                except OSError:
                    self._log_offset = 0
                self._restarted = self.restart()
                self.record.took_over_by["job"] = f"restarted as pid {self._restarted.pid} on the same checkpoint"
        elif self.record.recovered_at is None and "snapshot s3://" in self._restarted_log():
            self.record.recovered_at = now

    def _restarted_log(self) -> str:
        try:
            with self._restarted.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return str(f.read().decode(errors="replace"))
        except OSError:
            return ""


class InjectedCrash(LocalRunError, RuntimeError):
    """The deployer 'invocation' dies here (``deployer-crash``)."""


class CrashingFleet:
    """A fleet that raises :class:`InjectedCrash` in the first :meth:`start` after :meth:`arm`; else delegates."""

    def __init__(self, fleet: Any) -> None:
        self._fleet = fleet
        self.armed = False
        self.crashed_plan: tuple[int, int | None] | None = None

    def arm(self) -> None:
        self.armed = True

    def start(self, plan: Any) -> Any:
        if self.armed and self.crashed_plan is None:
            self.crashed_plan = (plan.to_version, plan.from_version)
            raise InjectedCrash(f"deployer died while starting the fleet of v{plan.to_version}")
        return self._fleet.start(plan)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fleet, name)


class DeployerCrash:
    """Follow one ``deployer-crash`` fault over a :class:`CrashingFleet` and the controller's state."""

    def __init__(self, fleet: CrashingFleet, fleet_started: Callable[[int, int | None], bool],
                 active_version: Callable[[], int | None], deploy_status: Callable[[], str], *, deadline_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.fleet_started = fleet_started
        self.active_version = active_version
        self.deploy_status = deploy_status
        self.clock = clock
        self.record = FaultRecord("deployer-crash", deadline_s=deadline_s)

    def poll(self) -> None:
        now = self.clock()
        if not self.fleet.armed:
            if self.deploy_status() == "done":
                self.fleet.arm()  # the next swap's fleet start dies
            return
        if self.fleet.crashed_plan is None:
            return
        version, old = self.fleet.crashed_plan
        if self.record.injected_at is None:
            self.record.injected_at = self.record.detected_at = now  # the invocation error is seen at once
            self.record.mid_swap = True
            self.record.target = f"deployer, inside the fleet start of v{version} (after saving waiting_green)"
        elif self.record.recovered_at is None and self.fleet_started(version, old):
            active = self.active_version()
            if active is not None and active >= version:
                self.record.took_over_by["fleet"] = f"started by a later step; v{version} flipped"
                self.record.recovered_at = now


class Throttle(Protocol):
    """What :class:`StreamThrottle` needs of the server's hook (:class:`local.aws.KinesisThrottle`)."""

    until: float
    refused: int
    passed: int
    first_refused_at: float | None

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0) -> None: ...


class LiveDelay:
    """Waits until the first deployment finished and ``delay_s`` more passed."""

    def __init__(self, deploy_status: Callable[[], str], delay_s: float) -> None:
        self.deploy_status = deploy_status
        self.delay_s = delay_s
        self.live_since: float | None = None

    def due(self, now: float) -> bool:
        if self.live_since is None:
            if self.deploy_status() != "done":
                return False
            self.live_since = now
        return now - self.live_since >= self.delay_s


class StreamThrottle:
    """Inject and follow ``stream-throttle``: for ``duration_s`` the local AWS refuses ``share`` of the geo streams'
    PutRecords and GetRecords with ``ProvisionedThroughputExceededException`` (:class:`local.aws.KinesisThrottle`).

    *Detected* at the first refused call (the router and the workers see the error), *recovered* once the throttle
    ended and every event sent before its end came out of the workers: the router (its event source mapping
    re-delivers failed items) and the workers (the SDK's retries, then their poll loop) rode it out.
    """

    def __init__(self, throttle: Throttle, stream_prefix: str, sent_ids: Callable[[], Sequence[str]],
                 out_ids: Callable[[], set[str]], router_failures: Callable[[], int], deploy_status: Callable[[], str],
                 *, delay_s: float, duration_s: float, share: float, deadline_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.throttle = throttle
        self.stream_prefix = stream_prefix
        self.sent_ids = sent_ids
        self.out_ids = out_ids
        self.router_failures = router_failures
        self.deploy_status = deploy_status
        self.duration_s, self.share = duration_s, share
        self.clock = clock
        self._delay = LiveDelay(deploy_status, delay_s)
        self.record = FaultRecord("stream-throttle", deadline_s=deadline_s)
        self._sent_before_end: int | None = None
        self._router_before = 0

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            if self._delay.due(now):
                self._router_before = self.router_failures()
                self.throttle.start(self.stream_prefix, self.share, self.duration_s)
                self.record.injected_at = now
                self.record.mid_swap = self.deploy_status() in IN_SWAP
                self.record.target = (f"{100 * self.share:.0f}% of PutRecords/GetRecords on {self.stream_prefix}* "
                                      f"refused for {self.duration_s:g}s")
            return
        if self.record.detected_at is None and self.throttle.first_refused_at is not None:
            self.record.detected_at = self.throttle.first_refused_at
        if now < self.throttle.until or self.record.recovered_at is not None:
            return
        if self._sent_before_end is None:
            self._sent_before_end = len(self.sent_ids())
        if self.record.detected_at is not None and set(self.sent_ids()[:self._sent_before_end]) <= self.out_ids():
            self.record.recovered_at = now
            self.record.did = (f"{self.throttle.refused} of {self.throttle.refused + self.throttle.passed} calls refused; "
                               f"router re-delivered {self.router_failures() - self._router_before} failed items; "
                               f"all {self._sent_before_end} events sent before the end came out")


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
    """What :class:`HookFault` reads of the controller's state (:class:`lambdas.deploy.controller.DeployState`)."""

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
      deploy the live version again before a lease duration passes without a running worker of it.

    *Detected* when the deployer reconciled (``reconciled`` entries after the injection), *recovered* when the
    router's version has every slot served by a running worker (``served``) and, before the flip, the version is
    marked rolled back; within :data:`TAKEOVER_LEASES` lease durations.
    """

    def __init__(self, fault: str, deploy: Callable[[], DeployView], active: Callable[[], int | None],
                 reconciled: Callable[[], Sequence[Reconcile]], served: Callable[[int], bool], *,
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
        self.record.target = (f"lifecycle hook {stage} of the ECS deployment of v{version} (blue v{st.old_version}, "
                              f"{'before' if self.pre_flip else 'after'} the flip): the invocation {self.failure}")
        return self.failure

    def poll(self) -> None:
        r, v = self.record, self._version
        if r.injected_at is None or v is None or r.recovered_at is not None:
            return
        now = self.clock()
        want = "rolled_back" if self.pre_flip else "redeployed"
        seen = [e.at for e in self.reconciled() if e.what == want and e.at >= r.injected_at]
        if r.detected_at is None and seen:
            r.detected_at = seen[0]
        if r.detected_at is None:
            return
        active = self.active()
        if self.pre_flip:
            st = self.deploy()
            if st.version == v and st.status == "rolled_back" and active is not None and active < v and self.served(active):
                r.recovered_at = now
                r.did = (f"ECS rolled v{v} back; the deployer marked v{v} rolled back {r.detected_at - r.injected_at:.1f}s "
                         f"later (not after GREEN_TIMEOUT_S); blue v{active} kept serving")
        elif active == v and self.served(v):
            r.recovered_at = now
            r.did = (f"ECS rolled v{v} back after the flip (its tasks stopped, blue v{self._blue}'s revision back); "
                     f"the deployer deployed v{v} again {r.detected_at - r.injected_at:.1f}s later; every v{v} slot "
                     f"served by a running worker {now - r.injected_at:.1f}s after the failure")


def events_column(lost: int, copies: Sequence[tuple[str, int]], start_ms: int, end_ms: int) -> str:
    """The fault table's "events lost or doubled": the run's lost events, and the extra copies written in the span.

    ``copies`` is ``(event_id, written_ms)`` of every output record; an extra copy is every copy of an event after
    its first (by write time). Lost events have no output to date them, so they are counted over the whole run.
    """
    seen: set[str] = set()
    extra = 0
    for event_id, written in sorted(copies, key=lambda c: c[1]):
        extra += event_id in seen and start_ms <= written <= end_ms
        seen.add(event_id)
    repeats = len(copies) - len(seen)
    return f"lost {lost} (whole run), doubled {extra} written while open ({repeats} in the run)"
