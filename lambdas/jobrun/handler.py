"""The streaming job run of EMR Serverless as a CloudFormation custom resource: one run at a time on its checkpoint.

Entry point ``lambdas/jobrun/handler.py:on_event``, the ``onEvent`` handler of a CDK provider framework
(``infra/job_run.py``) behind ``Custom::EmrServerlessStreamingJobRun``. Resource properties (CloudFormation hands
every property over as a string):

* ``StartJobRun``: the ``StartJobRun`` request as JSON (``applicationId``, ``name``, ``mode=STREAMING``, the job
  driver with ``--checkpoint``, ...);
* ``ShutdownGracePeriodSeconds``: the grace period of the ``CancelJobRun`` of the run it replaces;
* ``StopTimeoutSeconds``: how long to wait for that run to end.

What it does:

* **Create / Update**: cancel every run of the application with the request's ``name`` that has not ended (the
  run a previous deploy started; a stray one started by hand), wait until each has ended, then ``StartJobRun``.
  The checkpoint location depends on the query's shape only, not on the job's code (``infra/aggregation.py``), so
  the new run finds its predecessor's offsets and open windows and resumes from them: a code change no longer
  starts a run mid-window on an empty checkpoint. Never two runs at once on one checkpoint: both would read the
  stream and commit offsets and window state under it ("Each query must have a different checkpoint location",
  https://docs.databricks.com/structured-streaming/checkpoints.html). The run ends gracefully within the grace
  period ("EMR Serverless job run cancellation with grace period",
  https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/job-cancellation-grace-period.html: 15 to 1800 s,
  EMR 7.9.0 and later); a micro-batch cut short is replayed by the next run from the offset log, and its snapshot
  writes are idempotent. EMR Serverless resumes a streaming job from its checkpoint the same way when it retries a
  failed run ("Job resiliency", https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-resiliency.html).
  The CloudFormation request id is the run's ``clientToken``, so a retried request starts no second run.
* **Delete**: ``CancelJobRun`` of this resource's run (its physical id) without waiting; one already ended or
  unknown is fine. After an update CloudFormation deletes the replaced physical resource: the previous run, which
  the update already cancelled. Never the runs by name: that would cancel the run the update just started.

Returns ``PhysicalResourceId`` = the job run id and ``Data.JobRunId``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from lambdas.runtime.errors import LambdaError

#: Job run states after which a run holds no resource and writes nothing (``JobRunState`` of the EMR Serverless API).
ENDED = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
#: Errors of a ``CancelJobRun`` of a run that is already ending, has ended or does not exist.
GONE = frozenset({"ResourceNotFoundException", "ValidationException", "ConflictException"})
POLL_S = 5.0


class JobRunError(LambdaError, RuntimeError):
    """A run did not end in time, or the request is malformed; the message names the run or the property."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The custom resource's properties, decoded."""

    request: dict[str, Any]
    grace_s: int
    stop_timeout_s: float

    @property
    def application_id(self) -> str:
        return str(self.request["applicationId"])

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> Settings:
        """Decode the properties; raise :class:`JobRunError` naming the bad one."""
        try:
            request = json.loads(props["StartJobRun"])
        except (KeyError, TypeError, ValueError) as exc:
            raise JobRunError(f"property StartJobRun must be the StartJobRun request as JSON, got "
                              f"{props.get('StartJobRun')!r} ({exc})") from None
        if not isinstance(request, dict) or not request.get("applicationId") or not request.get("name"):
            raise JobRunError(f"StartJobRun needs an applicationId and a name, got {request!r}")
        return cls(request, _number(props, "ShutdownGracePeriodSeconds", 120), _number(props, "StopTimeoutSeconds", 600))


def _number(props: dict[str, Any], name: str, default: int) -> int:
    raw = props.get(name, default)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise JobRunError(f"property {name} must be a whole number of seconds, got {raw!r}") from None


def on_event(event: dict[str, Any], context: Any = None, *, client: Any = None,
             sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The provider framework's ``onEvent``: see the module docstring."""
    settings = Settings.from_properties(dict(event.get("ResourceProperties", {})))
    client = client or _client()
    if event["RequestType"] == "Delete":
        cancel(client, settings.application_id, str(event.get("PhysicalResourceId", "")), settings.grace_s)
        return {"PhysicalResourceId": event.get("PhysicalResourceId")}
    stop_runs(client, settings, sleep=sleep, clock=clock)
    run_id = str(client.start_job_run(**settings.request, clientToken=event["RequestId"])["jobRunId"])
    print(f"started job run {run_id} of {settings.request['name']!r} on application {settings.application_id}")
    return {"PhysicalResourceId": run_id, "Data": {"JobRunId": run_id}}


def _client() -> Any:
    import boto3  # the Lambda runtime's

    return boto3.client("emr-serverless")


def active_runs(client: Any, application_id: str, name: str) -> Iterator[dict[str, Any]]:
    """The runs of ``application_id`` named ``name`` that have not ended (``ListJobRuns`` summaries)."""
    kwargs: dict[str, Any] = {"applicationId": application_id}
    while True:
        page = client.list_job_runs(**kwargs)
        yield from (r for r in page.get("jobRuns", []) if r.get("name") == name and r.get("state") not in ENDED)
        if not page.get("nextToken"):
            return
        kwargs["nextToken"] = page["nextToken"]


def stop_runs(client: Any, settings: Settings, *, sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Cancel every active run of the request's name and wait until each has ended; return their ids.

    Raises
    ------
    JobRunError
        Naming the run and its state, when one has not ended within ``settings.stop_timeout_s``.
    """
    runs = [str(r["id"]) for r in active_runs(client, settings.application_id, str(settings.request["name"]))]
    for run_id in runs:
        cancel(client, settings.application_id, run_id, settings.grace_s)
    deadline = clock() + settings.stop_timeout_s
    for run_id in runs:
        while (state := _state(client, settings.application_id, run_id)) not in ENDED:
            if clock() >= deadline:
                raise JobRunError(f"job run {run_id} of application {settings.application_id} is still {state} "
                                  f"{settings.stop_timeout_s:g} s after its cancel: not starting a second run on "
                                  f"its checkpoint")
            sleep(POLL_S)
        print(f"job run {run_id} ended ({state}): its successor resumes from the checkpoint")
    return runs


def cancel(client: Any, application_id: str, run_id: str, grace_s: int) -> None:
    """``CancelJobRun`` with a grace period; a run already ending, ended or unknown is left as it is."""
    if not run_id:
        return
    try:
        client.cancel_job_run(applicationId=application_id, jobRunId=run_id, shutdownGracePeriodInSeconds=grace_s)
    except Exception as exc:  # botocore's ClientError: only "already gone" is fine
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        if code not in GONE:
            raise
        print(f"job run {run_id}: not cancelled ({code}: {exc})")


def _state(client: Any, application_id: str, run_id: str) -> str:
    return str(client.get_job_run(applicationId=application_id, jobRunId=run_id)["jobRun"]["state"])
