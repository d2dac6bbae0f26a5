"""georebal preflight against three recorded accounts (new, AWS defaults, raised) at 100 and 1,000 workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from georebal.cli import main
from tests.georebal.recorded import ACCOUNTS, RecordedAws, RecordedClient, check_recorded, load_account

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
FARGATE, ENIS, SHARDS = "Fargate On-Demand vCPU", "Network interfaces per Region", "Kinesis shards per Region"
LAMBDA, EMR = "Lambda concurrent executions", "EMR Serverless concurrent vCPU"


def preflight(capsys: pytest.CaptureFixture[str], aws: Any, *args: str) -> tuple[int, str, list[str]]:
    """Run ``preflight`` on the repository's cdk.json against ``aws``; the status, stdout and the error lines."""
    status = main(["preflight", "--cdk-json", str(CDK_JSON), *args], aws=lambda region, profile: aws)
    out, err = capsys.readouterr()
    return status, out, [line for line in err.splitlines() if line.startswith("error: ")]


def refused(errors: list[str]) -> set[str]:
    return {line.removeprefix("error: ").split(":")[0] for line in errors}


@pytest.mark.parametrize("name", ACCOUNTS)
def test_the_recorded_responses_are_shaped_like_the_apis(name: str) -> None:
    # GIVEN a recorded account WHEN each response is held against botocore's service model
    # THEN every field is one the API returns, of its type, and every error is one the operation raises
    assert check_recorded(load_account(name)) == []


@pytest.mark.parametrize(("name", "workers", "refusals"), [
    ("new", 100, {FARGATE, SHARDS, LAMBDA, EMR}),
    ("new", 1000, {FARGATE, SHARDS, LAMBDA, EMR}),
    ("default", 100, {EMR}),
    ("default", 1000, {SHARDS, EMR}),
    ("raised", 100, set()),
    ("raised", 1000, set()),
])
def test_preflight_refuses_exactly_the_quotas_the_fleet_does_not_fit(
        capsys: pytest.CaptureFixture[str], name: str, workers: int, refusals: set[str]) -> None:
    # GIVEN a recorded account and the default cdk.json WHEN preflight checks `workers` worker slots
    status, out, errors = preflight(capsys, RecordedAws(name), "--workers", str(workers))
    # THEN it refuses (exit 2) with one line per quota that does not fit with a 2x margin, and passes otherwise
    assert refused(errors) == refusals and len(errors) == len(refusals)
    assert status == (2 if refusals else 0)
    # AND the table has one row per quota of the EMR engine
    assert out.count("\n") >= 10 and f"{workers:,} workers x 0.5 vCPU" in out.splitlines()[0]
    if not refusals:
        assert out.rstrip().endswith(f"every quota fits {workers:,} workers with a 2x margin")


