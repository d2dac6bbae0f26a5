"""georebal smoke end to end, without AWS or cdk: moto holds the deployment, a recording runner stands in for cdk
(it writes the outputs file and the template ``cdk deploy`` would), a fake clock jumps, and a fake pipeline does
what the deployed system would (v1 goes live, the probes come out of the ingest stream enriched)."""

from __future__ import annotations

import argparse
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from georebal.cli import make_parser
from georebal.commands.smoke import cmd_smoke, make_plan
from georebal.smoke.flow import Limits, Smoke
from georebal.smoke.plan import SmokePlan
from tests.georebal.recorded import RecordedAws
from tests.georebal.smoke_fakes import (
    PREFIX,
    STACK,
    FakeClock,
    FakePipeline,
    FakeRunner,
    log,
    make_deployment,
    moto_aws,
)

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = ROOT / "cdk.json"
LIMITS = Limits(events=1000, active_s=1800, output_s=600, streams_s=60, poll_s=30)


def parse(*args: str) -> argparse.Namespace:
    return make_parser().parse_args(["smoke", "--cdk-json", str(CDK_JSON), *args])


@dataclass
class Run:
    """One smoke run's parts: moto's session, the deployment's outputs, the plan, the fakes."""

    aws: Any
    outputs: dict[str, str]
    plan: SmokePlan
    clock: FakeClock
    runner: FakeRunner
    pipeline: FakePipeline
    said: list[str]

    def smoke(self, **kwargs: Any) -> int:
        return Smoke(plan=self.plan, aws=self.aws, run=self.runner, clock=self.clock, limits=LIMITS,
                     say=self.said.append, **kwargs)()

    @property
    def summary(self) -> list[str]:
        return self.said[self.said.index(next(s for s in self.said if s.startswith("summary"))) + 1:]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    """A smoke run whose v1 goes live 5 min after the first event (the clock starts at the real time: moto keeps no
    log event older than 14 days)."""
    with mock_aws():
        aws = moto_aws()
        outputs = make_deployment(aws)
        plan, _ = make_plan(parse("--workdir", str(tmp_path / "work")), token=PREFIX.removeprefix("georebal-smoke-"))
        clock = FakeClock(float(int(time.time())))
        pipeline = FakePipeline(aws, outputs, start=clock.t, live_after=300)
        clock.hooks.append(pipeline)
        yield Run(aws, outputs, plan, clock, FakeRunner(plan, outputs), pipeline, [])


def test_a_healthy_deployment_passes_every_check_and_is_destroyed(run: Run) -> None:
    # GIVEN a deployment that goes live 5 min after the first event and delivers every event
    # WHEN the smoke run runs
    status = run.smoke()
    # THEN cdk deploy, then cdk destroy ran, in the repository, with the region
    assert status == 0 and run.runner.verbs == ["deploy", "destroy"]
    assert {(str(cwd), env["AWS_REGION"]) for _, cwd, env in run.runner.calls} == {(str(ROOT), "eu-central-1")}
    # AND the 1,000 events were put before any spec existed, with progress
    assert run.said[1:4] == [f"send: 1,000 events to {PREFIX}-ingest (no spec exists yet)",
                             "send: 500/1,000 events put", "send: 1,000/1,000 events put"]
    # AND ticks were put at each poll until v1 went live, and came out too
    assert "ticks: 50 sent while no spec was active, 50 in the output (not judged: they move the Spark job's " \
           "event-time watermark)" in run.said
    # AND every check passed, the geo stream the deployer made is deleted
    assert run.summary == [
        "  ok    deploy: stack georebal-smoke-ab12c-geo-rebalancer in eu-central-1 after 0 s",
        "  ok    spec active: v1 active 5 min 0 s after the first event (geo stream georebal-smoke-ab12c-geo-v1)",
        f"  ok    events in vs out: 1,000 in, 1,000 out, 0 lost (s3://{PREFIX}-output/enriched/)",
        f"  ok    router failure queue empty: 0 messages in {run.outputs['RouterFailureQueue']}",
        f"  ok    no AccessDenied in logs: 0 in 5 log groups (LogGroupRouter, LogGroupPartitioner, LogGroupDeployer, "
        f"LogGroupHooks, LogGroupWorkers) since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(run.pipeline.start))}",
        f"  ok    destroy: stack {STACK} deleted",
        f"  ok    geo streams gone: Kinesis lists no {PREFIX}-geo-v* (deleted {PREFIX}-geo-v1: the deployer creates "
        "them at run time)",
        "PASSED: all 7 checks"]
    # AND it said what may remain
    assert "what may remain in the account:" in run.said
    assert "  - no resource of the template is retained (retain_data=false)" in run.said


