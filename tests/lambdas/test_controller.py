"""DeployController state machine over moto (Kinesis, DynamoDB, S3, ECS); workers are represented by their leases."""

from __future__ import annotations

import json

import pytest

from lambdas.common.ecs import EcsService
from lambdas.common.kinesis import GeoStreams, ShardQuota
from lambdas.common.records import read_active
from lambdas.deploy.controller import DeployController
from lambdas.deploy.errors import DeployError
from lambdas.deploy.fleet import EcsFleet
from partitioner.contracts.control import ControlKey, DeployStatus
from partitioner.contracts.plan import SwapMode
from partitioner.contracts.spec_pointer import spec_key
from partitioner.contracts.stream import StreamManifest, stream_manifest_key
from partitioner.errors import SpecError
from partitioner.spec.model import Spec
from partitioner.spec.shards import with_shards
from tests.lambdas.conftest import Aws, make_spec

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def controller(aws: Aws, clock: Clock, mode: SwapMode = SwapMode.CARRY, **kw: float) -> DeployController:
    fleet = EcsFleet(EcsService(aws.clients.ecs, aws.cfg.ecs_cluster, aws.cfg.ecs_service))
    return DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, prefix="georebal",
                            green_timeout_s=kw.get("green", 600.0), drain_timeout_s=kw.get("drain", 600.0),
                            swap_mode=mode, clock=clock)


def publish(aws: Aws, spec: Spec) -> None:
    aws.specs.put_new(spec)
    assert aws.control.put_forward("desired", {"version": spec.version, "spec_key": spec_key(spec.version),
                                               "published_at": "x"})


def leases(aws: Aws, spec: Spec, clock: Clock, **kw: object) -> None:
    for w in spec.workers:
        aws.put_lease(spec.version, w.id, now=clock.now, **kw)  # type: ignore[arg-type]


def service(aws: Aws) -> tuple[int, dict[str, str]]:
    svc = aws.clients.ecs.describe_services(cluster=aws.cfg.ecs_cluster, services=[aws.cfg.ecs_service])["services"][0]
    td = aws.clients.ecs.describe_task_definition(taskDefinition=svc["taskDefinition"])["taskDefinition"]
    env = {e["name"]: e["value"] for e in td["containerDefinitions"][0]["environment"]}
    return int(svc["desiredCount"]), env


def revisions(aws: Aws) -> int:
    return len(aws.clients.ecs.list_task_definitions(familyPrefix="georebal-geo-worker")["taskDefinitionArns"])


def deploy_v1(aws: Aws, clock: Clock, ctl: DeployController) -> Spec:
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    ctl.step()
    leases(aws, v1, clock)
    assert ctl.step().status == DeployStatus.DONE
    return v1


def start_v2(aws: Aws, clock: Clock, ctl: DeployController) -> Spec:
    """v1 deployed and active, then v2 (one more slot) published, requested and started."""
    v1 = deploy_v1(aws, clock, ctl)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    ctl.step()
    return v2


@pytest.mark.parametrize("mode", [SwapMode.CARRY, SwapMode.WHOLE])
def test_first_deploy_creates_stream_starts_fleet_and_flips_when_ready(aws: Aws, mode: SwapMode) -> None:
    # GIVEN spec v1 published and nothing active
    clock = Clock()
    ctl = controller(aws, clock, mode)
    v1 = make_spec(1)
    publish(aws, v1)
    # WHEN the deployment is requested and stepped
    ctl.request(1)
    st = ctl.step()
    # THEN the geo stream exists with one shard per worker, ECS runs one task per worker: generic tasks (carry)
    # or a revision carrying SPEC_VERSION (whole)
    assert st.status == DeployStatus.WAITING_GREEN and st.version == 1
    shards = aws.clients.kinesis.list_shards(StreamName="georebal-geo-v1")["Shards"]
    assert len(shards) == len(v1.workers)
    # and its server-side encryption is on, with the configured key, before any worker starts
    summary = aws.clients.kinesis.describe_stream_summary(StreamName="georebal-geo-v1")["StreamDescriptionSummary"]
    assert (summary["EncryptionType"], summary["KeyId"]) == ("KMS", "alias/georebal-geo-streams")
    desired, env = service(aws)
    assert desired == len(v1.workers) and env["GEO_PREFIX"] == "georebal"
    assert env.get("SPEC_VERSION") == (None if mode is SwapMode.CARRY else "1")
    assert revisions(aws) == (1 if mode is SwapMode.CARRY else 2)
    plan = aws.control.get(ControlKey.PLAN)
    assert plan is not None and (plan["from_version"], plan["to_version"], plan["mode"], plan["status"]) == (
        None, 1, mode.value, "started")
    assert plan["started"] == [w.id for w in v1.workers] and plan["kept"] == []
    assert read_active(aws.control) is None
    # WHEN every worker leases and warms up
    leases(aws, v1, clock)
    st = ctl.step()
    # THEN active flips to v1 and, with no blue, the deployment is done
    assert st.status == DeployStatus.DONE
    active = read_active(aws.control)
    assert active is not None and (active.version, active.stream_name) == (1, "georebal-geo-v1")