def test_each_refusal_names_the_need_the_account_value_and_what_to_change(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the new account WHEN 1,000 workers are checked
    _, _, errors = preflight(capsys, RecordedAws("new"), "--workers", "1000")
    lines = {line.split(":")[1].strip(): line for line in errors}
    # THEN each line names the quota, the need (steady and peak), the margin, the account's value and the fix
    assert lines[FARGATE] == (
        "error: Fargate On-Demand vCPU: the fleet needs 500 vCPU (1,000 during a code rollout), 2,000 with the 2x "
        "margin, of 6 applied: raise the quota (Service Quotas fargate L-3032A538) or lower --workers (fleet_workers) "
        "/ worker_cpu")
    assert lines[SHARDS] == (
        "error: Kinesis shards per Region: the fleet needs 1,068 shards (2,068 during every swap), 4,136 with the 2x "
        "margin, of 200 applied: raise the quota (Service Quotas kinesis L-8EE540D4) or lower --workers "
        "(fleet_workers) / shards_per_worker (from max_load) / ingest_shards")
    assert lines[LAMBDA] == (
        "error: Lambda concurrent executions: the fleet needs 73 executions, 146 with the 2x margin, of 10 applied: "
        "raise the quota (Service Quotas lambda L-B99A9384) or lower ingest_shards / router_parallelism")
    assert lines[EMR] == (
        "error: EMR Serverless concurrent vCPU: the fleet needs 16 vCPU, 32 with the 2x margin, of 16 AWS default: "
        "raise the quota (Service Quotas emr-serverless L-D05C8A75) or lower emr_max_vcpu")


def test_the_table_shows_where_each_value_was_read(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the raised account WHEN 1,000 workers are checked
    status, out, _ = preflight(capsys, RecordedAws("raised"), "--workers", "1000")
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    # THEN applied values, AWS documentation and the stack's own VPC are named, and what is in use is shown
    assert status == 0
    assert "10,000 applied" in rows[FARGATE] and rows[FARGATE].rstrip().endswith("Service Quotas")
    assert "20,000 applied" in rows[SHARDS] and " 150 " in rows[SHARDS] and "Kinesis DescribeLimits" in rows[SHARDS]
    assert "100" in rows[LAMBDA] and "Lambda GetAccountSettings" in rows[LAMBDA]  # reserved by other functions
    assert "500 documented" in rows["Fargate task launches per service"]
    assert "8,182 in 2 new /20 subnets" in rows["Private subnets' free IPv4 addresses"]


def test_the_default_account_reads_the_aws_defaults_where_nothing_is_applied(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the default account (Service Quotas has no applied values) WHEN checked
    aws = RecordedAws("default")
    _, out, _ = preflight(capsys, aws, "--workers", "100")
    # THEN each Service Quotas row asked for the applied value first, then the AWS default
    calls = [(op, p["ServiceCode"]) for op, p in aws.clients["service-quotas"].calls]
    assert calls == [("GetServiceQuota", "fargate"), ("GetAWSDefaultServiceQuota", "fargate"),
                     ("GetServiceQuota", "vpc"), ("GetAWSDefaultServiceQuota", "vpc"),
                     ("GetServiceQuota", "emr-serverless"), ("GetAWSDefaultServiceQuota", "emr-serverless")]
    assert "4,000 AWS default" in out and "Service Quotas (no applied value)" in out
    # AND Kinesis was asked once for both of its rows
    assert [op for op, _ in aws.clients["kinesis"].calls] == ["DescribeLimits"]


def test_the_glue_engine_checks_glue_instead_of_emr(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the default account and -c engine=glue WHEN 100 workers are checked
    status, out, errors = preflight(capsys, RecordedAws("default"), "--workers", "100", "-c", "engine=glue")
    # THEN Glue's DPUs and job runs are checked instead of EMR Serverless, and everything fits
    assert status == 0 and errors == [] and EMR not in out
    assert "Glue task DPUs" in out and "Glue concurrent job runs" in out


def test_the_fleet_size_defaults_to_fleet_workers(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN fleet_workers=1000 given as a setting and no --workers WHEN checked
    status, out, _ = preflight(capsys, RecordedAws("raised"), "-c", "fleet_workers=1000")
    # THEN 1,000 workers are checked, and the leases table (warmed for them) draws no note
    assert status == 0 and "1,000 workers x 0.5 vCPU" in out and "note:" not in out


def test_a_leases_table_warmed_for_fewer_workers_is_noted(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN fleet_workers=100 (a new table's throughput suffices) and --workers 1000
    _, out, _ = preflight(capsys, RecordedAws("raised"), "-c", "fleet_workers=100", "--workers", "1000")
    # THEN a note says the table is short of what 1,000 workers need and which setting warms it
    assert "note: the leases table is not pre-warmed (a new table's 4,000 / 12,000); 1,000 workers need 6,000 / " \
           "14,000 for a 2x margin (infra/fleet_size.py): set fleet_workers=1000 in cdk.json" in out
    # AND 100 workers on a new table draw no note
    _, out, _ = preflight(capsys, RecordedAws("raised"), "--workers", "100")
    assert "note:" not in out


def test_no_fleet_size_is_refused_naming_both_ways_to_give_one(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN neither --workers nor fleet_workers WHEN preflight runs THEN one line says how to give the fleet size
    status, _, errors = preflight(capsys, RecordedAws("raised"))
    assert status == 2 and errors == ["error: no fleet size: give --workers N, or set fleet_workers in cdk.json (the "
                                      "worker slots the deployment is sized for)"]


def test_a_quota_that_cannot_be_read_is_refused_with_the_apis_error(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an account whose Lambda settings cannot be read (no permission)
    denied = {"GetAccountSettings": {"": {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}}}
    aws = RecordedAws("raised", overrides={"lambda": RecordedClient("lambda", denied)})
    # WHEN checked
    status, out, errors = preflight(capsys, aws, "--workers", "100")
    # THEN that row is not read, the run is refused, and the line names the error and what to check
    assert status == 2 and "NOT READ" in out
    assert errors == ["error: Lambda concurrent executions: not read (AccessDeniedException: not authorized); check "
                      "it by hand, then raise the quota (Service Quotas lambda L-B99A9384) or lower ingest_shards / "
                      "router_parallelism"]


def test_whole_mode_names_the_whole_swap(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN swap_mode=whole WHEN the new account is checked THEN the Fargate peak is named for whole swaps
    _, _, errors = preflight(capsys, RecordedAws("new"), "--workers", "100", "-c", "swap_mode=whole")
    assert any("50 vCPU (100 during a whole swap or a code rollout)" in line for line in errors)