@pytest.mark.parametrize("fault", ["lost", "queue", "denied"])
def test_a_fault_fails_its_check_and_the_stack_still_goes(run: Run, fault: str) -> None:
    # GIVEN one event the workers never write, a message in the failure queue, or a Lambda denied access
    if fault == "lost":
        run.pipeline.drop = frozenset({f"{PREFIX}-00417"})
    elif fault == "queue":
        run.aws.client("sqs").send_message(QueueUrl=run.outputs["RouterFailureQueue"], MessageBody="{}")
    else:
        log(run.aws, "LogGroupRouter", "An error occurred (AccessDeniedException) when calling PutRecords",
            run.clock.t + 1)
    # WHEN the smoke run runs
    status = run.smoke()
    # THEN it exits 1 naming the failed check, after destroying the stack
    failed = {"lost": "events in vs out", "queue": "router failure queue empty", "denied": "no AccessDenied in logs"}
    assert status == 1 and run.summary[-1] == f"FAILED: {failed[fault]}"
    assert run.runner.verbs == ["deploy", "destroy"]
    line = next(s for s in run.summary if failed[fault] in s)
    assert line.startswith("  FAIL")
    if fault == "lost":  # the wait gave up after its timeout, with the lost id
        assert line.endswith(f"1 lost: not in s3://{PREFIX}-output/enriched/ after 10 min 0 s ({PREFIX}-00417)")


def test_no_spec_going_live_times_out_naming_what_is_missing(run: Run) -> None:
    # GIVEN a deployment that never publishes a spec
    run.pipeline.live_after = 10**9
    # WHEN the smoke run runs
    status = run.smoke()
    # THEN it waited 30 min (60 polls, each with its ticks), did not wait for the output, and destroyed the stack
    assert status == 1 and run.runner.verbs == ["deploy", "destroy"]
    assert not any(s.startswith("wait for the output") for s in run.said)
    assert "  FAIL  spec active: no spec active 30 min 0 s after the first event: control item 'active' is missing " \
           f"in {PREFIX}-control, and so is 'desired'" in "\n".join(run.summary)
    assert f"  FAIL  events in vs out: 1,000 in, 0 out, 1,000 lost: not in s3://{PREFIX}-output/enriched/ after 0 s " \
           f"({PREFIX}-00000, {PREFIX}-00001" in "\n".join(run.summary)
    assert run.summary[-1] == "FAILED: spec active, events in vs out"


def test_a_failed_deploy_is_destroyed_too(run: Run) -> None:
    # GIVEN cdk deploy exiting 1 WHEN the smoke run runs THEN nothing is sent, the stack is destroyed, exit 1
    run.runner.deploy_status = 1
    assert run.smoke() == 1 and run.runner.verbs == ["deploy", "destroy"]
    assert not any(s.startswith("send:") for s in run.said)
    assert run.summary[0] == "  FAIL  deploy: cdk deploy exited 1 (its output above says why)"


def test_keep_leaves_the_stack_and_says_how_to_destroy_it(run: Run) -> None:
    # GIVEN --keep WHEN the smoke run passes THEN there is no destroy, and the command to run later is printed
    assert run.smoke(keep=True) == 0 and run.runner.verbs == ["deploy"]
    kept = next(s for s in run.said if s.startswith("kept (--keep)"))
    assert f"node_modules/.bin/cdk destroy {STACK} --force" in kept and f"{PREFIX}-geo-v*" in kept
    assert sorted(run.aws.client("kinesis").list_streams()["StreamNames"]) == [f"{PREFIX}-geo-v1", f"{PREFIX}-ingest"]


def test_ctrl_c_while_waiting_still_destroys(run: Run) -> None:
    # GIVEN an interrupt at the third poll
    def interrupt(now: float) -> None:
        if len(run.clock.sleeps) == 3:
            raise KeyboardInterrupt
    run.clock.hooks.insert(0, interrupt)
    # WHEN the smoke run runs THEN the stack is destroyed before the interrupt goes on
    with pytest.raises(KeyboardInterrupt):
        run.smoke()
    assert run.runner.verbs == ["deploy", "destroy"]
    assert "interrupted: destroying the stack (Ctrl-C again leaves it)" in run.said
    assert f"ok    destroy: stack {STACK} deleted" in run.said


