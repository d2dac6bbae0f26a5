"""What the smoke run deploys and how: a tiny fleet under its own prefix, the ``cdk deploy`` and ``cdk destroy``
command lines, the stack outputs it reads back and the resources the template keeps after a destroy.

The settings (:data:`SMOKE_CONTEXT`, bounds in :mod:`infra.config`) are passed as ``-c key=value`` over the
deployment's cdk.json, after it the user's own ``-c``: a smoke deployment is the configured one made small.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from georebal.errors import SmokeError

#: The tiny fleet (infra/config.py holds each setting's bounds): 2 worker slots of max_load events per 60 s window,
#: one geo shard each; one provisioned ingest shard and one NAT gateway (the cheapest); an EMR Serverless cap a
#: default account's 16 vCPU fit with preflight's 2x margin; nothing retained (destroy deletes the data).
SMOKE_CONTEXT: dict[str, str] = {
    "fleet_workers": "2",
    "max_load": "500",
    "window_s": "60",
    "watermark_s": "10",
    "retain_data": "false",
    "ingest_shards": "1",
    "nat_gateways": "1",
    "emr_max_vcpu": "8",
    "emr_max_memory_gb": "32",
    "log_retention_days": "1",
}
PREFIX_BASE = "georebal-smoke-"
#: The outputs the smoke run reads (infra/rebalancer.py, infra/outputs.py).
REQUIRED_OUTPUTS = ("IngestStreamName", "ControlTable", "OutputBucket", "RouterFailureQueue", "LogGroupRouter",
                    "LogGroupPartitioner", "LogGroupDeployer", "LogGroupHooks", "LogGroupWorkers")
#: The log groups searched for AccessDenied: the Lambdas' and the workers' (the output names).
JUDGED_LOG_GROUPS = ("LogGroupRouter", "LogGroupPartitioner", "LogGroupDeployer", "LogGroupHooks", "LogGroupWorkers")
CDK = Path("node_modules/.bin/cdk")
DEFAULT_QUALIFIER = "hnb659fds"  # the CDK's default bootstrap qualifier


def new_prefix(token: str | None = None) -> str:
    """``georebal-smoke-<5 hex>``: 20 characters, the longest prefix infra/config.py takes."""
    return PREFIX_BASE + (token if token is not None else secrets.token_hex(3)[:5])


def smoke_context(prefix: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """``prefix`` and :data:`SMOKE_CONTEXT`, then the user's ``-c`` ``overrides`` (which win, ``prefix`` too)."""
    return {"prefix": prefix, **SMOKE_CONTEXT, **overrides}


@dataclass(frozen=True)
class SmokePlan:
    """One smoke deployment: its settings (``context``, given to cdk as ``-c``), where cdk runs (``root``, the
    directory of the deployment's cdk.json) and writes (``workdir``: the outputs file and the cloud assembly)."""

    context: dict[str, str]
    root: Path
    workdir: Path
    cdk: Path = CDK
    profile: str | None = None
    qualifier: str = DEFAULT_QUALIFIER

    @property
    def prefix(self) -> str:
        return self.context["prefix"]

    @property
    def stack_name(self) -> str:
        """``<prefix>-geo-rebalancer`` (app.py)."""
        return f"{self.prefix}-geo-rebalancer"

    @property
    def outputs_file(self) -> Path:
        return self.workdir / "outputs.json"

    @property
    def assembly(self) -> Path:
        return self.workdir / "cdk.out"

    @property
    def template_file(self) -> Path:
        return self.assembly / f"{self.stack_name}.template.json"

    def context_args(self) -> list[str]:
        return [arg for key, value in self.context.items() for arg in ("-c", f"{key}={value}")]

    def _common(self) -> list[str]:
        profile = ["--profile", self.profile] if self.profile else []
        return ["--output", str(self.assembly), *profile, *self.context_args()]

    def deploy_command(self) -> list[str]:
        """``cdk deploy`` of the one stack, no approval prompt, the outputs written to :attr:`outputs_file`."""
        return [str(self.cdk), "deploy", self.stack_name, "--require-approval", "never",
                "--outputs-file", str(self.outputs_file), *self._common()]

    def destroy_command(self) -> list[str]:
        """``cdk destroy --force`` of the same stack (the same settings synthesize the same stack name)."""
        return [str(self.cdk), "destroy", self.stack_name, "--force", *self._common()]


@dataclass(frozen=True)
class Outputs:
    """The stack outputs the smoke run reads (``cdk deploy --outputs-file``)."""

    ingest_stream: str
    control_table: str
    output_bucket: str
    failure_queue: str
    log_groups: dict[str, str] = field(default_factory=dict)  # output name (LogGroup*) -> log group name

    @classmethod
    def from_stack(cls, values: Mapping[str, Any], where: str) -> Outputs:
        missing = [key for key in REQUIRED_OUTPUTS if not values.get(key)]
        if missing:
            raise SmokeError(f"{where}: the stack has no output {', '.join(missing)} (have: "
                             f"{', '.join(sorted(values)) or 'none'}); was it deployed from this checkout?")
        return cls(ingest_stream=str(values["IngestStreamName"]), control_table=str(values["ControlTable"]),
                   output_bucket=str(values["OutputBucket"]), failure_queue=str(values["RouterFailureQueue"]),
                   log_groups={k: str(v) for k, v in values.items() if k.startswith("LogGroup")})

    @property
    def judged_log_groups(self) -> dict[str, str]:
        return {k: self.log_groups[k] for k in JUDGED_LOG_GROUPS}


def read_outputs(path: Path, stack_name: str) -> Outputs:
    """The outputs of ``stack_name`` in the ``--outputs-file`` at ``path``."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise SmokeError(f"{str(path)!r}: cannot read the stack outputs ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise SmokeError(f"{str(path)!r}: the stack outputs are not JSON ({exc})") from None
    values = doc.get(stack_name) if isinstance(doc, dict) else None
    if not isinstance(values, dict):
        raise SmokeError(f"{str(path)!r}: no outputs of stack {stack_name!r}")
    return Outputs.from_stack(values, repr(str(path)))


def retained_resources(template: Path) -> list[str]:
    """The resources CloudFormation keeps when the stack is deleted (``DeletionPolicy`` Retain or Snapshot), one
    ``<type> <logical id> (<policy>)`` each; raises :class:`SmokeError` when the template cannot be read."""
    try:
        resources = json.loads(template.read_text()).get("Resources", {})
    except (OSError, json.JSONDecodeError) as exc:
        raise SmokeError(f"{str(template)!r}: cannot read the synthesized template ({exc})") from None
    return [f"{r.get('Type')} {name} ({r['DeletionPolicy']})" for name, r in sorted(resources.items())
            if isinstance(r, dict) and r.get("DeletionPolicy", "Delete") != "Delete"]
