"""infra.aggregation: the engine switch (emr | glue), the EMR Serverless application + job start, the Glue job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import App, Stack
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from infra.aggregation import GlueStreamingAggregation, JobInputs
from infra.config import load_config


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


def test_emr_streaming_job_is_started_with_the_entry_point_and_arguments(emr: Any) -> None:
    # GIVEN the job-run custom resource
    start = _job_run_call(emr, "Custom::EmrServerlessStreamingJobRun", "Create")
    update = _job_run_call(emr, "Custom::EmrServerlessStreamingJobRun", "Update")
    delete = _job_run_call(emr, "Custom::EmrServerlessStreamingJobRun", "Delete")
    # THEN create starts a STREAMING run of emr_entry.py with the code zip, the Kinesis connector and the arguments
    assert (start["service"], start["action"]) == ("emr-serverless", "startJobRun")
    params = start["parameters"]
    assert params["mode"] == "STREAMING"
    driver = params["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == "TOKEN"  # the S3 URL of the emr_entry.py asset (checked below)
    (resource,) = emr.resources("Custom::EmrServerlessStreamingJobRun").values()
    entry_urls = [p["Fn::Sub"] for p in resource["Properties"]["Create"]["Fn::Join"][1] if isinstance(p, dict) and "Fn::Sub" in p]
    assert any(url.startswith("s3://cdk-hnb659fds-assets-") and url.endswith(".py") for url in entry_urls)
    args = driver["entryPointArguments"]
    for flag in ("--stream-name", "--region", "--snapshots", "--checkpoint", "--quarantine", "--costs", "--grid-zoom", "--zoom", "--window", "--watermark"):
        assert flag in args
    assert args[args.index("--grid-zoom") + 1] == "12" and args[args.index("--window") + 1] == "300s"
    assert "spark-streaming-sql-kinesis-connector.jar" in driver["sparkSubmitParameters"]
    assert "--conf spark.submit.pyFiles=" in driver["sparkSubmitParameters"]
    # AND a change starts a new run; delete cancels the run this resource started
    assert update["action"] == "startJobRun"
    assert delete["action"] == "cancelJobRun" and delete["parameters"]["jobRunId"] == "PHYSICAL:RESOURCEID:"


def test_emr_job_start_may_only_touch_this_application_and_pass_the_job_role(emr: Any) -> None:
    # GIVEN the custom resource's policy
    policies = [p for k, p in emr.resources("AWS::IAM::Policy").items() if "JobRunCustomResourcePolicy" in k]
    (policy,) = policies
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    # THEN exactly start/cancel/get job runs and a conditioned PassRole
    assert actions == ["emr-serverless:CancelJobRun", "emr-serverless:GetJobRun", "emr-serverless:StartJobRun", "iam:PassRole"]
    (pass_role,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}}


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
        job = synth.stack.aggregation
        reads = _asset_bucket_reads(synth)
        # THEN they name the job's entry script and code zip (bucket-level listing aside), never every object
        objects = {r.split("<bucket>", 1)[1] for r in reads if not r.endswith("<bucket>")}
        assert objects == {f"/{job.entry.s3_object_key}", f"/{job.code.s3_object_key}"}, (job.engine, reads)
        assert not [r for r in reads if r.endswith("/*")], (job.engine, reads)
