"""local.faults: the injectors and followers of ``--faults`` (issue 13), the local AWS's throttle hook, and a short
``--faults all`` run of the whole loop."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from geo_service.consumer import ShardConsumer, shards_for_hash_key
from lambdas.common.aws import GeoStreams, PutEntry, make_clients
from lambdas.common.config import LambdaConfig
from lambdas.router.handler import put_client
from local.aws import DUMMY_CREDENTIALS, REGION, SerialMotoServer
from local.config import parse_args
from local.faults import (
    FAULTS,
    WHOLE_ONLY,
    CrashingFleet,
    DeployerCrash,
    FaultError,
    FaultRecord,
    HookFault,
    InjectedCrash,
    Lease,
    Reconcile,
    SparkKill,
    StreamThrottle,
    WorkerKill,
    events_column,
    leases_from_items,
    parse_faults,
)
from partitioner.contracts.stream import StreamManifest

REPO = Path(__file__).resolve().parents[2]


def test_a_hook_fault_in_carry_mode_is_a_bad_argument_naming_the_mode() -> None:
    # GIVEN carry mode, where no swap is an ECS deployment WHEN a hook fault is asked for THEN exit-2 error naming it
    with pytest.raises(FaultError, match=r"hook-timeout needs --swap-mode whole \(got 'carry'\)"):
        parse_args(["--faults", "hook-timeout"])


@dataclass
class Proc:
    pid: int
    worker_id: str
    version: int
    exited_at: float | None = None


class World:
    """A fleet of two processes holding v1 leases, a deploy status and a clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.status = "done"
        self.procs = [Proc(101, "w0", 1), Proc(102, "w1", 1)]
        self.leases = {"v1#w0": Lease("v1#w0", "host:101:aa", 1009.0, False),
                       "v1#w1": Lease("v1#w1", "host:102:bb", 1009.0, False)}
        self.killed: list[int] = []

    def injector(self) -> WorkerKill:
        return WorkerKill(lambda: self.procs, lambda: list(self.leases.values()), lambda: self.status,
                          lease_s=9.0, fallback_after_s=60.0, kill=self.killed.append, clock=lambda: self.now)


def test_parse_faults_takes_all_a_list_or_nothing_and_names_a_bad_one() -> None:
    assert parse_faults("all", "whole") == FAULTS
    assert parse_faults("all") == tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    assert parse_faults("worker-kill, worker-kill") == ("worker-kill",)
    assert parse_faults("spark-kill,worker-kill") == ("spark-kill", "worker-kill")
    assert parse_faults("") == ()
    with pytest.raises(FaultError, match="'spark-kil'"):
        parse_faults("worker-kill,spark-kil")
    # AND the command line takes it (a bad name is a ValueError: the loop exits 2)
    assert parse_args(["--quick", "--faults", "all"]).faults == tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    assert parse_args(["--quick", "--swap-mode", "whole", "--faults", "all"]).faults == FAULTS
    with pytest.raises(ValueError, match="'nope'"):
        parse_args(["--faults", "nope"])


def test_a_worker_is_killed_mid_swap_and_recovers_when_its_lease_is_taken_over() -> None:
    # GIVEN no swap in flight
    w = World()
    fault = w.injector()
    fault.poll()
    # THEN nothing is killed
    assert w.killed == [] and fault.record.injected_at is None
    # WHEN a swap is waiting for green THEN the first lease holder is killed -9
    w.status = "waiting_green"
    fault.poll()
    assert w.killed == [101] and fault.record.mid_swap and fault.record.leases == ("v1#w0",)
    # WHEN the supervisor records the exit THEN the fault is detected at that time
    w.now += 1
    w.procs[0].exited_at = w.now
    fault.poll()
    assert fault.record.detected_at == w.now and not fault.record.recovered
    # WHEN the lease only expired THEN it is not recovered yet
    w.now += 9
    fault.poll()
    assert not fault.record.recovered
    # WHEN the replacement owns it live THEN it is recovered, within two lease durations
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline
    assert fault.record.took_over_by == {"v1#w0": "host:103:cc"}
    assert "mid-swap" in fault.record.row(990.0)