def test_the_cdk_commands_carry_the_tiny_fleets_settings(tmp_path: Path) -> None:
    # GIVEN the smoke defaults, a profile, and the user's own -c
    plan, config = make_plan(parse("--profile", "sandbox", "-c", "engine=glue", "--workdir", str(tmp_path)), "ab12c")
    settings = ["-c", f"prefix={PREFIX}", "-c", "fleet_workers=2", "-c", "max_load=500", "-c", "window_s=60", "-c",
                "watermark_s=10", "-c", "retain_data=false", "-c", "ingest_shards=1", "-c", "nat_gateways=1", "-c",
                "emr_max_vcpu=8", "-c", "emr_max_memory_gb=32", "-c", "log_retention_days=1", "-c", "engine=glue"]
    common = ["--output", str(tmp_path / "cdk.out"), "--profile", "sandbox", *settings]
    # THEN deploy names the stack, never asks, writes the outputs; destroy forces; both with the same settings
    assert plan.deploy_command() == ["node_modules/.bin/cdk", "deploy", STACK, "--require-approval", "never",
                                     "--outputs-file", str(tmp_path / "outputs.json"), *common]
    assert plan.destroy_command() == ["node_modules/.bin/cdk", "destroy", STACK, "--force", *common]
    # AND the settings are what infra/config.py makes of them: 2 workers, one geo shard each, nothing retained
    assert (config.prefix, config.fleet_workers, config.shards_per_worker, config.retain_data, config.engine) == (
        PREFIX, 2, 1, False, "glue")
    # AND a new prefix is 20 characters, unique per run
    first, _ = make_plan(parse())
    second, _ = make_plan(parse())
    assert len(first.prefix) == 20 and first.prefix.startswith("georebal-smoke-") and first.prefix != second.prefix


def connect_to(aws: Any) -> Any:
    return lambda region, profile: aws


def cdk_stub(tmp_path: Path) -> str:
    cdk = tmp_path / "cdk"
    cdk.write_text("#!/bin/sh\nexit 99\n")
    cdk.chmod(0o755)
    return str(cdk)


def test_preflight_refuses_before_anything_is_deployed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN a new account (Lambda concurrency 10: the smoke fleet needs 6, 12 with the margin), bootstrapped
    with mock_aws():
        moto = moto_aws()
        moto.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="29", Type="String")
        aws = RecordedAws("new", overrides={n: moto.client(n) for n in ("sts", "ssm")})
        runner = FakeRunner(make_plan(parse())[0], {})
        # WHEN the smoke command runs
        status = cmd_smoke(parse("--cdk", cdk_stub(tmp_path)), connect_to(aws), runner=runner,
                           which=lambda name: "/usr/bin/docker")
    out, err = capsys.readouterr()
    # THEN preflight's table and refusals are printed, nothing is deployed, exit 2
    assert status == 2 and runner.calls == []
    assert "error: Lambda concurrent executions: the fleet needs 6 executions, 12 with the 2x margin" in err
    assert out.splitlines()[0].startswith("smoke: account 123456789012, region ")
    assert "CDK bootstrap version 29" in out.splitlines()[0]
    assert "smoke: preflight refused the smoke fleet (above): nothing was deployed" in out


def test_the_smoke_fleet_passes_preflight_on_an_account_with_aws_defaults(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an account on AWS's default quotas (EMR Serverless 16 vCPU: emr_max_vcpu=8 fits with the margin)
    with mock_aws():
        moto = moto_aws()
        moto.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="29", Type="String")
        aws = RecordedAws("default", overrides={n: moto.client(n) for n in ("sts", "ssm", "kinesis")})
        args = parse("--cdk", cdk_stub(tmp_path), "-c", f"prefix={PREFIX}", "--workdir", str(tmp_path / "work"))
        runner = FakeRunner(make_plan(args)[0], {})
        runner.deploy_status = 1  # stop right after the deploy: this test is about what comes before
        status = cmd_smoke(args, connect_to(aws), runner=runner, clock=FakeClock(time.time()),
                           which=lambda name: "/usr/bin/docker")
    out = capsys.readouterr().out
    # THEN preflight passes and cdk deploy runs (then cdk destroy)
    assert "preflight: every quota fits 2 workers with a 2x margin" in out
    assert status == 1 and runner.verbs == ["deploy", "destroy"]


def test_the_wrapper_prints_its_usage_and_names_missing_credentials(tmp_path: Path) -> None:
    # GIVEN no AWS configuration but a region (and no instance metadata to ask)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_REGION": "eu-west-1",
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_EC2_METADATA_DISABLED": "true"}
    # WHEN the wrapper is asked for help THEN it prints its usage and exits 0, asking no one
    shown = subprocess.run(["bash", "scripts/smoke-deploy", "--help"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: scripts/smoke-deploy")
    assert "--keep" in shown.stdout and "sandbox" in shown.stdout
    # WHEN run THEN it stops at once with one line naming the missing credentials, exit 2
    ran = subprocess.run(["bash", "scripts/smoke-deploy"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.startswith("error: no AWS credentials: set AWS_PROFILE") and len(ran.stderr.splitlines()) == 1
    # AND without a region that is named
    ran = subprocess.run(["bash", "scripts/smoke-deploy"], cwd=ROOT, env={**env, "AWS_REGION": ""},
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 2 and ran.stderr == "error: no AWS region: give --region or set AWS_REGION (the region " \
                                                 "you deploy to)\n"
