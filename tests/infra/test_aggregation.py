"""infra.aggregation: the engine switch (emr | glue), the EMR Serverless application + job start, the Glue job."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from infra import assets
from infra.aggregation import EmrServerlessAggregation, GlueStreamingAggregation, JobInputs, job_settings
from infra.config import load_config
from infra.functions import LambdaKit


def _job_run_call(synth: Any, resource_type: str, phase: str) -> dict[str, Any]:
    (resource,) = synth.resources(resource_type).values()
    call = resource["Properties"][phase]
    if isinstance(call, str):  # no token in it
        return dict(json.loads(call))
    parts = call["Fn::Join"][1]
    # Tokens (Refs, GetAtts) become placeholders; the rest is the SDK call as JSON.
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))


def test_emr_variant_has_an_emr_serverless_application_and_no_glue_job(emr: Any) -> None:
    # GIVEN engine=emr (default) WHEN synthesized
    # THEN an EMR Serverless Spark application on release emr-spark-8.0.0 in the private subnets
    emr.template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "Name": "georebal-aggregation",
            "ReleaseLabel": "emr-spark-8.0.0",
            "Type": "SPARK",
            "AutoStartConfiguration": {"Enabled": True},
            "MaximumCapacity": {"Cpu": "16 vCPU", "Memory": "64 GB"},
            "NetworkConfiguration": {"SubnetIds": Match.any_value(), "SecurityGroupIds": Match.any_value()},
        },
    )
    emr.template.resource_count_is("AWS::Glue::Job", 0)
    emr.template.has_resource_properties(
        "AWS::IAM::Role",
        {"AssumeRolePolicyDocument": {"Statement": [Match.object_like({"Principal": {"Service": "emr-serverless.amazonaws.com"}})]}},
    )


def _start_request(template: Template) -> dict[str, Any]:
    """The StartJobRun request the EMR job-run resource is given (tokens as ``<{...}>`` placeholders)."""
    (resource,) = template.find_resources("Custom::EmrServerlessStreamingJobRun").values()
    raw = resource["Properties"]["StartJobRun"]
    parts = raw["Fn::Join"][1] if isinstance(raw, dict) else [raw]
    return dict(json.loads("".join(p if isinstance(p, str) else f"<{json.dumps(p, sort_keys=True)}>".replace('"', "'")
                                   for p in parts)))


def _argument(request: dict[str, Any], flag: str) -> str:
    args = request["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    return str(args[args.index(flag) + 1])


def test_emr_streaming_job_is_started_with_the_entry_point_and_arguments(emr: Any) -> None:
    # GIVEN the job-run custom resource
    (resource,) = emr.resources("Custom::EmrServerlessStreamingJobRun").values()
    request = _start_request(emr.template)
    # THEN it asks for a STREAMING run of emr_entry.py with the code zip, the Kinesis connector and the arguments
    assert (request["mode"], request["name"]) == ("STREAMING", "georebal-aggregation")
    driver = request["jobDriver"]["sparkSubmit"]
    assert "s3://cdk-hnb659fds-assets-" in driver["entryPoint"] and driver["entryPoint"].endswith(".py'}>")
    args = driver["entryPointArguments"]
    for flag in ("--stream-name", "--region", "--snapshots", "--checkpoint", "--quarantine", "--costs", "--grid-zoom", "--zoom", "--window", "--watermark"):
        assert flag in args
    assert args[args.index("--grid-zoom") + 1] == "12" and args[args.index("--window") + 1] == "300s"
    assert _argument(request, "--starting-position") == "LATEST"  # a fresh checkpoint only: a replacement resumes
    assert "spark-streaming-sql-kinesis-connector.jar" in driver["sparkSubmitParameters"]
    assert "--conf spark.submit.pyFiles=" in driver["sparkSubmitParameters"]
    # AND the replaced run gets a grace period to stop its query and up to 10 minutes to end before its successor
    # starts (lambdas/jobrun/handler.py: one run at a time on the checkpoint)
    assert (resource["Properties"]["ShutdownGracePeriodSeconds"], resource["Properties"]["StopTimeoutSeconds"]) == (
        "120", "600")
    emr.template.has_resource_properties("AWS::Lambda::Function", {"Handler": "lambdas.jobrun.handler.on_event",
                                                                   "Timeout": 840})


def test_emr_job_run_handler_may_only_touch_this_application_and_pass_the_job_role(emr: Any) -> None:
    # GIVEN the job-run handler's policy
    policies = [p for k, p in emr.resources("AWS::IAM::Policy").items() if k.startswith("AggregationStreamingRunHandler")]
    (policy,) = policies
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    # THEN exactly list/start/cancel/get job runs, a conditioned PassRole, and X-Ray tracing
    assert actions == ["emr-serverless:CancelJobRun", "emr-serverless:GetJobRun", "emr-serverless:ListJobRuns",
                       "emr-serverless:StartJobRun", "iam:PassRole", "xray:PutTelemetryRecords",
                       "xray:PutTraceSegments"]
    (pass_role,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}}
    runs = [s for s in statements if "emr-serverless:CancelJobRun" in s["Action"]]
    assert all("/jobruns/*" in json.dumps(s["Resource"]) for s in runs)


def test_emr_checkpoint_stays_across_code_changes_and_moves_with_the_query_shape(emr: Any) -> None:
    # GIVEN the synthesized stack's EMR job settings, and the same settings computed for other code
    stack = emr.stack
    config, inputs = stack.config, _inputs(stack.rebalancer)
    checkpoint = _argument(_start_request(emr.template), "--checkpoint")

    def resolved(engine: str = "emr", code_hash: str = "another-build", **changes: Any) -> str:
        settings = job_settings(replace(config, **changes), inputs, engine=engine, code_hash=code_hash)
        return json.dumps(stack.resolve(settings["checkpoint"]), sort_keys=True)

    # WHEN the job's code changes THEN the run's checkpoint stays: the new run resumes from its predecessor's offsets
    assert resolved(code_hash="a") == resolved(code_hash="b") == resolved()
    assert "<" in checkpoint and checkpoint.startswith("s3://") and "/emr/" in checkpoint
    # AND so it does for the settings the checkpoint does not hold (they reach the new run as its arguments)
    assert resolved(grid_zoom=10, refine_events=100, watermark_s=30) == resolved()
    # AND a new query shape (the open windows' zoom or length) gets a location of its own, where it starts fresh
    assert len({resolved(), resolved(zoom=17), resolved(window_s=60)}) == 3
    # AND the location names the stream, so another stream never reads these offsets
    assert json.dumps(stack.resolve(inputs.stream.stream_name)).strip('"') in resolved()
    # AND Glue keeps a run of its own per code and settings (its custom resource starts before the old run stops)
    assert resolved("glue", code_hash="a") != resolved("glue", code_hash="b")


def test_emr_template_keeps_the_checkpoint_when_the_code_changes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the EMR aggregation synthesized twice with different Spark code (the code zip's hash)
    def template(code: str) -> Template:
        monkeypatch.setattr(assets, "_tree_hash", lambda *paths, pattern="*": code)
        app = App(outdir=str(tmp_path / code))
        stack = Stack(app, "S")
        vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
            ec2.SubnetConfiguration(name="jobs", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        inputs = JobInputs(stream=kinesis.Stream(stack, "Ingest"), snapshots=s3.Bucket(stack, "Snapshots"),
                           quarantine=s3.Bucket(stack, "Quarantine"), checkpoints=s3.Bucket(stack, "Checkpoints"),
                           costs=s3.Bucket(stack, "Costs"))
        config = load_config({})
        EmrServerlessAggregation(stack, "Aggregation", config=config, inputs=inputs, subnets=vpc.isolated_subnets,
                                 security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
                                 kit=LambdaKit(stack, "Lambda", config=config))
        return Template.from_stack(stack)

    before, after = _start_request(template("code-v1")), _start_request(template("code-v2"))
    # WHEN the job-run resource's request is compared
    # THEN the new code changes the request (CloudFormation updates the resource: the run is replaced) ...
    assert before["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"] != after["jobDriver"]["sparkSubmit"][
        "sparkSubmitParameters"]
    # ... but not the checkpoint the replacement resumes from
    assert _argument(before, "--checkpoint") == _argument(after, "--checkpoint")


def _inputs(rebalancer: Any) -> JobInputs:
    return JobInputs(stream=rebalancer.ingest_stream, snapshots=rebalancer.storage.snapshots,
                     quarantine=rebalancer.storage.quarantine, checkpoints=rebalancer.storage.checkpoints,
                     costs=rebalancer.storage.costs)


def test_glue_variant_has_a_glue_51_streaming_job_and_no_emr_application(glue: Any) -> None:
    # GIVEN engine=glue WHEN synthesized
    # THEN a Glue 5.1 streaming job runs glue_entry.py with the code zip and the job arguments
    glue.template.has_resource_properties(
        "AWS::Glue::Job",
        {
            "Name": "georebal-aggregation",
            "GlueVersion": "5.1",
            "Command": {"Name": "gluestreaming", "PythonVersion": "3", "ScriptLocation": Match.any_value()},
            "WorkerType": "G.1X",
            "NumberOfWorkers": 2,
            "SecurityConfiguration": {"Ref": Match.string_like_regexp("^AggregationSecurity")},
            "DefaultArguments": Match.object_like(
                {
                    "--stream_arn": Match.any_value(),
                    "--snapshots": Match.any_value(),
                    "--checkpoint": Match.any_value(),
                    "--grid_zoom": "12",
                    "--zoom": "18",
                    "--refine_events": "500",
                    "--window": "300s",
                    "--watermark": "60s",
                    "--extra-py-files": Match.any_value(),
                }
            ),
        },
    )
    glue.template.resource_count_is("AWS::EMRServerless::Application", 0)
    glue.template.resource_count_is("Custom::EmrServerlessStreamingJobRun", 0)
    # AND logs and bookmarks are KMS-encrypted
    glue.template.has_resource_properties(
        "AWS::Glue::SecurityConfiguration",
        {
            "EncryptionConfiguration": {
                "CloudWatchEncryption": {"CloudWatchEncryptionMode": "SSE-KMS", "KmsKeyArn": Match.any_value()},
                "JobBookmarksEncryption": {"JobBookmarksEncryptionMode": "CSE-KMS", "KmsKeyArn": Match.any_value()},
                "S3Encryptions": [{"S3EncryptionMode": "SSE-KMS", "KmsKeyArn": Match.any_value()}],
            }
        },
    )


def test_glue_job_run_is_started_and_stopped_by_a_custom_resource(glue: Any) -> None:
    # GIVEN the Glue job-run custom resource
    start = _job_run_call(glue, "Custom::GlueStreamingJobRun", "Create")
    delete = _job_run_call(glue, "Custom::GlueStreamingJobRun", "Delete")
    # THEN it starts the job (with the per-code checkpoint) and stops that run on delete
    assert (start["action"], start["parameters"]["JobName"]) == ("startJobRun", "georebal-aggregation")
    assert "--checkpoint" in start["parameters"]["Arguments"]
    assert delete["action"] == "batchStopJobRun" and delete["parameters"]["JobRunIds"] == ["PHYSICAL:RESOURCEID:"]


def test_both_engines_read_the_ingest_stream_and_write_snapshots(emr: Any, glue: Any) -> None:
    # GIVEN each engine's job role policy
    for synth in (emr, glue):
        (policy,) = [p for k, p in synth.resources("AWS::IAM::Policy").items() if k.startswith("AggregationJobRoleDefaultPolicy")]
        actions = {a for s in policy["Properties"]["PolicyDocument"]["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        # THEN it can read Kinesis and write S3 objects
        assert {"kinesis:GetRecords", "kinesis:GetShardIterator", "s3:PutObject"} <= actions


def test_a_glue_connector_jar_reads_the_stream_with_the_connector_on_a_checkpoint_of_its_own(tmp_path: Path) -> None:
    # GIVEN engine=glue with glue_kinesis_connector_jar (only the aggregation construct, in a stack of its own)
    def template(**ctx: object) -> Template:
        app = App(outdir=str(tmp_path / str(len(ctx))))
        stack = Stack(app, "S")
        inputs = JobInputs(stream=kinesis.Stream(stack, "Ingest"), snapshots=s3.Bucket(stack, "Snapshots"),
                           quarantine=s3.Bucket(stack, "Quarantine"), checkpoints=s3.Bucket(stack, "Checkpoints"),
                           costs=s3.Bucket(stack, "Costs"))
        GlueStreamingAggregation(stack, "Aggregation", config=load_config({"engine": "glue", **ctx}), inputs=inputs)
        return Template.from_stack(stack)

    jar = "s3://my-jars/kinesis/spark-streaming-sql-kinesis-connector_2.12-1.4.0.jar"
    with_jar, without = template(glue_kinesis_connector_jar=jar), template()
    # WHEN synthesized
    # THEN the job gets the jar on its classpath and tells the entry point to read with it
    with_jar.has_resource_properties("AWS::Glue::Job", {"DefaultArguments": Match.object_like(
        {"--extra-jars": jar, "--kinesis_connector_jar": jar})})
    # AND the job role may read that one object
    statements = [s for p in with_jar.find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    reads = [s for s in statements if "s3:GetObject*" in s["Action"] and "my-jars" in json.dumps(s["Resource"])]
    assert reads and all("kinesis/spark-streaming-sql-kinesis-connector_2.12-1.4.0.jar" in json.dumps(s["Resource"])
                         for s in reads)
    # AND the run key differs from Glue's own reader's (another source's offsets: a checkpoint of its own)
    (job_with,) = with_jar.find_resources("AWS::Glue::Job").values()
    (job_without,) = without.find_resources("AWS::Glue::Job").values()
    checkpoint = json.dumps(job_with["Properties"]["DefaultArguments"]["--checkpoint"])
    assert checkpoint != json.dumps(job_without["Properties"]["DefaultArguments"]["--checkpoint"])
    # AND without the setting neither argument is there
    args = job_without["Properties"]["DefaultArguments"]
    assert "--extra-jars" not in args and "--kinesis_connector_jar" not in args


def _asset_bucket_reads(synth: Any) -> list[str]:
    """The CDK-assets-bucket resources of the job role's statements, as text (``<bucket>/<key>`` or ``<bucket>``)."""
    (policy,) = [p for k, p in synth.resources("AWS::IAM::Policy").items() if k.startswith("AggregationJobRoleDefaultPolicy")]
    out: list[str] = []
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in resources:
            text = json.dumps(resource)
            if "-assets-" in text:
                parts = resource["Fn::Join"][1]
                out.append("".join(p if isinstance(p, str) else "<bucket>" if "Fn::Sub" in p else "" for p in parts))
    return out


def test_the_job_role_reads_only_its_own_objects_of_the_cdk_assets_bucket(emr: Any, glue: Any) -> None:
    # GIVEN each engine's job role WHEN its statements on the account's CDK assets bucket are listed
    for synth in (emr, glue):
        job = synth.stack.rebalancer.aggregation
        reads = _asset_bucket_reads(synth)
        # THEN they name the job's entry script and code zip (bucket-level listing aside), never every object
        objects = {r.split("<bucket>", 1)[1] for r in reads if not r.endswith("<bucket>")}
        assert objects == {f"/{job.entry.s3_object_key}", f"/{job.code.s3_object_key}"}, (job.engine, reads)
        assert not [r for r in reads if r.endswith("/*")], (job.engine, reads)
