"""Session fixtures: each app variant (engine=emr, engine=glue) is built and synthesized ONCE per session.

Test modules use only fixtures from here (no imports of this file), so they work in every pytest import mode.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20,18")
REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from app import build_app  # noqa: E402
from infra.stack import GeoRebalancerStack  # noqa: E402


def cdk_json_context() -> dict[str, Any]:
    return dict(json.loads((REPO_ROOT / "cdk.json").read_text())["context"])


@dataclass(frozen=True)
class Synthesized:
    app: cdk.App
    stack: GeoRebalancerStack
    template: Template
    assembly: Any

    def resources(self, resource_type: str) -> dict[str, Any]:
        return dict(self.template.find_resources(resource_type))

    def policy_statements(self) -> list[dict[str, Any]]:
        """Every statement of every identity policy (AWS::IAM::Policy and inline role policies)."""
        out: list[dict[str, Any]] = []
        for policy in self.resources("AWS::IAM::Policy").values():
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        for role in self.resources("AWS::IAM::Role").values():
            for inline in role["Properties"].get("Policies", []):
                out.extend(inline["PolicyDocument"]["Statement"])
        return out


def synthesize(tmp: Path, **overrides: Any) -> Synthesized:
    app = cdk.App(context={**cdk_json_context(), **overrides}, outdir=str(tmp))
    stack = build_app(app)
    assembly = app.synth()  # runs the cdk-nag validation plugin: raises on an unacknowledged error
    return Synthesized(app=app, stack=stack, template=Template.from_stack(stack), assembly=assembly)


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    """The context of cdk.json (what `cdk synth` uses)."""
    return cdk_json_context()


@pytest.fixture(scope="session")
def emr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(tmp_path_factory.mktemp("cdk-emr"))


@pytest.fixture(scope="session")
def glue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """engine=glue, with ``router_parallelism=2`` and ``fleet_workers=1000`` too (a second synth only for those would
    cost the gate ~10 s each)."""
    yield synthesize(tmp_path_factory.mktemp("cdk-glue"), engine="glue", router_parallelism=2, fleet_workers=1000)



@pytest.fixture(scope="session")
def custom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """The app synthesized with non-default settings (one synth for all of them, to keep the suite short):
    ``-c @aws-cdk/core:bootstrapQualifier=x`` (a user's own bootstrap stack), ``ingest_shards=4`` (provisioned
    ingest), ``retain_data=false`` (named resources that go with the stack), ``state_handoff=true``,
    ``leases_warm_writes=6000``, ``leases_warm_reads=20000`` (a pre-warmed leases table) and
    ``geofence_event_bus=fences`` (the workers' geofence sink)."""
    yield synthesize(tmp_path_factory.mktemp("cdk-custom"), ingest_shards=4, retain_data=False, state_handoff=True,
                     leases_warm_writes=6000, leases_warm_reads=20000, geofence_event_bus="fences",
                     **{"@aws-cdk/core:bootstrapQualifier": "x"})
