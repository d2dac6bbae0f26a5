"""The synthesized CloudFormation template of the stack, and the values of its intrinsic functions in the twin.

A template names its resources by logical id and refers to them with ``Ref``, ``Fn::GetAtt``, ``Fn::Join`` and
``Fn::Sub``. The twin creates its resources under names of its own (:class:`local.aws.Names`), so
:class:`Resolver` evaluates those functions with the twin's names: a logical id that a stack output exports
(``SnapshotsBucket``, ``ControlTable``, ...) resolves to the twin's resource of that output
(:data:`OUTPUT_NAMES`); any other resource to a placeholder named by its logical id, which no request of the
twin can match by accident (a KMS key's ARN, say, is ``arn:aws:kms:<region>:<account>:key/<logical id>`` in
policies and in the encryption settings alike, so the two agree).

Notes
-----
* The pseudo parameters are the twin's: partition ``aws``, the twin's region and moto's account id.
* Only the intrinsics the stack's IAM policies, event source mapping and notifications use are evaluated; any
  other raises :class:`TemplateError` naming it (a new construct that needs more shows up as one clear line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local.errors import LocalRunError

#: moto's account id (every ARN moto returns carries it).
ACCOUNT_ID = "123456789012"


class TemplateError(LocalRunError, ValueError):
    """The synthesized template is missing or holds something the twin cannot read; the message names it."""


#: Stack output -> the attribute of :class:`local.aws.Names` holding the twin's resource of that output.
OUTPUT_NAMES: Mapping[str, str] = {
    "IngestStreamName": "ingest_stream",
    "SnapshotsBucket": "snapshots_bucket",
    "SpecsBucket": "specs_bucket",
    "CheckpointsBucket": "checkpoints_bucket",
    "QuarantineBucket": "quarantine_bucket",
    "CostsBucket": "costs_bucket",
    "OutputBucket": "output_bucket",
    "ControlTable": "control_table",
    "LeasesTable": "leases_table",
    "RouterFailureQueue": "router_failures_queue",
}


@dataclass(frozen=True)
class StackTemplate:
    """One stack's synthesized template (``resources`` and ``outputs`` as CloudFormation holds them)."""

    path: Path
    resources: Mapping[str, Mapping[str, Any]]
    outputs: Mapping[str, Mapping[str, Any]]

    @classmethod
    def read(cls, path: Path) -> StackTemplate:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TemplateError(f"cannot read the synthesized template {str(path)!r}: {exc}") from exc
        if not isinstance(doc.get("Resources"), dict):
            raise TemplateError(f"{str(path)!r} is not a CloudFormation template (no 'Resources')")
        return cls(path, doc["Resources"], doc.get("Outputs", {}))

    def of_type(self, resource_type: str) -> dict[str, Mapping[str, Any]]:
        """Every resource of ``resource_type``, by logical id."""
        return {k: r for k, r in self.resources.items() if r.get("Type") == resource_type}

    def properties(self, logical_id: str) -> Mapping[str, Any]:
        if logical_id not in self.resources:
            raise TemplateError(f"{str(self.path)!r} has no resource {logical_id!r}")
        return dict(self.resources[logical_id].get("Properties", {}))


def referenced_id(value: Any) -> str | None:
    """The logical id a ``{"Ref": id}`` or ``{"Fn::GetAtt": [id, attr]}`` names, else None."""
    if isinstance(value, Mapping):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            att = value["Fn::GetAtt"]
            return str(att[0] if isinstance(att, list) else str(att).split(".")[0])
    return None


#: Resource type -> its ARN from (name, region, account), as CloudFormation's ``Fn::GetAtt [id, Arn]`` gives it.
_ARNS: Mapping[str, Callable[[str, str, str], str]] = {
    "AWS::S3::Bucket": lambda n, r, a: f"arn:aws:s3:::{n}",
    "AWS::DynamoDB::Table": lambda n, r, a: f"arn:aws:dynamodb:{r}:{a}:table/{n}",
    "AWS::Kinesis::Stream": lambda n, r, a: f"arn:aws:kinesis:{r}:{a}:stream/{n}",
    "AWS::SQS::Queue": lambda n, r, a: f"arn:aws:sqs:{r}:{a}:{n}",
    "AWS::KMS::Key": lambda n, r, a: f"arn:aws:kms:{r}:{a}:key/{n}",
    "AWS::Lambda::Function": lambda n, r, a: f"arn:aws:lambda:{r}:{a}:function:{n}",
    "AWS::IAM::Role": lambda n, r, a: f"arn:aws:iam::{a}:role/{n}",
    "AWS::SNS::Topic": lambda n, r, a: f"arn:aws:sns:{r}:{a}:{n}",
}


