"""DeployController's fleet and streams: carry scaling, shards, encryption, stream manifest, swap head, launches."""

from __future__ import annotations

import json

from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.stream import StreamManifest, stream_manifest_key
from geokernel.partition_spec.shards import with_shards
from lambdas.runtime.kinesis import GeoStreams
from tests.lambdas.conftest import Aws, make_spec
from tests.lambdas.controller_testkit import Clock, controller, deploy_v1, leases, publish, revisions, service, start_v2


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
