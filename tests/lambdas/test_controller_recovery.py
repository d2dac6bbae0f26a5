"""DeployController when a deployment goes wrong: green and drain timeouts, rollbacks, a lost spec, the shard quota."""

from __future__ import annotations

from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.spec_pointer import spec_key
from lambdas.runtime.kinesis import GeoStreams, ShardQuota
from lambdas.runtime.records import read_active
from tests.lambdas.conftest import Aws, make_spec
from tests.lambdas.controller_testkit import Clock, controller, deploy_v1, leases, publish, service, start_v2


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
