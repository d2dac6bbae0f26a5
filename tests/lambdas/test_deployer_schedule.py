"""The deployer's one-minute schedule advances a stalled deployment (issue 13, finding 3; moto)."""

from __future__ import annotations

import pytest

from lambdas.common.aws import spec_key
from lambdas.deploy import deployer, runtime
from lambdas.deploy.controller import DEPLOYING, WAITING_GREEN
from tests.lambdas.conftest import Aws, FakeLambdaContext, load_event, make_spec


class ShortContext(FakeLambdaContext):
    def get_remaining_time_in_millis(self) -> int:
        return 25_000


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWAP_MODE", "whole")
    runtime.config.cache_clear()
    runtime.controller.cache_clear()


def test_a_deploy_whose_deployer_crashed_after_saving_deploying_is_resumed_by_the_schedule(aws: Aws) -> None:
    # GIVEN v1 published and the deploy item saved as deploying, but the deployer died before creating the stream
    spec = make_spec(1)
    aws.specs.put_new(spec)
    aws.control.put_forward("desired", {"version": 1, "spec_key": spec_key(1), "published_at": "x"})
    ctl = runtime.controller()
    ctl.request(1)
    st = ctl.state()
    assert ctl._save(st, st.__class__(**{**st.__dict__, "status": DEPLOYING, "version": 1, "queued_version": None,
                                          "started_at": ctl.clock(), "stage_since": ctl.clock()}))
    assert aws.stream_names() == []
    # WHEN the schedule's events arrive: the rule's constant input, and the default scheduled-event shape
    assert deployer.requested_versions(load_event("eventbridge_scheduled_event.json")) == []
    out = deployer.handler({"action": "step"}, ShortContext())
    # THEN the stream is created, the fleet started and the deployment waits for green
    assert out["status"] == WAITING_GREEN and aws.stream_names() == ["georebal-geo-v1"]
