"""A fresh deployment never reuses a geo stream an earlier deployment with the same prefix left (moto).

Every geo stream the deploy controller creates carries its deployment's tag (DEPLOYMENT_ID, the stack's id); a
``<prefix>-geo-v<n>`` found without it (say a destroyed stack's, whose teardown did not finish) is deleted and
created anew before any worker or the router is told about the version.
"""

from __future__ import annotations

from typing import Any

from geokernel.contracts.control import DeployStatus
from lambdas.deploy.controller import DeployController
from lambdas.runtime.kinesis import DEPLOYMENT_TAG, GeoStreams
from tests.lambdas.conftest import Aws, make_spec
from tests.lambdas.controller_testkit import Clock, controller, publish

STACK_A = "arn:aws:cloudformation:us-east-1:123456789012:stack/georebal-geo-rebalancer/aaaa"
STACK_B = "arn:aws:cloudformation:us-east-1:123456789012:stack/georebal-geo-rebalancer/bbbb"
NAME = "georebal-geo-v1"


class TaggingKinesis:
    """moto's Kinesis client, applying CreateStream's ``Tags`` as the real API does (moto 5.2.6 drops them; its
    streams are ACTIVE at once, so tagging right after the create is the same thing here)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def create_stream(self, **kwargs: Any) -> Any:
        tags = kwargs.pop("Tags", None)
        out = self._client.create_stream(**kwargs)
        if tags:
            self._client.add_tags_to_stream(StreamName=kwargs["StreamName"], Tags=tags)
        return out


def _controller(aws: Aws, clock: Clock, deployment: str) -> DeployController:
    ctl = controller(aws, clock)
    ctl.streams = GeoStreams(TaggingKinesis(aws.clients.kinesis), aws.cfg.geo_stream_kms_key, deployment=deployment)
    return ctl


def _tags(aws: Aws) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in aws.clients.kinesis.list_tags_for_stream(StreamName=NAME)["Tags"]}


def _shards(aws: Aws) -> int:
    return len(aws.clients.kinesis.list_shards(StreamName=NAME)["Shards"])


def _deploy_v1(aws: Aws, ctl: DeployController, steps: int) -> DeployStatus:
    publish(aws, make_spec(1))
    ctl.request(1)
    for _ in range(steps):
        st = ctl.step()
    return DeployStatus(st.status)


def test_a_stream_left_by_another_deployment_is_deleted_and_created_anew(aws: Aws) -> None:
    # GIVEN georebal-geo-v1 left by deployment A (7 shards, A's tag) and a fresh deployment B with the same prefix
    aws.clients.kinesis.create_stream(StreamName=NAME, ShardCount=7)
    aws.clients.kinesis.add_tags_to_stream(StreamName=NAME, Tags={DEPLOYMENT_TAG: STACK_A})
    ctl = _controller(aws, Clock(), STACK_B)
    # WHEN B deploys its v1 (a step deletes A's stream, the next creates B's, the next starts the fleet)
    status = _deploy_v1(aws, ctl, steps=3)
    # THEN v1 runs on a stream of B's: B's tag and v1's shard count, not A's 7
    assert status == DeployStatus.WAITING_GREEN
    assert _tags(aws) == {DEPLOYMENT_TAG: STACK_B}
    assert _shards(aws) == make_spec(1).shard_count != 7


def test_an_untagged_stream_of_the_same_name_is_not_reused_either(aws: Aws) -> None:
    # GIVEN georebal-geo-v1 without any deployment tag (created by code before the tag existed, or by hand)
    aws.clients.kinesis.create_stream(StreamName=NAME, ShardCount=7)
    ctl = _controller(aws, Clock(), STACK_B)
    # WHEN B's first step finds it THEN the version is still deploying and the stream is gone
    assert _deploy_v1(aws, ctl, steps=1) == DeployStatus.DEPLOYING
    assert aws.stream_names() == []
    # AND the next steps create B's own and go on
    assert ctl.step().status == DeployStatus.DEPLOYING
    assert ctl.step().status == DeployStatus.WAITING_GREEN
    assert _tags(aws) == {DEPLOYMENT_TAG: STACK_B}


def test_the_deployments_own_stream_is_kept(aws: Aws) -> None:
    # GIVEN deployment B WHEN it deploys v1 THEN its stream is created tagged once and used as it is
    ctl = _controller(aws, Clock(), STACK_B)
    assert _deploy_v1(aws, ctl, steps=1) == DeployStatus.WAITING_GREEN
    assert _tags(aws) == {DEPLOYMENT_TAG: STACK_B} and _shards(aws) == make_spec(1).shard_count


def test_without_a_deployment_id_every_stream_is_its_own(aws: Aws) -> None:
    # GIVEN no DEPLOYMENT_ID (the local loop) and a stream of the name already there
    aws.clients.kinesis.create_stream(StreamName=NAME, ShardCount=7)
    # WHEN v1 is deployed THEN that stream is used, untagged, as before
    assert _deploy_v1(aws, controller(aws, Clock()), steps=1) == DeployStatus.WAITING_GREEN
    assert _tags(aws) == {} and _shards(aws) == 7
