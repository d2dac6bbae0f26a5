"""Recorded AWS accounts for the georebal tests: clients that answer from ``tests/events/quotas/<name>_account.json``.

A recorded file holds, per service, per operation (its API name), per request key (the request's parameter values
in the input shape's order, joined by ``/``; ``""`` for none) the response as the API returns it, or
``{"Error": {"Code": ..., "Message": ...}}``, raised as botocore's ``ClientError`` like a real client does.

Every request is checked against botocore's input shape of the operation and every recorded response against its
output shape (:func:`check_recorded`), so the fakes cannot drift from the real APIs.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
from botocore import xform_name
from botocore.exceptions import ClientError, ParamValidationError
from botocore.validate import ParamValidator

QUOTAS_DIR = Path(__file__).resolve().parents[1] / "events" / "quotas"
ACCOUNTS = ("new", "default", "raised")
_SESSION = botocore.session.get_session()


def load_account(name: str) -> dict[str, Any]:
    return dict(json.loads((QUOTAS_DIR / f"{name}_account.json").read_text()))


def request_key(model: Any, operation: str, params: dict[str, Any]) -> str:
    members = model.operation_model(operation).input_shape
    names = list(members.members) if members is not None else []
    return "/".join(str(params[n]) for n in names if n in params)


class RecordedClient:
    """A boto3-style client of ``service`` answering from ``recorded`` (that service's part of an account file)."""

    def __init__(self, service: str, recorded: dict[str, Any]) -> None:
        self.service, self.recorded = service, recorded
        self.model = _SESSION.get_service_model(service)
        self.methods = {xform_name(op): op for op in self.model.operation_names}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        if method not in self.methods:
            raise AttributeError(f"{self.service} has no operation {method!r}")
        operation = self.methods[method]

        def call(**params: Any) -> dict[str, Any]:
            shape = self.model.operation_model(operation).input_shape
            if shape is not None:
                report = ParamValidator().validate(params, shape)
                if report.has_errors():
                    raise ParamValidationError(report=report.generate_report())
            self.calls.append((operation, params))
            key = request_key(self.model, operation, params)
            try:
                response = self.recorded[operation][key]
            except KeyError:
                raise AssertionError(f"no recorded {self.service} {operation} for {key!r}") from None
            if "Error" in response:
                raise ClientError(copy.deepcopy(response), operation)
            return dict(copy.deepcopy(response))

        return call


@dataclass
class RecordedAws:
    """An account answering from its recorded file; ``overrides`` put other clients (moto's) in front."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.doc = load_account(self.name)
        self.clients: dict[str, Any] = {}

    @property
    def region(self) -> str:
        return str(self.doc["region"])

    def client(self, service: str) -> Any:
        if service in self.overrides:
            return self.overrides[service]
        if service not in self.clients:
            self.clients[service] = RecordedClient(service, self.doc.get(service, {}))
        return self.clients[service]


def check_recorded(doc: dict[str, Any]) -> list[str]:
    """Every recorded response of an account file held against botocore's output shape (or the operation's errors)."""
    problems = []
    for service, operations in doc.items():
        if service.startswith("_") or service == "region":
            continue
        model = _SESSION.get_service_model(service)
        for operation, responses in operations.items():
            op = model.operation_model(operation)
            errors = {shape.name for shape in op.error_shapes}
            for key, response in responses.items():
                if "Error" in response:
                    if response["Error"]["Code"] not in errors:
                        problems.append(f"{service} {operation} {key}: {response['Error']['Code']} is not one of "
                                        f"its errors {sorted(errors)}")
                    continue
                report = ParamValidator().validate(response, op.output_shape)
                if report.has_errors():
                    problems.append(f"{service} {operation} {key}: {report.generate_report()}")
    return problems
