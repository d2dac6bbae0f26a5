"""The streaming job run's custom resource (lambdas/jobrun/handler.py): a replacement run starts only after the run it
replaces has ended, so the two never share the checkpoint the new one resumes from."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from lambdas.jobrun.handler import JobRunError, on_event

APP = "00fabc123def"
NAME = "georebal-aggregation"
REQUEST = {
    "applicationId": APP, "executionRoleArn": "arn:aws:iam::123456789012:role/job", "name": NAME,
    "mode": "STREAMING", "retryPolicy": {"maxFailedAttemptsPerHour": 5},
    "jobDriver": {"sparkSubmit": {"entryPoint": "s3://assets/emr_entry.py",
                                  "entryPointArguments": ["--checkpoint", "s3://ckpt/emr/b15fc88cd2ff/ingest/",
                                                          "--starting-position", "LATEST"],
                                  "sparkSubmitParameters": "--conf spark.submit.pyFiles=s3://assets/code.zip"}},
    "configurationOverrides": {"monitoringConfiguration": {
        "cloudWatchLoggingConfiguration": {"enabled": True, "logGroupName": "job-logs"}}},
}


def _event(kind: str, physical: str | None = None, **props: str) -> dict[str, Any]:
    properties = {"StartJobRun": json.dumps(REQUEST), "ShutdownGracePeriodSeconds": "120",
                  "StopTimeoutSeconds": "600", **props}
    event = {"RequestType": kind, "RequestId": "5f0c1e2a-1111-4222-8333-944455556666", "ResourceProperties": properties}
    return event if physical is None else {**event, "PhysicalResourceId": physical}


class FakeEmr:
    """EMR Serverless job runs in memory: a cancelled run is CANCELLING for ``ending_polls`` reads, then CANCELLED."""

    def __init__(self, runs: dict[str, tuple[str, str]], ending_polls: int = 2) -> None:
        self.runs = {run_id: {"id": run_id, "name": name, "state": state} for run_id, (name, state) in runs.items()}
        self.ending_polls = ending_polls
        self.calls: list[tuple[str, Any]] = []
        self._polls: dict[str, int] = {}

    def list_job_runs(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("list", kw.get("nextToken")))
        runs = list(self.runs.values())
        return {"jobRuns": runs[:1], "nextToken": "page-2"} if "nextToken" not in kw else {"jobRuns": runs[1:]}

    def cancel_job_run(self, *, applicationId: str, jobRunId: str, shutdownGracePeriodInSeconds: int) -> dict[str, Any]:
        self.calls.append(("cancel", (jobRunId, shutdownGracePeriodInSeconds)))
        if jobRunId not in self.runs:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no such run"}}, "CancelJobRun")
        self.runs[jobRunId]["state"] = "CANCELLING"
        return {"applicationId": applicationId, "jobRunId": jobRunId}

    def get_job_run(self, *, applicationId: str, jobRunId: str) -> dict[str, Any]:
        self.calls.append(("get", jobRunId))
        run = self.runs[jobRunId]
        if run["state"] == "CANCELLING":
            self._polls[jobRunId] = self._polls.get(jobRunId, 0) + 1
            if self._polls[jobRunId] > self.ending_polls:
                run["state"] = "CANCELLED"
        return {"jobRun": dict(run)}

    def start_job_run(self, **request: Any) -> dict[str, Any]:
        self.calls.append(("start", request))
        run_id = f"run{len(self.runs) + 1}"
        self.runs[run_id] = {"id": run_id, "name": request["name"], "state": "SUBMITTED"}
        return {"applicationId": APP, "jobRunId": run_id, "arn": f"arn:{run_id}"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_an_update_cancels_the_running_run_waits_until_it_ended_then_starts_its_successor() -> None:
    # GIVEN the run a previous deploy started, another application's job and a run of this name that already ended
    emr = FakeEmr({"run1": (NAME, "RUNNING"), "run2": ("other-job", "RUNNING"), "run3": (NAME, "FAILED")})
    clock = Clock()
    # WHEN the job's code changed and CloudFormation updates the resource
    out = on_event(_event("Update", physical="run1"), client=emr, sleep=clock.sleep, clock=clock)
    # THEN the running run is cancelled with a grace period, polled until it ended, and only then the new run starts
    kinds = [c[0] for c in emr.calls]
    assert kinds == ["list", "list", "cancel", "get", "get", "get", "start"]
    assert emr.calls[2] == ("cancel", ("run1", 120)) and emr.runs["run1"]["state"] == "CANCELLED"
    # AND the other job and the ended run are left alone; the request goes out as given, the request id its token
    assert emr.runs["run2"]["state"] == "RUNNING"
    start = emr.calls[-1][1]
    assert start == {**REQUEST, "clientToken": "5f0c1e2a-1111-4222-8333-944455556666"}
    # AND the new run is the resource's physical id (CloudFormation's clean-up then deletes run1: already cancelled)
    assert out == {"PhysicalResourceId": "run4", "Data": {"JobRunId": "run4"}}


def test_a_run_that_does_not_end_in_time_starts_no_second_run_on_its_checkpoint() -> None:
    # GIVEN a running run that stays CANCELLING longer than the stop timeout
    emr = FakeEmr({"run1": (NAME, "RUNNING")}, ending_polls=10_000)
    clock = Clock()
    # WHEN the resource is updated THEN the update fails naming the run and its state, and nothing was started
    with pytest.raises(JobRunError, match=r"job run run1 of application 00fabc123def is still CANCELLING 600 s after"):
        on_event(_event("Update", physical="run1"), client=emr, sleep=clock.sleep, clock=clock)
    assert "start" not in [c[0] for c in emr.calls] and clock.now >= 600


def test_a_create_cancels_a_stray_run_of_the_same_name_first() -> None:
    # GIVEN a run of the job's name the stack does not know (the previous resource's, or one started by hand)
    emr = FakeEmr({"run1": (NAME, "SCHEDULED")}, ending_polls=0)
    clock = Clock()
    # WHEN the resource is created THEN that run is cancelled and has ended before the new run starts
    out = on_event(_event("Create"), client=emr, sleep=clock.sleep, clock=clock)
    assert [c[0] for c in emr.calls] == ["list", "list", "cancel", "get", "start"]
    assert out["PhysicalResourceId"] == "run2"


def test_a_delete_cancels_only_its_own_run_and_a_gone_run_is_fine() -> None:
    # GIVEN the run this resource started and the run a later update started (the same name)
    emr = FakeEmr({"run1": (NAME, "RUNNING"), "run2": (NAME, "RUNNING")})
    # WHEN CloudFormation deletes the replaced resource (physical id run1), then one whose run is gone
    on_event(_event("Delete", physical="run1"), client=emr)
    on_event(_event("Delete", physical="run9"), client=emr)
    # THEN run1 is cancelled without waiting, run2 (the successor) keeps running, and the unknown run is no error
    assert emr.calls == [("cancel", ("run1", 120)), ("cancel", ("run9", 120))]
    assert (emr.runs["run1"]["state"], emr.runs["run2"]["state"]) == ("CANCELLING", "RUNNING")


def test_bad_properties_are_named() -> None:
    # GIVEN / WHEN / THEN a request that is not JSON, one without a name, a grace period that is not a number
    with pytest.raises(JobRunError, match=r"property StartJobRun must be the StartJobRun request as JSON, got '\{oops'"):
        on_event(_event("Create", StartJobRun="{oops"), client=FakeEmr({}))
    with pytest.raises(JobRunError, match="needs an applicationId and a name"):
        on_event(_event("Create", StartJobRun=json.dumps({"applicationId": APP})), client=FakeEmr({}))
    with pytest.raises(JobRunError, match="ShutdownGracePeriodSeconds must be a whole number of seconds, got '2m'"):
        on_event(_event("Create", ShutdownGracePeriodSeconds="2m"), client=FakeEmr({}))


def test_the_calls_match_the_emr_serverless_api() -> None:
    # GIVEN a real boto3 client whose calls are checked against the EMR Serverless API model (botocore's Stubber)
    client = boto3.client("emr-serverless", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    stub = Stubber(client)
    summary = {"applicationId": APP, "id": "run1", "name": NAME, "arn": f"arn:aws:emr-serverless:us-east-1:123456789012:/applications/{APP}/jobruns/run1",
               "createdBy": "arn:aws:iam::123456789012:role/deployer", "createdAt": "2026-01-01T00:00:00Z",
               "updatedAt": "2026-01-01T00:00:00Z", "executionRole": REQUEST["executionRoleArn"], "state": "RUNNING",
               "stateDetails": "running", "releaseLabel": "emr-spark-8.0.0", "type": "SPARK"}
    stub.add_response("list_job_runs", {"jobRuns": [summary]}, {"applicationId": APP})
    stub.add_response("cancel_job_run", {"applicationId": APP, "jobRunId": "run1"},
                      {"applicationId": APP, "jobRunId": "run1", "shutdownGracePeriodInSeconds": 120})
    ended = {k: v for k, v in summary.items() if k not in ("id", "type")} | {"jobRunId": "run1", "state": "CANCELLED",
                                                                           "jobDriver": REQUEST["jobDriver"]}
    stub.add_response("get_job_run", {"jobRun": ended}, {"applicationId": APP, "jobRunId": "run1"})
    stub.add_response("start_job_run", {"applicationId": APP, "jobRunId": "run2", "arn": summary["arn"][:-1] + "2"},
                      {**REQUEST, "clientToken": "5f0c1e2a-1111-4222-8333-944455556666"})
    # WHEN the resource is updated THEN every call and every parameter is one the API has
    with stub:
        out = on_event(_event("Update", physical="run1"), client=client, sleep=lambda s: None)
    stub.assert_no_pending_responses()
    assert out["PhysicalResourceId"] == "run2"
