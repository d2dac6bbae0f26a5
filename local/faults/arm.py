"""Wiring the injectors of ``--faults`` to a running loop: what each one watches, kills, delays or intercepts.

:func:`arm_faults` is called once every component started (:func:`local.start.start_services`); it hands each
injector the loop's own views (the fleet's processes, the leases table, the deploy controller's state, the
notifier's invocations, the local AWS's throttle) and appends it to :attr:`local.state.RunState.faults`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from geokernel.contracts.control import ControlKey, SnapshotMark
from geokernel.contracts.slot import SlotId
from geokernel.contracts.snapshot import SNAPSHOTS_PREFIX, is_manifest_key
from geokernel.contracts.spec_pointer import DesiredPointer
from geokernel.contracts.stream import geo_stream_name, geo_stream_prefix
from lambdas.runtime.dynamodb import ControlTable
from local import procs
from local.aws import EmbeddedAws
from local.environment import DRAIN_TIMEOUT_S, GREEN_TIMEOUT_S
from local.events import LambdaContext, s3_object_created
from local.fault_names import WHOLE_ONLY
from local.faults.deployer_crash import DeployerCrash
from local.faults.hooks import HookFault, SwapForHooks
from local.faults.record import LiveSince
from local.faults.snapshots import SnapshotCorrupt, SnapshotDup
from local.faults.spark_kill import SparkKill
from local.faults.stream_throttle import StreamThrottle
from local.faults.worker_kill import WorkerKill, leases_from_items
from local.fleet import WorkerSettings
from local.iam.principals import acting_as
from local.spark import SPARK_START_TIMEOUT_S, WATERMARK_S, start_spark
from local.state import RunState, say
from local.wiring.stack_wiring import Component


def arm_faults(state: RunState, aws: EmbeddedAws) -> None:
    """Arm the injectors of ``--faults`` (:mod:`local.faults`); :func:`local.faults.follow.poll_faults` drives them."""
    cfg, fleet, deployer = state.config, state.fleet, state.deployer
    if not cfg.faults or fleet is None:
        return
    ddb = aws.client("dynamodb")

    def leases() -> list[Any]:
        items: list[dict[str, Any]] = []
        kw: dict[str, Any] = {"TableName": aws.names.leases_table, "ConsistentRead": True}
        while True:
            page = ddb.scan(**kw)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return leases_from_items(items)
            kw["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def status() -> str:
        return str(deployer.state().status)

    def live_since() -> float | None:  # the replay's clock starts once the first spec is active and its backlog is out
        return state.replayer.started_at if state.replayer is not None else None

    if "worker-kill" in cfg.faults:
        def hook_open() -> bool:  # the hook faults are armed later (arm_hook_faults), so looked up at each poll
            return any(_still_open(f) for f in state.faults if f.record.fault in WHOLE_ONLY)

        state.faults.append(WorkerKill(fleet.processes, leases, status, live_since, lease_s=WorkerSettings().lease_s,
                                       fallback_after_s=0.6 * cfg.duration_s, hold=hook_open))
    if "spark-kill" in cfg.faults:
        def restart() -> procs.Child:
            state.spark = start_spark(state, aws)
            say(state, f"Spark job restarted on its checkpoint (pid {state.spark.pid})")
            return state.spark

        # in the last steady phase, after the hotspot ramp: no snapshot comes until the restarted job wrote one (a JVM
        # start plus a window and its watermark, 78 s in a measured --quick run), and a Spark outage during a load
        # shift delays rebalancing by that much (that run, killed during the ramp, had one of 20 worker-windows at
        # 105% of the cap); recovered once the new job wrote a snapshot, the tail waits for it
        state.faults.append(SparkKill(lambda: state.spark, restart, status, live_since, delay_s=0.8 * cfg.duration_s,
                                      deadline_s=SPARK_START_TIMEOUT_S + 3 * cfg.window_s))
    if "deployer-crash" in cfg.faults:
        from lambdas.runtime.records import read_active

        ctl = deployer.ctl

        def active() -> int | None:
            pointer = read_active(deployer.view)
            return pointer.version if pointer else None

        def fleet_started(version: int, old: int | None) -> bool:  # the stored plan, as the deployer reads it
            with acting_as(Component.DEPLOYER):
                return bool(ctl.fleet_started(version, old))

        state.faults.append(DeployerCrash(ctl.fleet, fleet_started, active, live_since,
                                          deadline_s=ctl.fleet_start_grace_s + GREEN_TIMEOUT_S))
    arm_data_faults(state, aws, status, live_since)
    arm_hook_faults(state, leases)
    say(state, f"faults armed: {', '.join(cfg.faults)}")


def _still_open(fault: Any) -> bool:
    """A deploy fault injected and not recovered; a deployer crash from the crash itself: the loop's poll records it
    seconds later under load, and a hook fault in between once took the crashed swap (neither could recover)."""
    if isinstance(fault, DeployerCrash):
        return fault.is_open()
    return fault.record.injected_at is not None and not fault.record.recovered


def arm_hook_faults(state: RunState, leases: Callable[[], list[Any]]) -> None:
    """Arm ``hook-fail`` and ``hook-timeout`` (:class:`local.faults.hooks.HookFault`) on the local ECS's hook calls."""
    from lambdas.runtime.records import read_active, read_desired
    from lambdas.runtime.timestamps import now_iso

    cfg, fleet, deployer = state.config, state.fleet, state.deployer
    names = [n for n in cfg.faults if n in WHOLE_ONLY]
    if not names or fleet is None or deployer is None:
        return
    ctl = deployer.ctl

    def active() -> int | None:
        pointer = read_active(deployer.view)
        return pointer.version if pointer else None

    def served(version: int) -> float | None:
        """Since when every slot of ``version`` is leased (unexpired, not drained) by a running worker process: the
        latest claim among them (now when a lease has no claim time); None while one is not."""
        spec = state.observer.specs.get(version) if state.observer else None
        if spec is None:
            return None
        alive = {p.pid for p in fleet.processes() if p.exited_at is None and p.child.alive()}
        now = time.time()
        held = {le.key: le.since or now for le in leases()
                if le.owner and le.expires_at > now and not le.drained and le.pid() in alive}
        keys = [str(SlotId(version, w.id)) for w in spec.workers]
        return max(held[k] for k in keys) if all(k in held for k in keys) else None

    faults = [HookFault(n, deployer.state, active, lambda: list(deployer.reconciled), served,
                        lease_s=WorkerSettings().lease_s) for n in names]
    # a swap that another deploy fault is still open on is left alone (a rollback would leave that fault's swap
    # unable to finish: deployer-crash recovers when its swap flips)
    others = [f for f in state.faults if f.record.fault in ("deployer-crash", "worker-kill")]
    state.faults.extend(faults)

    def intercept(version: int, stage: str) -> str | None:
        if any(_still_open(f) for f in others):
            return None
        return next((f for f in (h.intercept(version, stage) for h in faults) if f is not None), None)

    deployer.hook_fault = intercept

    def publish_again() -> int:
        """The live spec again as the next version (partitions unchanged), as the partitioner publishes one."""
        with acting_as(Component.PARTITIONER):
            desired = read_desired(ctl.control)
            assert desired is not None, "the tail runs after the first spec was published"
            n = desired.version + 1
            spec = ctl.specs.get(desired.spec_key).replace(version=n, previous_version=desired.version,
                                                           stream_name=geo_stream_name(ctl.prefix, n),
                                                           created_at=now_iso())
            key = ctl.specs.put_new(spec)
            ctl.control.put_forward(ControlKey.DESIRED, DesiredPointer(n, key, now_iso()).to_item())
        return n

    def ready() -> bool:
        return bool(deployer.idle() and not any(_still_open(f) for f in others))

    state.tail_waits.append(SwapForHooks(faults, publish_again, ready, lambda m: say(state, m),
                                         wait_s=GREEN_TIMEOUT_S).waiting)