def test_a_takeover_later_than_two_lease_durations_is_reported_late() -> None:
    w = World()
    fault = w.injector()
    fault.poll()
    w.status = "draining"
    fault.poll()
    w.procs[0].exited_at = w.now
    fault.poll()
    w.now += 19
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert fault.record.recovered and not fault.record.within_deadline


def test_without_a_swap_the_kill_falls_back_after_the_delay() -> None:
    w = World()
    w.status = "waiting_green"  # the first deployment: not a swap yet
    fault = w.injector()
    fault.poll()
    assert w.killed == []
    w.status = "done"
    fault.poll()
    w.now += 61
    w.leases["v1#w0"] = Lease("v1#w0", "host:101:aa", w.now + 9, False)  # renewed
    fault.poll()
    assert w.killed == [101] and not fault.record.mid_swap


def test_leases_from_scan_items() -> None:
    items = [{"lease_key": {"S": "v2#w3"}, "owner": {"S": "h:7:x"}, "expires_at": {"N": "12.5"},
              "drained": {"BOOL": True}}, {"lease_key": {"S": "v2#w4"}}]
    assert leases_from_items(items) == [Lease("v2#w3", "h:7:x", 12.5, True), Lease("v2#w4", None, 0.0, False)]
    assert leases_from_items(items)[0].pid() == 7 and leases_from_items(items)[1].pid() is None


#: The run's invariants a fault must never break (local/report.py names them); the utilisation-at-the-workers
#: invariant is left to tests/local/test_run.py: a fault-free quick run. With faults a Spark outage delays
#: rebalancing by its restart time, and on a loaded 2-core machine the quick run's few full worker-windows vary.
FAULT_INVARIANTS = ("no event lost or invented", "never two owners of one lease", "no flip before green was ready",
                    "the router never pointed at a version with no running worker",
                    "never two readers of one cell at once", "per-entity order kept across every flip")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("mode", ["carry", "whole"])
