"""infra.functions: every project Lambda runs Python 3.14 on arm64 with the dependency layer and its own log group."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from lambdas.runtime.clients import REPORT_MARGIN_S, TOTAL_ATTEMPTS, client_limits

HANDLERS = {
    "lambdas.partitioner.handler.handler",
    "lambdas.router.handler.handler",
    "lambdas.deploy.deployer.handler",
    "lambdas.deploy.hooks.handler",
    "lambdas.jobrun.handler.on_event",  # engine=emr: the streaming job run's custom resource
    "lambdas.teardown.handler.handler",  # the geo streams' teardown on stack deletion
}


def test_six_functions_with_the_project_handlers(emr: Any) -> None:
    # GIVEN the project's functions WHEN listed
    functions = [f["Properties"] for f in emr.resources("AWS::Lambda::Function").values() if f["Properties"]["Handler"].startswith("lambdas.")]
    # THEN exactly the six entry points (the four of the contract, the streaming job run's custom resource and the
    # geo-stream teardown), on python3.14/arm64, traced, with the layer and a log group
    assert {f["Handler"] for f in functions} == HANDLERS
    for props in functions:
        assert props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert len(props["Layers"]) == 1
        assert "LogGroup" in props["LoggingConfig"]


def test_layer_is_built_for_the_function_runtime(emr: Any) -> None:
    # GIVEN the dependency layer THEN it targets the same runtime and architecture
    emr.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.14"], "CompatibleArchitectures": ["arm64"], "Description": Match.string_like_regexp("numpy, scipy")},
    )


def test_log_groups_have_the_configured_retention(emr: Any) -> None:
    # GIVEN log_retention_days=30 THEN every project log group keeps 30 days (AWS679... is CDK's own provider)
    groups = [g["Properties"] for k, g in emr.resources("AWS::Logs::LogGroup").items() if not k.startswith("AWS679")]
    assert groups and all(g.get("RetentionInDays") == 30 for g in groups)


def test_s3_triggered_functions_keep_failed_events_in_an_alarmed_dead_letter_queue(emr: Any) -> None:
    # GIVEN the functions S3 invokes asynchronously (partitioner, deployer)
    functions = emr.resources("AWS::Lambda::Function")
    queues = emr.resources("AWS::SQS::Queue")
    alarms = [a["Properties"] for a in emr.resources("AWS::CloudWatch::Alarm").values()]
    for handler in ("lambdas.partitioner.handler.handler", "lambdas.deploy.deployer.handler"):
        (fn,) = [f["Properties"] for f in functions.values() if f["Properties"].get("Handler") == handler]
        # THEN each has a dead-letter queue, KMS-encrypted
        queue_id = fn["DeadLetterConfig"]["TargetArn"]["Fn::GetAtt"][0]
        assert "KmsMasterKeyId" in queues[queue_id]["Properties"], handler
        # AND an alarm fires on any message in it
        assert any(a["MetricName"] == "ApproximateNumberOfMessagesVisible" and a["Threshold"] == 0
                   and a["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
                   for a in alarms), handler


def test_checkov_skips_carry_a_reason_and_only_dlq_less_functions_skip_the_dlq_check(emr: Any) -> None:
    # GIVEN the checkov acknowledgments in the resources' metadata
    for logical_id, fn in emr.resources("AWS::Lambda::Function").items():
        skips = {s["id"]: s["comment"] for s in fn["Metadata"]["checkov"]["skip"]}
        # THEN every skip has a reason, and CKV_AWS_116 (DLQ) is skipped only where there is no DLQ
        assert all(len(c) > 40 for c in skips.values()), logical_id
        assert ("CKV_AWS_116" in skips) == ("DeadLetterConfig" not in fn["Properties"]), logical_id
    for logical_id, group in emr.resources("AWS::Logs::LogGroup").items():
        assert [s["id"] for s in group["Metadata"]["checkov"]["skip"]] == ["CKV_AWS_158"], logical_id


def test_every_functions_aws_calls_end_before_the_function_does(emr: Any) -> None:
    # GIVEN each project function: its timeout, and what the stack tells it the timeout is
    functions = [f["Properties"] for f in emr.resources("AWS::Lambda::Function").values()
                 if f["Properties"]["Handler"].startswith("lambdas.")]
    assert functions
    for props in functions:
        timeout = props["Timeout"]
        assert props["Environment"]["Variables"]["FUNCTION_TIMEOUT_S"] == str(timeout), props["Handler"]
        # WHEN its clients' limits are derived from it (lambdas/runtime/clients.py; the router's puts: one attempt)
        for attempts in (TOTAL_ATTEMPTS, 1):
            limits = client_limits(float(timeout), attempts)
            # THEN one call's worst case (connect + read timeouts x attempts + the longest backoffs) ends with the
            # reporting margin still left before Lambda stops the invocation
            assert limits.worst_case_s() + REPORT_MARGIN_S <= timeout, (props["Handler"], timeout, limits)
            assert limits.worst_case_s() < timeout