@pytest.mark.parametrize("broken", ["missing", "expired", "not_ready", "no_owner"])
def test_no_flip_until_every_partition_is_leased_and_warm(aws: Aws, broken: str) -> None:
    # GIVEN v1 deploying and all but one worker leased and ready
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = make_spec(1)
    publish(aws, v1)
    ctl.request(1)
    ctl.step()
    *good, last = v1.workers
    for w in good:
        aws.put_lease(1, w.id, now=clock.now)
    if broken == "expired":
        aws.put_lease(1, last.id, now=clock.now, expires_in=-1)
    elif broken == "not_ready":
        aws.put_lease(1, last.id, now=clock.now, ready=False)
    elif broken == "no_owner":
        aws.put_lease(1, last.id, now=clock.now, owner=None)
    # WHEN stepped
    st = ctl.step()
    # THEN it keeps waiting and nothing is active
    assert st.status == DeployStatus.WAITING_GREEN and not ctl.green_ready(1)
    assert read_active(aws.control) is None


def test_blue_green_flip_then_drain_then_retire(aws: Aws) -> None:
    # GIVEN v1 active and v2 published
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = deploy_v1(aws, clock, ctl)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]
    # WHEN green is ready
    leases(aws, v2, clock)
    st = ctl.step()
    # THEN active is v2 and blue v1 is draining (its stream still there)
    assert (st.status, st.old_version) == (DeployStatus.DRAINING, 1)
    assert read_active(aws.control).version == 2  # type: ignore[union-attr]
    assert "georebal-geo-v1" in aws.stream_names()
    # WHEN every blue lease reports drained
    leases(aws, v1, clock, drained=True, owner=None)
    st = ctl.step()
    # THEN blue is retired: its stream deleted, v2's kept
    assert st.status == DeployStatus.DONE and "drained" in st.reason
    assert aws.stream_names() == ["georebal-geo-v2"]


def test_green_timeout_rolls_back_and_blue_keeps_serving(aws: Aws) -> None:
    # GIVEN v1 active and v2 deploying whose workers never get ready
    clock = Clock()
    ctl = controller(aws, clock, green=300.0)
    start_v2(aws, clock, ctl)
    v1 = ctl.spec(1)
    clock.now += 299
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    # WHEN the green timeout passes
    clock.now += 2
    st = ctl.step()
    # THEN v2 is rolled back: its stream is gone, v1 stays active, and v2 is not retried
    assert st.status == DeployStatus.ROLLED_BACK and "not ready within 300s" in st.reason and st.failed_version == 2
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]
    assert aws.stream_names() == ["georebal-geo-v1"]
    assert ctl.step().status == DeployStatus.ROLLED_BACK
    # WHEN a newer spec v3 is published
    publish(aws, make_spec(3, loads=(500, 500), previous=v1))
    ctl.request(3)
    # THEN it deploys
    assert ctl.step().version == 3


