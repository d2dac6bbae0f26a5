"""Two deployments in one account and region: two stacks of different prefixes synthesized in ONE app share no metric
(dimension set) in any alarm or dashboard widget, and each says at synth whether its alarms reach anyone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from geokernel.contracts.metric_names import DEPLOYMENT_DIMENSION, NAMESPACE
from infra.config import config_from_node
from infra.stack import GeoRebalancerStack

#: A metric as the alarms and widgets name it: namespace, name and its dimensions (name -> value, a CloudFormation
#: token of the stack written as ``<stack>:<token>``, so two stacks' resources of the same logical id differ).
MetricKey = tuple[str, str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Deployment:
    stack: GeoRebalancerStack
    template: Template


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Iterator[dict[str, Deployment]]:
    """Deployments "alpha" (with an alarm e-mail) and "beta" (without) as two stacks of one app."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("cdk-two")))
    base = config_from_node(app.node)
    stacks = {prefix: GeoRebalancerStack(app, f"{prefix}-geo-rebalancer", config=replace(base, prefix=prefix,
                                                                                          alarm_email=email))
              for prefix, email in (("alpha", "ops@example.com"), ("beta", None))}
    yield {prefix: Deployment(stack, Template.from_stack(stack)) for prefix, stack in stacks.items()}


def qualified(stack: str, value: Any) -> str:
    """A dimension value: a literal as it is, a token of the stack (Ref, GetAtt...) named with the stack; a pseudo
    parameter (``AWS::Region``) is the same in both stacks."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and str(value.get("Ref", "")).startswith("AWS::"):
        return json.dumps(value, sort_keys=True)
    return f"{stack}:{json.dumps(value, sort_keys=True)}"


def alarm_metrics(stack: str, template: Template) -> list[MetricKey]:
    """Every metric every alarm reads (a single metric, or each metric of a math expression)."""
    out: list[MetricKey] = []
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        stats = [q["MetricStat"]["Metric"] for q in props.get("Metrics", []) if "MetricStat" in q]
        if "MetricName" in props:
            stats.append(props)
        for m in stats:
            dims = frozenset((d["Name"], qualified(stack, d["Value"])) for d in m.get("Dimensions", []))
            out.append((m["Namespace"], m["MetricName"], dims))
    return out


def dashboard_metrics(stack: str, template: Template) -> list[MetricKey]:
    """Every metric of every widget of the stack's dashboard (its body is a Fn::Join of text and tokens)."""
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    tokens: dict[str, str] = {}
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
        else:
            tokens[f"@@{len(tokens)}@@"] = qualified(stack, part)
            text += f"@@{len(tokens) - 1}@@"
    out: list[MetricKey] = []
    for widget in json.loads(text)["widgets"]:
        for entry in [*widget["properties"].get("metrics", [])]:
            fields = [f for f in entry if isinstance(f, str)]
            if len(fields) < 2:
                continue  # a math expression ({"expression": ...}): its metrics are entries of their own
            namespace, name, *pairs = (re.sub(r"@@\d+@@", lambda m: tokens[m.group(0)], f) for f in fields)
            out.append((namespace, name, frozenset(zip(pairs[::2], pairs[1::2], strict=True))))
    return out


def test_two_deployments_share_no_metric_dimension_set_in_any_alarm_or_widget(two: dict[str, Deployment]) -> None:
    # GIVEN the alarms' and the dashboard widgets' metrics of deployments alpha and beta, synthesized in one app
    alarms = {p: alarm_metrics(d.stack.stack_name, d.template) for p, d in two.items()}
    widgets = {p: dashboard_metrics(d.stack.stack_name, d.template) for p, d in two.items()}
    # THEN each reads metrics, and every project metric in its own deployment's dimension set
    for prefix in two:
        assert len(alarms[prefix]) >= 17 and len(widgets[prefix]) >= 40
        own = [m for m in alarms[prefix] + widgets[prefix] if m[0] == NAMESPACE]
        assert own and all((DEPLOYMENT_DIMENSION, prefix) in dims and len(dims) == 2 for _ns, _n, dims in own)
    # AND no metric (namespace, name, dimension set) is read by both deployments
    shared = set(alarms["alpha"] + widgets["alpha"]) & set(alarms["beta"] + widgets["beta"])
    assert shared == set()


def test_a_deployment_without_a_subscriber_says_so_at_synth_and_in_its_outputs(two: dict[str, Deployment]) -> None:
    # GIVEN alpha (alarm_email set) and beta (none)
    outputs = {p: d.template.to_json()["Outputs"]["AlarmSubscribers"]["Value"] for p, d in two.items()}
    # THEN beta's synth warns that no alarm reaches anyone, alpha's does not
    warning = Match.string_like_regexp("alarm_email is empty: the alarm topic has no subscriber")
    found = {p: bool(Annotations.from_stack(d.stack).find_warning("*", warning)) for p, d in two.items()}
    assert found == {"alpha": False, "beta": True}
    # AND the output AlarmSubscribers names the address, or says none; only alpha's topic has a subscription
    assert outputs == {"alpha": "email ops@example.com", "beta": "none (set alarm_email)"}
    two["alpha"].template.has_resource_properties("AWS::SNS::Subscription",
                                                  {"Protocol": "email", "Endpoint": "ops@example.com"})
    assert two["beta"].template.find_resources("AWS::SNS::Subscription") == {}