class Resolver:
    """Evaluates the intrinsic functions of ``template`` with the twin's resource names.

    Parameters
    ----------
    template
        The synthesized stack.
    physical
        Logical id -> the twin's name of that resource (see :func:`twin_names`); a queue's name, not its URL.
    region
        The twin's region.
    endpoint_url
        The twin's endpoint (a queue's ``Ref`` is its URL there).
    """

    def __init__(self, template: StackTemplate, physical: Mapping[str, str], region: str, endpoint_url: str) -> None:
        self.template = template
        self.physical = dict(physical)
        self.region = region
        self.endpoint_url = endpoint_url
        self._pseudo = {"AWS::Partition": "aws", "AWS::Region": region, "AWS::AccountId": ACCOUNT_ID,
                        "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": ""}

    def name(self, logical_id: str) -> str:
        """The twin's name of a resource (its logical id when the twin has none of its own)."""
        return self.physical.get(logical_id, logical_id)

    def arn(self, logical_id: str) -> str:
        kind = str(self.template.resources.get(logical_id, {}).get("Type", ""))
        make = _ARNS.get(kind)
        if make is None:
            return f"arn:aws:cloudformation:{self.region}:{ACCOUNT_ID}:resource/{logical_id}"
        return make(self.name(logical_id), self.region, ACCOUNT_ID)

    def ref(self, target: str) -> str:
        if target in self._pseudo:
            return self._pseudo[target]
        kind = str(self.template.resources.get(target, {}).get("Type", ""))
        if kind == "AWS::SQS::Queue":
            return f"{self.endpoint_url}/{ACCOUNT_ID}/{self.name(target)}"
        if kind == "AWS::KMS::Key":
            return target
        return self.name(target)

    def value(self, node: Any) -> Any:
        """``node`` with every intrinsic function replaced by its value (lists and mappings recursively)."""
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, Mapping):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(str(arg))
            if key == "Fn::GetAtt":
                parts = arg if isinstance(arg, list) else str(arg).split(".", 1)
                logical, attr = str(parts[0]), str(parts[1])
                return self.arn(logical) if attr.endswith("Arn") else f"{self.name(logical)}.{attr}"
            if key == "Fn::Join":
                sep, items = arg
                return str(sep).join(str(self.value(i)) for i in self.value(items))
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::Select":
                index, items = arg
                return self.value(items)[int(self.value(index))]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.value(text)).split(str(sep))
            if key.startswith("Fn::") or key == "Condition":
                raise TemplateError(f"{str(self.template.path)!r}: the twin cannot evaluate {key!r} ({json.dumps(arg)[:120]})")
        return {k: self.value(v) for k, v in node.items()}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.value(arg[1]))

        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                logical, attr = name.split(".", 1)
                return str(self.value({"Fn::GetAtt": [logical, attr]}))
            return self.ref(name)

        return re.sub(r"\$\{([^}!][^}]*)\}", one, str(text))


def twin_names(template: StackTemplate, names: Any) -> dict[str, str]:
    """Logical id -> the twin's name, for every resource a stack output in :data:`OUTPUT_NAMES` exports.

    ``names`` is the run's :class:`local.aws.Names`; an output it has no attribute for is skipped (the twin has no
    such resource: the Spark job's checkpoints are a local folder).
    """
    out: dict[str, str] = {}
    for output, attribute in OUTPUT_NAMES.items():
        logical = referenced_id(template.outputs.get(output, {}).get("Value"))
        name = getattr(names, attribute, None)
        if logical is not None and isinstance(name, str):
            out[logical] = name
    return out