def test_newer_spec_supersedes_a_queued_one(aws: Aws) -> None:
    # GIVEN v1 active and v2 in flight
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = deploy_v1(aws, clock, ctl)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    ctl.step()
    # WHEN v3 and then v4 are published while v2 is still deploying
    for n in (3, 4):
        publish(aws, make_spec(n, loads=(300 * n, 200), previous=v2))
        ctl.request(n)
    st = ctl.state()
    # THEN v2 continues, and v4 replaced v3 in the queue
    assert (st.version, st.status, st.queued_version) == (2, DeployStatus.WAITING_GREEN, 4)
    # WHEN v2 finishes
    leases(aws, v2, clock)
    ctl.step()
    leases(aws, v1, clock, drained=True, owner=None)
    st = ctl.step()
    # THEN v4 is deployed next; v3 never gets a stream
    assert (st.version, st.status) == (4, DeployStatus.WAITING_GREEN)
    assert "georebal-geo-v3" not in aws.stream_names()


def test_drain_timeout_finishes_but_keeps_the_old_stream(aws: Aws) -> None:
    # GIVEN v2 flipped and blue v1 never drains
    clock = Clock()
    ctl = controller(aws, clock, drain=60.0)
    v1 = deploy_v1(aws, clock, ctl)
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    ctl.step()
    leases(aws, v2, clock)
    assert ctl.step().status == DeployStatus.DRAINING
    # WHEN the drain timeout passes
    clock.now += 61
    st = ctl.step()
    # THEN the deployment is done, the reason says so, and v1's stream is kept for its remaining records
    assert st.status == DeployStatus.DONE and "did not drain" in st.reason and "georebal-geo-v1" in st.reason
    assert "georebal-geo-v1" in aws.stream_names()


def test_concurrent_steppers_apply_a_transition_once(aws: Aws) -> None:
    # GIVEN two controllers over the same control table and a stale view of the state
    clock = Clock()
    a, b = controller(aws, clock), controller(aws, clock)
    publish(aws, make_spec(1))
    a.request(1)
    stale = a.state()
    # WHEN b advances first, then a tries to save from the stale state
    b.step()
    saved = a._save(stale, stale)
    # THEN a's write is refused (optimistic lock on rev)
    assert saved is False and a.state().status == DeployStatus.WAITING_GREEN


def test_unknown_version_is_refused_naming_the_object(aws: Aws) -> None:
    # GIVEN no spec v7 / WHEN requested / THEN the error names the missing object
    ctl = controller(aws, Clock())
    with pytest.raises(SpecError, match=r"specs/v00000007\.json"):
        ctl.request(7)


def test_rollback_after_flip_is_refused(aws: Aws) -> None:
    # GIVEN v1 active / WHEN asked to roll back v1 / THEN refused: blue/green cannot un-flip
    clock = Clock()
    ctl = controller(aws, clock)
    deploy_v1(aws, clock, ctl)
    with pytest.raises(DeployError, match="already moved to v1"):
        ctl.rollback(1)


def test_geo_stream_encryption_starts_once_and_only_with_a_key(aws: Aws) -> None:
    # GIVEN an ACTIVE geo stream
    aws.streams.create("georebal-geo-v7", 2)
    assert aws.streams.status("georebal-geo-v7") == "ACTIVE"
    # WHEN encryption is asked for without a key, then with the configured key, twice
    unkeyed = GeoStreams(aws.clients.kinesis).start_encryption("georebal-geo-v7")
    first, second = aws.streams.start_encryption("georebal-geo-v7"), aws.streams.start_encryption("georebal-geo-v7")
    # THEN only the first keyed call starts it, and the stream ends up KMS-encrypted
    assert (unkeyed, first, second) == (False, True, False)
    summary = aws.clients.kinesis.describe_stream_summary(StreamName="georebal-geo-v7")["StreamDescriptionSummary"]
    assert summary["EncryptionType"] == "KMS"


