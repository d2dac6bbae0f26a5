"""geokernel.aws_budget.levels: the level quotas, what a fleet needs of each, and the 2x-margin verdicts (offline)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from geokernel.aws_budget.levels import (
    LEVEL_BY_KEY,
    LEVELS,
    Fleet,
    Have,
    LevelQuota,
    LevelUnit,
    Verdict,
    needs,
    number,
    verdicts,
)
from geokernel.aws_budget.quotas import BudgetError

# the cdk.json defaults at 1,000 workers: 0.5 vCPU, one shard each, on-demand ingest, EMR with 16 vCPU, a new VPC
DEFAULT = Fleet(workers=1000, worker_cpu=512, shards_per_worker=1, swap_mode="carry", max_load=10000, window_s=300,
                ingest_shards=0, router_parallelism=1, engine="emr", emr_max_vcpu=16, glue_workers=2, creates_vpc=True,
                nat_gateways=2)


def test_every_level_quota_cites_its_aws_page_and_names_its_code_where_there_is_one() -> None:
    # GIVEN the level quota table WHEN its rows are read
    keys = [q.key for q in LEVELS]
    # THEN keys are unique, every row cites an AWS documentation page and a positive default
    assert len(keys) == len(set(keys))
    assert all(q.source.startswith("https://docs.aws.amazon.com/") and q.default > 0 for q in LEVELS)
    # AND the quotas this brief names are there with their Service Quotas codes
    assert (LEVEL_BY_KEY["fargate.on_demand_vcpu"].service_code, LEVEL_BY_KEY["fargate.on_demand_vcpu"].quota_code) \
        == ("fargate", "L-3032A538")
    assert LEVEL_BY_KEY["lambda.concurrent_executions"].quota_code == "L-B99A9384"
    assert LEVEL_BY_KEY["vpc.network_interfaces"].quota_code == "L-DF5E4CA3"
    assert LEVEL_BY_KEY["emr_serverless.max_vcpu"].quota_code == "L-D05C8A75"
    # AND the launch rate per service (not adjustable) has no code and says so
    assert LEVEL_BY_KEY["ecs.fargate_launches_per_service"].remedy == "not adjustable: lower --workers (fleet_workers)"


@pytest.mark.parametrize(("change", "message"), [
    ({"default": 0}, r"'x': default must be positive, got 0"),
    ({"source": "docs.aws"}, r"'x': source must be an https URL, got 'docs.aws'"),
    ({"quota_code": "3032A538"}, r"'x': quota_code must look like 'L-3032A538', got '3032A538'"),
    ({"quota_code": None}, r"'x': service_code and quota_code go together, got 'fargate' and None"),
])
def test_a_malformed_level_quota_names_the_bad_value(change: dict[str, object], message: str) -> None:
    # GIVEN a well-formed row WHEN one field is broken THEN the error names the row and the value
    row = dict(key="x", title="X", unit=LevelUnit.VCPU, default=1.0, source="https://docs.aws.amazon.com/x",
               service_code="fargate", quota_code="L-3032A538")
    with pytest.raises(BudgetError, match=message):
        LevelQuota(**{**row, **change})  # type: ignore[arg-type]


def test_a_default_fleet_of_1000_needs_two_fleets_worth_at_its_peak() -> None:
    # GIVEN the default settings at 1,000 workers WHEN its needs are computed
    n = needs(DEFAULT)
    # THEN vCPU, interfaces and addresses count both fleets of a code rollout (carry mode: new code is a whole swap)
    assert (n["fargate.on_demand_vcpu"].steady, n["fargate.on_demand_vcpu"].peak) == (500, 1000)
    assert n["fargate.on_demand_vcpu"].peak_when == "during a code rollout"
    assert (n["vpc.network_interfaces"].steady, n["vpc.network_interfaces"].peak) == (1012, 2012)  # +8 Spark, +4 VPC
    assert n["vpc.private_subnet_ips"].peak == 2010  # the NAT gateways sit in the public subnets
    # AND shards count both versions' geo streams plus the on-demand ingest estimate: 33,333 events/s -> 2 x 34
    assert (n["kinesis.shards"].steady, n["kinesis.shards"].peak) == (1068, 2068)
    # AND the router takes one execution per ingest shard, plus 5 of the control functions
    assert n["lambda.concurrent_executions"].peak == 73
    # AND the fleet start within the 900 s green timeout asks 67 launches a minute of the service
    assert n["ecs.fargate_launches_per_service"].peak == 67
    # AND the EMR engine's row is there, Glue's are not
    assert "emr_serverless.max_vcpu" in n and "glue.task_dpus" not in n and n["emr_serverless.max_vcpu"].peak == 16


def test_glue_a_provisioned_ingest_and_a_given_vpc_change_the_needs() -> None:
    # GIVEN engine=glue with 4 workers, a provisioned ingest stream of 10 shards at parallelism 2, an existing VPC
    fleet = dataclasses.replace(DEFAULT, engine="glue", glue_workers=4, ingest_shards=10, router_parallelism=2,
                                creates_vpc=False, swap_mode="whole", workers=100)
    # WHEN its needs are computed
    n = needs(fleet)
    # THEN Glue's rows replace EMR's (an update's new run overlaps the old one) and Glue holds no interface
    assert "emr_serverless.max_vcpu" not in n and (n["glue.task_dpus"].peak, n["glue.concurrent_job_runs"].peak) == (8, 2)
    assert n["vpc.network_interfaces"].peak == 200 and n["vpc.private_subnet_ips"].peak == 200
    # AND the ingest is the 10 provisioned shards: no on-demand stream, 10 x 2 router executions
    assert n["kinesis.shards"].peak == 210 and n["kinesis.on_demand_streams"].peak == 0
    assert n["lambda.concurrent_executions"].peak == 25
    # AND in whole mode every spec swap doubles the fleet
    assert n["fargate.on_demand_vcpu"].peak_when == "during a whole swap or a code rollout"


def test_a_small_on_demand_ingest_keeps_the_four_shards_a_new_stream_starts_with() -> None:
    # GIVEN 10 workers (333 events/s) WHEN the on-demand ingest is estimated THEN it is the 4 starting shards
    assert dataclasses.replace(DEFAULT, workers=10).ingest == 4


@pytest.mark.parametrize(("available", "fits"), [(2000, True), (1999, False), (math.inf, True)])
def test_a_fleet_fits_when_the_quota_is_twice_its_peak(available: float, fits: bool) -> None:
    # GIVEN the 1,000-worker fleet's vCPU peak of 1,000 WHEN held against an account value
    verdict = verdicts(DEFAULT, {"fargate.on_demand_vcpu": Have(available, "applied")})[0]
    # THEN it fits at twice the peak and not below
    assert verdict.fits is fits and verdict.margin == pytest.approx(available / 1000)


def test_what_the_account_already_uses_is_not_available() -> None:
    # GIVEN 4,500 shards of which 500 are open WHEN held against the fleet's 2,068
    verdict = Verdict(LEVEL_BY_KEY["kinesis.shards"], needs(DEFAULT)["kinesis.shards"], Have(4500, "applied", used=500))
    # THEN 4,000 are available: 1.93x, short of the margin, and the line says what is in use
    assert verdict.available == 4000 and not verdict.fits
    assert "of 4,000 left (4,500 applied, 500 in use)" in verdict.refusal()


def test_the_refusal_names_the_quota_the_need_and_the_settings_to_change() -> None:
    # GIVEN a new account's 6 Fargate vCPU WHEN the default fleet at 1,000 workers is held against it
    verdict = verdicts(DEFAULT, {"fargate.on_demand_vcpu": Have(6, "applied")})[0]
    # THEN one line names the quota, the need and its peak, the margin, the account's value, the code and the settings
    assert verdict.refusal() == (
        "Fargate On-Demand vCPU: the fleet needs 500 vCPU (1,000 during a code rollout), 2,000 with the 2x margin, "
        "of 6 applied: raise the quota (Service Quotas fargate L-3032A538) or lower --workers (fleet_workers) / "
        "worker_cpu")


def test_a_quota_not_read_does_not_fit_and_says_why() -> None:
    # GIVEN no value for a quota (denied) and none at all for the others WHEN the verdicts are made
    got = verdicts(DEFAULT, {"lambda.concurrent_executions": Have(None, "", error="AccessDeniedException: no")})
    by_key = {v.quota.key: v for v in got}
    # THEN none fits, and the line says why and what to check
    assert not any(v.fits for v in got) and by_key["kinesis.shards"].margin is None
    assert by_key["lambda.concurrent_executions"].refusal().startswith(
        "Lambda concurrent executions: not read (AccessDeniedException: no); check it by hand, then raise the quota")


def test_no_need_always_fits() -> None:
    # GIVEN a provisioned ingest stream (no on-demand stream) WHEN held against an account with none left
    fleet = dataclasses.replace(DEFAULT, ingest_shards=8)
    verdict = {v.quota.key: v for v in verdicts(fleet, {"kinesis.on_demand_streams": Have(50, "applied", used=50)})}
    # THEN it fits whatever is left
    assert verdict["kinesis.on_demand_streams"].fits and verdict["kinesis.on_demand_streams"].margin == math.inf


@pytest.mark.parametrize(("change", "message"), [
    ({"workers": 0}, r"workers must be at least 1, got 0"),
    ({"swap_mode": "blue"}, r"swap_mode must be one of \['carry', 'whole'\], got 'blue'"),
    ({"engine": "spark"}, r"engine must be 'emr' or 'glue', got 'spark'"),
    ({"max_load": 0.0}, r"max_load and green_timeout_s must be positive, got 0.0 and 900.0"),
])
def test_a_malformed_fleet_names_the_bad_value(change: dict[str, object], message: str) -> None:
    with pytest.raises(BudgetError, match=message):
        dataclasses.replace(DEFAULT, **change)  # type: ignore[arg-type]


def test_numbers_read_like_the_docs() -> None:
    # GIVEN whole and fractional amounts WHEN printed THEN thousands are grouped and fractions kept
    assert (number(4136), number(12.5), number(1_000_000.0), number(0.25)) == ("4,136", "12.5", "1,000,000", "0.25")