def test_quick_run_with_all_faults_recovers_without_losing_an_event(tmp_path: Path, mode: str) -> None:
    # GIVEN the whole loop (moto, Spark, real workers) WHEN run short with every fault of the swap mode injected
    # (whole mode adds the lifecycle hook faults)
    proc = subprocess.run([sys.executable, "-m", "local.run", "--quick", "--swap-mode", mode, "--faults", "all",
                           "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode in (0, 1), tail  # 2 = bad arguments, 3 = a component missing
    # THEN every fault was injected and recovered in time
    faults = json.loads((tmp_path / "faults.json").read_text())
    assert [f["fault"] for f in faults] == [f for f in FAULTS if mode == "whole" or f not in WHOLE_ONLY]
    for f in faults:
        assert f["injected_at"] is not None and f["recovered"] and f["within_deadline"], f
        assert not f["problems"], f  # e.g. a corrupt snapshot not rejected, a duplicate that published
    assert "fault table" in proc.stdout
    # AND no event was lost, no lease had two owners, no flip came early, the components ran to the end
    report = json.loads((tmp_path / "report.json").read_text())
    checked = {i["name"].split(" (")[0].split(":")[0]: i for i in report["invariants"]}
    for name in FAULT_INVARIANTS:
        (inv,) = [i for k, i in checked.items() if k.startswith(name)]
        assert inv["ok"], inv
    (ran,) = [i for k, i in checked.items() if k.startswith("components ran to the end")]
    assert ran["ok"], ran


@dataclass
class Job:
    pid: int
    log_path: Path
    dead: bool = False

    def alive(self) -> bool:
        return not self.dead


def test_spark_kill_restarts_the_job_and_recovers_on_its_next_snapshot(tmp_path: Path) -> None:
    # GIVEN a live spec and a job whose log already has a snapshot line (from before the kill)
    log = tmp_path / "spark.log"
    log.write_text("[aggregation] batch=1 snapshot s3://b/snapshots/x/_manifest.json\n")
    now = [0.0]
    jobs = [Job(10, log)]
    killed: list[int] = []

    def restart() -> Job:
        jobs.append(Job(11, log))
        return jobs[-1]

    fault = SparkKill(lambda: jobs[-1], restart, lambda: "done", delay_s=5.0, deadline_s=60.0,
                      kill=killed.append, clock=lambda: now[0])
    fault.poll()
    assert killed == [] and not fault.owns_exit()
    # WHEN the delay passed THEN the job is killed and its exit belongs to the fault (the loop must not fail)
    now[0] = 6.0
    fault.poll()
    assert killed == [10] and fault.owns_exit()
    # WHEN it is gone THEN the fault detects it and restarts the job
    jobs[0].dead = True
    now[0] = 7.0
    fault.poll()
    assert fault.record.detected_at == 7.0 and jobs[-1].pid == 11 and not fault.owns_exit()
    # AND the old snapshot line does not count as recovery; a new one does
    now[0] = 8.0
    fault.poll()
    assert not fault.record.recovered
    with log.open("a") as f:
        f.write("[aggregation] batch=2 snapshot s3://b/snapshots/y/_manifest.json\n")
    now[0] = 40.0
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline


@dataclass(frozen=True)
class Plan:
    to_version: int
    from_version: int | None


class Fleet:
    def __init__(self) -> None:
        self.started: list[int] = []

    def start(self, plan: Plan) -> None:
        self.started.append(plan.to_version)

    def poll(self) -> None:
        self.started.append(-1)


def test_deployer_crash_dies_once_in_the_next_swaps_fleet_start_and_recovers_when_it_flipped() -> None:
    # GIVEN a live spec and the crashing view of the fleet
    inner = Fleet()
    fleet = CrashingFleet(inner)
    state = {"status": "done", "active": 1, "started": False}
    fault = DeployerCrash(fleet, lambda v, old: bool(state["started"]), lambda: int(state["active"]),
                          lambda: str(state["status"]), deadline_s=65.0, clock=lambda: 100.0)
    fault.poll()
    assert fleet.armed and fault.record.injected_at is None
    # WHEN the next swap starts its fleet THEN the deployer dies there, once; other calls pass through
    with pytest.raises(InjectedCrash, match="v2"):
        fleet.start(Plan(2, 1))
    fleet.poll()
    fleet.start(Plan(2, 1))
    assert inner.started == [-1, 2]
    fault.poll()
    assert fault.record.injected_at == 100.0 and not fault.record.recovered
    # WHEN a later step started the fleet but v2 has not flipped yet THEN not recovered; once flipped, recovered
    state["started"] = True
    fault.poll()
    assert not fault.record.recovered
    state["active"] = 2
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline


# ---------------------------------------------------------------------------------------------- stream-throttle


@pytest.fixture(scope="module")
def server() -> Iterator[SerialMotoServer]:
    """A local AWS (moto behind the serial server) with a geo stream and an ingest stream."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in DUMMY_CREDENTIALS.items():
            mp.setenv(key, value)  # the router's put client reads them, as in a Lambda
        srv = SerialMotoServer().start()
        k = kinesis(srv.url, attempts=1)
        for name in ("t-geo-v1", "t-ingest"):
            k.create_stream(StreamName=name, ShardCount=1)
        yield srv
        srv.stop()


def kinesis(url: str, attempts: int) -> Any:
    return boto3.client("kinesis", endpoint_url=url, region_name=REGION, aws_access_key_id="testing",
                        aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}))


def put(k: Any, stream: str, n: int = 1) -> dict[str, Any]:
    return dict(k.put_records(StreamName=stream, Records=[{"Data": b"x", "PartitionKey": "e"}] * n))


def test_the_throttle_refuses_a_share_of_geo_stream_puts_and_reads_with_the_documented_error(
        server: SerialMotoServer) -> None:
    k = kinesis(server.url, attempts=1)
    it = k.get_shard_iterator(StreamName="t-geo-v1", ShardId="shardId-000000000000",
                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    # GIVEN every call on t-geo-v* refused
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        # THEN a put and a read on the geo stream get ProvisionedThroughputExceededException, HTTP 400
        for call in (lambda: put(k, "t-geo-v1"), lambda: k.get_records(ShardIterator=it)):
            with pytest.raises(ClientError) as err:
                call()
            assert err.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
            assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        # AND other streams and other calls pass
        assert put(k, "t-ingest")["FailedRecordCount"] == 0
        k.describe_stream_summary(StreamName="t-geo-v1")
        assert server.throttle.refused == 2 and server.throttle.first_refused_at is not None
        # WHEN half the calls are refused THEN some pass and some do not
        server.throttle.start("t-geo-v", 0.5, 60.0, seed=3)
        ok = 0
        for _ in range(20):
            try:
                put(k, "t-geo-v1")
                ok += 1
            except ClientError:
                pass
        assert 0 < ok < 20
    finally:
        server.throttle.until = 0.0
    # WHEN the throttle ended THEN every call passes
    assert put(k, "t-geo-v1")["FailedRecordCount"] == 0
    assert k.get_records(ShardIterator=it)["Records"]


def test_router_puts_are_tried_once_so_a_throttled_put_is_re_delivered_not_retried_late(
        server: SerialMotoServer) -> None:
    # GIVEN the geo stream throttled, and the router's put client
    cfg = LambdaConfig.from_env({"AWS_ENDPOINT_URL": server.url, "AWS_REGION": REGION})
    entries = [PutEntry(b"x", "e", "1")] * 3
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        before = server.throttle.refused
        # WHEN the router puts THEN the put fails at once (one call), every entry reported failed
        assert GeoStreams(put_client(cfg)).put_records("t-geo-v1", entries) == [0, 1, 2]
        assert server.throttle.refused - before == 1
        # AND the clients the rest of the Lambdas use would have retried (and landed seconds later)
        before = server.throttle.refused
        GeoStreams(make_clients(cfg).kinesis).put_records("t-geo-v1", entries)
        assert server.throttle.refused - before > 1
    finally:
        server.throttle.until = 0.0


def test_a_worker_read_throttled_past_its_retries_reads_nothing_and_is_not_caught_up(
        server: SerialMotoServer) -> None:
    # GIVEN a record on the geo stream and a worker's consumer whose client tries once
    k = kinesis(server.url, attempts=1)
    put(k, "t-geo-v1")
    manifest = StreamManifest(1, "t-geo-v1", GeoStreams(k).shards("t-geo-v1"))
    consumer = ShardConsumer(k, "t-geo-v1", shards_for_hash_key(manifest, "1"), {}, min_interval_s=0.0)
    server.throttle.start("t-geo-v", 1.0, 60.0)
    try:
        # WHEN it polls under the throttle THEN nothing is read and the shard is not caught up (no drain)
        batch = consumer.poll()
        assert batch.records == () and batch.millis_behind_latest > 0 and not batch.at_end
    finally:
        server.throttle.until = 0.0
    # WHEN the throttle ended THEN the same consumer reads on
    assert consumer.poll().records


class Throttle:
    def __init__(self) -> None:
        self.until = 0.0
        self.refused = self.passed = 0
        self.first_refused_at: float | None = None
        self.started: list[tuple[str, float, float]] = []

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0) -> None:
        self.started.append((stream_prefix, share, duration_s))
        self.until = 100.0 + duration_s


def test_stream_throttle_recovers_when_every_event_sent_before_its_end_came_out() -> None:
    # GIVEN a live spec and a throttle armed 5 s later for 10 s
    now = [90.0]
    sent = ["a", "b"]
    out: set[str] = set()
    t = Throttle()
    fault = StreamThrottle(t, "p-geo-v", lambda: sent, lambda: out, lambda: 4, lambda: "done", delay_s=5.0,
                           duration_s=10.0, share=0.5, deadline_s=60.0, clock=lambda: now[0])
    fault.poll()
    now[0] = 100.0
    fault.poll()
    assert t.started == [("p-geo-v", 0.5, 10.0)] and fault.record.injected_at == 100.0
    # WHEN a call was refused THEN detected; while it lasts, not recovered
    t.first_refused_at, t.refused, t.passed = 100.5, 3, 5
    now[0] = 105.0
    fault.poll()
    assert fault.record.detected_at == 100.5 and not fault.record.recovered
    # WHEN it ended but an event sent before the end is not out THEN not recovered; once out, recovered
    now[0] = 111.0
    fault.poll()
    sent.append("c")  # sent after the end: not waited for
    out.add("a")
    fault.poll()
    assert not fault.record.recovered
    out.add("b")
    fault.poll()
    assert fault.record.recovered and "3 of 8 calls refused" in fault.record.did


def test_events_column_counts_extra_copies_written_while_the_fault_was_open() -> None:
    copies = [("a", 10), ("a", 50), ("b", 20), ("c", 30), ("c", 200)]
    assert events_column(2, copies, 40, 100) == "lost 2 (whole run), doubled 1 written while open (2 in the run)"
    assert "doubled 0" in events_column(0, copies, 0, 5)


def test_a_broken_promise_is_in_the_fault_table_row() -> None:
    r = FaultRecord("snapshot-corrupt", injected_at=1.0, detected_at=2.0, recovered_at=3.0, deadline_s=10.0,
                    did="rejected", problems=["bad-rows snapshot k was not rejected: published"])
    row = r.row(0.0)
    assert "did: rejected" in row and "BROKEN: bad-rows snapshot k was not rejected" in row


@dataclass
class Deploy:
    version: int | None
    status: str
    old_version: int | None


class HookWorld:
    """The controller's state, the active version, the deployer's reconciles and what is served, on a test clock."""

    def __init__(self) -> None:
        self.now = 500.0
        self.deploy = Deploy(2, "waiting_green", 1)
        self.active: int | None = 1
        self.reconciled: list[Reconcile] = []
        self.served: set[int] = {1}

    def fault(self, name: str) -> HookFault:
        return HookFault(name, lambda: self.deploy, lambda: self.active, lambda: self.reconciled,
                         lambda v: v in self.served, lease_s=9.0, clock=lambda: self.now)


def test_hook_fail_fails_the_first_pre_flip_green_hold_and_recovers_when_the_deployer_rolled_back() -> None:
    # GIVEN v2 in flight before its flip, blue v1
    w = HookWorld()
    fault = w.fault("hook-fail")
    # WHEN ECS calls the hooks: the drain stage is not this fault's, the green stage fails once
    assert fault.intercept(2, "POST_PRODUCTION_TRAFFIC_SHIFT") is None
    assert "hookStatus" in str(fault.intercept(2, "POST_SCALE_UP"))
    assert fault.intercept(2, "POST_SCALE_UP") is None and fault.record.injected_at == 500.0
    # THEN nothing is detected until the deployer reconciled (a redeploy is not this fault's recovery)
    w.now += 1
    w.reconciled.append(Reconcile(w.now, "redeployed", 2))
    fault.poll()
    assert fault.record.detected_at is None
    w.now += 1
    w.reconciled.append(Reconcile(w.now, "rolled_back", 2))
    w.deploy = Deploy(2, "rolled_back", 1)
    fault.poll()
    # AND it recovered: v2 rolled back, v1 still active and served, within two lease durations
    assert fault.record.detected_at == 502.0 and fault.record.recovered_at == 502.0 and fault.record.within_deadline
    assert "blue v1 kept serving" in fault.record.did


def test_hook_fail_does_not_fire_on_a_first_deployment_or_after_the_flip() -> None:
    w = HookWorld()
    w.deploy, w.active = Deploy(1, "waiting_green", None), None  # the first deployment: no blue to fall back on
    fault = w.fault("hook-fail")
    assert fault.intercept(1, "POST_SCALE_UP") is None
    w.deploy, w.active = Deploy(2, "flipped", 1), 2
    assert fault.intercept(2, "POST_SCALE_UP") is None and fault.record.injected_at is None


def test_hook_timeout_fails_after_the_flip_and_recovers_only_when_the_live_version_is_served_again() -> None:
    # GIVEN v2 flipped and draining blue v1
    w = HookWorld()
    w.deploy, w.active, w.served = Deploy(2, "draining", 1), 2, {2}
    fault = w.fault("hook-timeout")
    assert fault.intercept(2, "POST_PRODUCTION_TRAFFIC_SHIFT") is not None
    # WHEN ECS stopped v2's tasks and the deployer redeployed v2, but no v2 worker runs yet
    w.served = set()
    w.now += 0.5
    w.reconciled.append(Reconcile(w.now, "redeployed", 2))
    fault.poll()
    assert fault.record.detected_at == 500.5 and fault.record.recovered_at is None
    # THEN it recovers once every v2 slot is served again
    w.now += 4
    w.served = {2}
    fault.poll()
    assert fault.record.recovered_at == 504.5 and fault.record.within_deadline
    assert "deployed v2 again 0.5s later" in fault.record.did