class SnapshotBucket:
    """The snapshots bucket as :class:`local.faults.snapshots.Store` (read, write, list manifests)."""

    def __init__(self, aws: EmbeddedAws) -> None:
        self._s3, self.bucket = aws.client("s3"), aws.names.snapshots_bucket

    def get(self, key: str) -> bytes | None:
        try:
            return bytes(self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except self._s3.exceptions.NoSuchKey:
            return None

    def put(self, key: str, body: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def manifests(self) -> list[str]:
        keys = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=SNAPSHOTS_PREFIX):
            keys += [o["Key"] for o in page.get("Contents", []) if is_manifest_key(o["Key"])]
        return sorted(keys)


def arm_data_faults(state: RunState, aws: EmbeddedAws, status: Any, live_since: LiveSince) -> None:
    """Arm ``snapshot-corrupt``, ``snapshot-dup``, ``stream-throttle`` and ``put-partial`` (:mod:`local.faults.snapshots`,
    :mod:`local.faults.stream_throttle`).

    Their moments, as shares of the replay after the first spec went live: corrupt snapshots at 20%, the held-back
    window at 10% (it and a later window must be judged before the replay ends and the notifier stops), the
    throttle at 30% and the partial puts at 50%, each for 15% of the replay; the kills come later (worker-kill at the
    next swap, spark-kill at 80%).
    """
    cfg, notifier, bucket = state.config, state.notifier, SnapshotBucket(aws)
    assert notifier is not None
    judged_within = 3 * cfg.window_s + WATERMARK_S + 30.0  # a window, its watermark and trigger, the partitioner
    if "snapshot-corrupt" in cfg.faults:
        state.faults.append(SnapshotCorrupt(bucket, lambda: list(notifier.invocations), state.desired_after, live_since,
                                            delay_s=0.2 * cfg.duration_s, deadline_s=judged_within))
    if "snapshot-dup" in cfg.faults:
        s3 = aws.client("s3")

        def deliver(key: str) -> Any:
            head = s3.head_object(Bucket=bucket.bucket, Key=key)
            event = s3_object_created(bucket.bucket, key, int(head["ContentLength"]), str(head.get("ETag", "")))
            with acting_as(Component.PARTITIONER):  # S3 delivers the notification again: the partitioner runs
                result = notifier.handler(event, LambdaContext("georebal-partitioner"))
            first = (result.get("results") or [{}])[0]
            say(state, f"snapshot {key.split('/')[1]}: delivered by the fault: {first.get('status')} "
                       f"({first.get('reason')})")
            return result

        control = ControlTable(aws.client("dynamodb"), aws.names.control_table)

        def mark() -> str:
            item = control.get(ControlKey.SNAPSHOT)
            return SnapshotMark.from_item(item).window_end if item else ""

        state.faults.append(SnapshotDup(bucket, lambda: list(notifier.invocations), notifier.seen.add, deliver, mark,
                                        live_since, window_s=cfg.window_s, delay_s=0.1 * cfg.duration_s,
                                        deadline_s=2 * judged_within))
    throttles = [f for f in ("stream-throttle", "put-partial") if f in cfg.faults]
    if throttles:
        replayer, output, router = state.replayer, state.output, state.router
        assert replayer is not None and output is not None and router is not None
        # With hook-timeout, ECS stops the new fleet after its flip and the deployer redeploys it; the redeployed
        # slots' handover gate then waits up to DRAIN_TIMEOUT_S for old slots the rollback stopped before they
        # published (seen in CI: 60 s), so events the throttle delayed come out that much later.
        gate_wait = DRAIN_TIMEOUT_S if "hook-timeout" in cfg.faults else 0.0
        # one hook on the server, so the two never overlap: whole calls refused at 30-45 % of the replay, single
        # records of the puts failed at 50-65 %
        for name in throttles:
            partial = name == "put-partial"
            state.faults.append(StreamThrottle(
                aws.server.throttle, geo_stream_prefix(cfg.prefix), lambda: replayer.sent_ids,
                lambda: output.first_written, lambda: router.failed_items, status, live_since,
                delay_s=(0.5 if partial else 0.3) * cfg.duration_s, duration_s=0.15 * cfg.duration_s,
                share=0.3 if partial else 0.5, partial=partial,
                deadline_s=0.15 * cfg.duration_s + cfg.drain_timeout_s + gate_wait))
