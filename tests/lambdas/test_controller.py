"""DeployController state machine over moto (Kinesis, DynamoDB, S3, ECS); workers are represented by their leases."""

from __future__ import annotations

import pytest

from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.plan import SwapMode
from geokernel.errors import SpecError
from lambdas.deploy.errors import DeployError
from lambdas.runtime.records import read_active
from tests.lambdas.conftest import Aws, make_spec
from tests.lambdas.controller_testkit import Clock, controller, deploy_v1, leases, publish, revisions, service


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
