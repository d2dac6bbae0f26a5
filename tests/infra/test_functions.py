"""infra.functions: every project Lambda runs Python 3.14 on arm64 with the dependency layer and its own log group."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

HANDLERS = {
    "lambdas.partitioner.handler.handler",
    "lambdas.router.handler.handler",
    "lambdas.deploy.deployer.handler",
    "lambdas.deploy.hooks.handler",
}


def test_four_functions_with_the_contract_handlers(emr: Any) -> None:
    # GIVEN the project's functions WHEN listed
    functions = [f["Properties"] for f in emr.resources("AWS::Lambda::Function").values() if f["Properties"]["Handler"].startswith("lambdas.")]
    # THEN exactly the four entry points, on python3.14/arm64, traced, with the layer and a log group
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