def test_carry_swap_scales_by_the_plan_without_a_new_revision(aws: Aws) -> None:
    # GIVEN v1 (3 slots) active in carry mode on generic tasks
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = deploy_v1(aws, clock, ctl)
    assert service(aws)[0] == 3
    # WHEN v2 keeps w0001-w0003 and adds w0004
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=v1)
    publish(aws, v2)
    ctl.request(2)
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    # THEN the desired count rises by the one started slot only (every old task keeps running), with no new revision
    assert service(aws)[0] == 4 and revisions(aws) == 1
    plan = aws.control.get(ControlKey.PLAN)
    assert plan is not None and (plan["kept"], plan["started"], plan["stopped"], plan["status"]) == (
        ["w0001", "w0002", "w0003"], ["w0004"], [], "started")
    # WHEN green is ready (the carriers' and the new worker's leases) and then blue drained
    leases(aws, v2, clock)
    assert ctl.step().status == DeployStatus.DRAINING
    leases(aws, v1, clock, drained=True, owner=None)
    assert ctl.step().status == DeployStatus.DONE
    # THEN the count is the new slot count and the plan is done
    assert service(aws)[0] == 4 and aws.control.get(ControlKey.PLAN)["status"] == "done"  # type: ignore[index]
    # WHEN v3 removes w0001
    v3 = make_spec(3, loads=(500, 500, 500, 500), previous=v2)
    publish(aws, v3)
    ctl.request(3)
    ctl.step()
    # THEN nothing starts (the count stays) until blue drained, then it drops by the removed slot
    assert service(aws)[0] == 4 and aws.control.get(ControlKey.PLAN)["stopped"] == ["w0001"]  # type: ignore[index]
    leases(aws, v3, clock)
    ctl.step()
    leases(aws, v2, clock, drained=True, owner=None)
    assert ctl.step().status == DeployStatus.DONE and service(aws)[0] == 3


def test_carry_rollback_marks_the_plan_and_scales_back(aws: Aws) -> None:
    # GIVEN v1 active (carry) and v2 (one more slot) whose workers never get ready
    clock = Clock()
    ctl = controller(aws, clock, green=300.0)
    start_v2(aws, clock, ctl)
    assert service(aws)[0] == 4
    # WHEN the green timeout passes
    clock.now += 301
    st = ctl.step()
    # THEN v2 is rolled back: the plan says so (carriers drop their v2 claims), the count is back to v1's, blue serves
    assert st.status == DeployStatus.ROLLED_BACK and service(aws)[0] == 3
    assert aws.control.get(ControlKey.PLAN)["status"] == "rolled_back"  # type: ignore[index]
    assert read_active(aws.control).version == 1  # type: ignore[union-attr]


def test_failed_deploy_rolls_back_its_plan_without_reading_the_spec(aws: Aws) -> None:
    # GIVEN v2 deploying in carry mode whose spec object then disappears
    clock = Clock()
    ctl = controller(aws, clock, green=300.0)
    start_v2(aws, clock, ctl)
    aws.clients.s3.delete_object(Bucket=aws.cfg.specs_bucket, Key=spec_key(2))
    ctl.specs._cache.clear()
    # WHEN stepping fails past the green timeout
    clock.now += 301
    st = ctl.step()
    # THEN the version is marked failed, its plan rolled back and the count restored from the stored plan
    assert st.status == DeployStatus.ROLLED_BACK and st.failed_version == 2
    assert aws.control.get(ControlKey.PLAN)["status"] == "rolled_back" and service(aws)[0] == 3  # type: ignore[index]


def test_the_geo_stream_gets_every_shard_of_every_worker(aws: Aws) -> None:
    # GIVEN spec v1 whose 3 workers own 2 shards each
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = with_shards(make_spec(1), 2)
    publish(aws, v1)
    # WHEN its deployment starts
    ctl.request(1)
    ctl.step()
    # THEN the stream has 6 shards, and each worker's keys land in two different shards of it
    shards = aws.clients.kinesis.list_shards(StreamName="georebal-geo-v1")["Shards"]
    assert len(shards) == v1.shard_count == 6
    ranges = [(int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"])) for s in shards]
    for w in v1.workers:
        hit = {i for k in w.shard_keys for i, (lo, hi) in enumerate(ranges) if lo <= int(k) <= hi}
        assert len(hit) == 2


class QuotaStreams(GeoStreams):
    """The account's shard quota as a low one (moto reports a fixed 6,000-shard quota with none open)."""

    def __init__(self, inner: GeoStreams, limit: int, open_shards: int) -> None:
        super().__init__(inner._k, inner.kms_key)
        self.quota = ShardQuota(limit=limit, open=open_shards)

    def shard_quota(self) -> ShardQuota:
        return self.quota


def test_a_version_whose_stream_exceeds_the_shard_quota_is_refused_and_the_old_one_keeps_serving(aws: Aws) -> None:
    # GIVEN v1 live, and an account whose shard quota has room for 3 more shards only
    clock = Clock()
    ctl = controller(aws, clock)
    deploy_v1(aws, clock, ctl)
    ctl.streams = QuotaStreams(aws.streams, limit=6, open_shards=3)
    before = aws.stream_names()
    # WHEN v2 (4 workers, 4 shards) is requested
    v2 = make_spec(2, loads=(900, 900, 900, 900), previous=make_spec(1))
    publish(aws, v2)
    ctl.request(2)
    st = ctl.step()
    # THEN it is refused before CreateStream, saying how many shards it needs and what the quota allows
    assert st.status == DeployStatus.ROLLED_BACK and st.failed_version == 2
    assert "needs 4 shards" in st.reason and "3 of the account's 6" in st.reason
    assert aws.stream_names() == before
    active = read_active(aws.control)
    assert active is not None and active.version == 1
    # AND with room for it the next version deploys
    ctl.streams = QuotaStreams(aws.streams, limit=100, open_shards=3)
    v3 = make_spec(3, loads=(900, 900, 900, 900), previous=make_spec(1))
    publish(aws, v3)
    ctl.request(3)
    assert ctl.step().status == DeployStatus.WAITING_GREEN


def test_the_workers_get_the_stream_manifest_and_a_small_swap_head_before_the_fleet_starts(aws: Aws) -> None:
    # GIVEN v1 live and v2 started
    clock = Clock()
    ctl = controller(aws, clock)
    v2 = start_v2(aws, clock, ctl)
    # THEN the stream manifest lists every shard of v2's stream, and the swap head says what the plan does
    body = aws.clients.s3.get_object(Bucket=aws.cfg.specs_bucket, Key=stream_manifest_key(2))["Body"].read()
    manifest = StreamManifest.from_json(body, "test")
    assert manifest.stream_name == ctl.stream_name(v2) and len(manifest.shards) == v2.shard_count
    head = aws.control.get(ControlKey.SWAP)
    assert head is not None and (head["from_version"], head["to_version"], head["mode"], head["status"]) == (
        1, 2, "carry", "started")
    # AND the head is far smaller than the plan, whose slot lists grow with the fleet
    plan = aws.control.get(ControlKey.PLAN)
    assert plan is not None and len(json.dumps(head)) < len(json.dumps(plan))
    # WHEN the swap is rolled back THEN the head says so too
    ctl.rollback(2, 1)
    head = aws.control.get(ControlKey.SWAP)
    assert head is not None and head["status"] == "rolled_back"


def test_a_large_fleet_starts_in_launch_steps_within_fargates_bucket(aws: Aws) -> None:
    # GIVEN a first spec of more than 80 slots in carry mode (Fargate: a bucket of 100 launches refilled at 20/s)
    clock = Clock()
    ctl = controller(aws, clock)
    v1 = make_spec(1, loads=(900,) * 90)
    slots = len(v1.workers)
    assert 80 < slots <= 120
    publish(aws, v1)
    ctl.request(1)
    # WHEN the deployer steps every 15 s
    counts = []
    for _ in range(4):
        ctl.step()
        counts.append(service(aws)[0])
        clock.now += 15
    # THEN the desired count rises by at most LAUNCH_STEP (40) per step, never two steps in one
    assert counts == [40, 80, slots, slots]
    # AND green is judged as usual once every slot's lease is ready
    leases(aws, v1, clock)
    assert ctl.step().status == DeployStatus.DONE
