"""What the twin reads of the synthesized stack: who runs as which role, the router's event source mapping, the S3
notifications, and which KMS key encrypts each stream and bucket.

:func:`read_wiring` turns a :class:`~local.wiring.template.StackTemplate` into a :class:`Wiring`, resolved with the
twin's names. The local loop builds its stand-ins for AWS's plumbing from it (``local.loops``), and runs each part
as the principal of its role (``local.iam``), so the twin has no settings of its own for what the stack decides.

Notes
-----
* A role is a part's when the template says so: a Lambda function's ``Role`` (the part is named by the function's
  handler module), the task definition's ``TaskRoleArn`` (the workers), the role the EMR Serverless or Glue service
  assumes (the Spark job).
* A role's statements are those of every ``AWS::IAM::Policy`` attached to it plus its inline ``Policies``; managed
  policies are kept by ARN only (``AWSLambdaBasicExecutionRole`` grants the log writes the twin does not make).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from geokernel.contracts.env import EnvVar
from local.wiring.template import Resolver, StackTemplate, TemplateError, referenced_id


class Component(StrEnum):
    """A part of the system that calls AWS as a principal of its own."""

    ROUTER = "router"
    PARTITIONER = "partitioner"
    DEPLOYER = "deployer"
    HOOKS = "hooks"
    WORKER = "worker"
    SPARK = "spark"


#: A Lambda function's handler module -> the part it is (the modules of infra/assets.py's entry points).
HANDLER_MODULES: Mapping[str, Component] = {
    "lambdas.router.handler": Component.ROUTER,
    "lambdas.partitioner.handler": Component.PARTITIONER,
    "lambdas.deploy.deployer": Component.DEPLOYER,
    "lambdas.deploy.hooks": Component.HOOKS,
}
#: The service principals that run the Spark job (EMR Serverless, Glue).
SPARK_SERVICES = ("emr-serverless.amazonaws.com", "glue.amazonaws.com")


@dataclass(frozen=True)
class RolePolicy:
    """One part's role: its logical id, its identity statements (resolved) and its managed policy ARNs."""

    component: Component
    logical_id: str
    statements: tuple[Mapping[str, Any], ...]
    managed: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        return {"Version": "2012-10-17", "Statement": [dict(s) for s in self.statements]}


@dataclass(frozen=True)
class EventSource:
    """The settings of a Kinesis event source mapping, as the stack declares them (AWS defaults where absent).

    ``max_retry_attempts`` and ``max_record_age_s`` of -1 mean infinite: failed records are retried until they
    expire from the stream (https://docs.aws.amazon.com/lambda/latest/dg/services-kinesis-parameters.html).
    """

    component: Component
    stream: str
    starting_position: str
    batch_size: int
    max_batching_window_s: float
    bisect_on_error: bool
    report_batch_item_failures: bool
    max_retry_attempts: int
    max_record_age_s: int
    parallelization_factor: int
    on_failure: str | None  # the destination's ARN (an SQS queue), or None
    enabled: bool


@dataclass(frozen=True)
class Notification:
    """An S3 ``ObjectCreated`` notification: which bucket and key filter invoke which part."""

    bucket: str
    prefix: str
    suffix: str
    component: Component

    def matches(self, key: str) -> bool:
        return key.startswith(self.prefix) and key.endswith(self.suffix)


@dataclass(frozen=True)
class Wiring:
    """Everything :func:`read_wiring` reads (see the module docstring)."""

    roles: Mapping[Component, RolePolicy]
    event_sources: tuple[EventSource, ...]
    notifications: tuple[Notification, ...]
    encryption_keys: Mapping[str, str]  # resource ARN or ARN pattern (a stream, a bucket) -> its KMS key ARN
    async_retries: Mapping[Component, int]  # retries of an asynchronous invocation (Lambda's default: 2)

    def event_source(self, component: Component) -> EventSource:
        found = [e for e in self.event_sources if e.component is component]
        if len(found) != 1:
            raise TemplateError(f"the stack has {len(found)} event source mappings for the {component} function, "
                                f"the twin expects one")
        return found[0]

    def notification(self, bucket: str, component: Component | None = None) -> Notification:
        """The one notification on ``bucket`` (of ``component``'s function, when given)."""
        found = [n for n in self.notifications if n.bucket == bucket and component in (None, n.component)]
        if len(found) != 1:
            whose = f" for the {component} function" if component is not None else ""
            raise TemplateError(f"the stack has {len(found)} notifications on bucket {bucket!r}{whose}, the twin "
                                f"expects one")
        return found[0]


def read_wiring(template: StackTemplate, resolver: Resolver, geo_streams_key: str | None = None) -> Wiring:
    """Read the parts' roles, the event source mappings, the notifications and the encryption keys.

    ``geo_streams_key`` is the ARN pattern of the geo streams (the deployer creates them; they are not in the
    template) and the key the deployer encrypts them with is read from its ``GEO_STREAM_KMS_KEY``.
    """
    functions = _functions(template)
    roles = _roles(template, resolver, functions)
    return Wiring(roles, _event_sources(template, resolver, functions), _notifications(template, resolver, functions),
                  _encryption_keys(template, resolver, geo_streams_key), _async_retries(template, functions))


def _functions(template: StackTemplate) -> dict[str, Component]:
    """Logical id of each of the parts' Lambda functions -> its part."""
    out: dict[str, Component] = {}
    for logical, res in template.of_type("AWS::Lambda::Function").items():
        module = str(res.get("Properties", {}).get("Handler", "")).rpartition(".")[0]
        if module in HANDLER_MODULES:
            out[logical] = HANDLER_MODULES[module]
    missing = set(HANDLER_MODULES.values()) - set(out.values())
    if missing:
        raise TemplateError(f"{str(template.path)!r} has no Lambda function for {sorted(missing)}")
    return out


def _role_ids(template: StackTemplate, functions: Mapping[str, Component]) -> dict[str, Component]:
    out: dict[str, Component] = {}
    for logical, part in functions.items():
        role = referenced_id(template.properties(logical).get("Role"))
        if role is not None:
            out[role] = part
    for td in template.of_type("AWS::ECS::TaskDefinition").values():
        role = referenced_id(td.get("Properties", {}).get("TaskRoleArn"))
        if role is not None:
            out[role] = Component.WORKER
    for logical, res in template.of_type("AWS::IAM::Role").items():
        trust = res.get("Properties", {}).get("AssumeRolePolicyDocument", {}).get("Statement", [])
        services = {p for s in trust for p in _as_list(s.get("Principal", {}).get("Service"))}
        if services & set(SPARK_SERVICES):
            out[logical] = Component.SPARK
    return out


def _roles(template: StackTemplate, resolver: Resolver, functions: Mapping[str, Component]) -> dict[Component, RolePolicy]:
    ids = _role_ids(template, functions)
    statements: dict[str, list[Mapping[str, Any]]] = {role: [] for role in ids}
    for policy in template.of_type("AWS::IAM::Policy").values():
        props = policy.get("Properties", {})
        for role_ref in props.get("Roles", []):
            role = referenced_id(role_ref)
            if role in statements:
                statements[role] += _as_list(resolver.value(props["PolicyDocument"]).get("Statement"))
    out: dict[Component, RolePolicy] = {}
    for role, part in ids.items():
        props = template.properties(role)
        for inline in props.get("Policies", []):
            statements[role] += _as_list(resolver.value(inline["PolicyDocument"]).get("Statement"))
        managed = tuple(str(resolver.value(m)) for m in props.get("ManagedPolicyArns", []))
        out[part] = RolePolicy(part, role, tuple(statements[role]), managed)
    return out


def _event_sources(template: StackTemplate, resolver: Resolver,
                   functions: Mapping[str, Component]) -> tuple[EventSource, ...]:
    out = []
    for res in template.of_type("AWS::Lambda::EventSourceMapping").values():
        p = res.get("Properties", {})
        part = functions.get(referenced_id(p.get("FunctionName")) or "")
        if part is None:
            continue
        destination = p.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        out.append(EventSource(
            component=part, stream=str(resolver.value(p["EventSourceArn"])).rsplit("/", 1)[-1],
            starting_position=str(p.get("StartingPosition", "")), batch_size=int(p.get("BatchSize", 100)),
            max_batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
            bisect_on_error=bool(p.get("BisectBatchOnFunctionError", False)),
            report_batch_item_failures="ReportBatchItemFailures" in p.get("FunctionResponseTypes", []),
            max_retry_attempts=int(p.get("MaximumRetryAttempts", -1)),
            max_record_age_s=int(p.get("MaximumRecordAgeInSeconds", -1)),
            parallelization_factor=int(p.get("ParallelizationFactor", 1)),
            on_failure=None if destination is None else str(resolver.value(destination)),
            enabled=bool(p.get("Enabled", True))))
    return tuple(out)


def _notifications(template: StackTemplate, resolver: Resolver,
                   functions: Mapping[str, Component]) -> tuple[Notification, ...]:
    out = []
    for res in template.of_type("Custom::S3BucketNotifications").values():
        p = res.get("Properties", {})
        bucket = str(resolver.value(p["BucketName"]))
        for cfg in p.get("NotificationConfiguration", {}).get("LambdaFunctionConfigurations", []):
            part = functions.get(referenced_id(cfg.get("LambdaFunctionArn")) or "")
            if part is None or not any(str(e).startswith("s3:ObjectCreated") for e in cfg.get("Events", [])):
                continue
            rules = {r["Name"].lower(): str(r["Value"]) for r in cfg.get("Filter", {}).get("Key", {}).get("FilterRules", [])}
            out.append(Notification(bucket, rules.get("prefix", ""), rules.get("suffix", ""), part))
    return tuple(out)


def _encryption_keys(template: StackTemplate, resolver: Resolver, geo_streams: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for logical, res in template.of_type("AWS::Kinesis::Stream").items():
        key = res.get("Properties", {}).get("StreamEncryption", {}).get("KeyId")
        if key is not None:
            out[resolver.arn(logical)] = str(resolver.value(key))
    for logical, res in template.of_type("AWS::S3::Bucket").items():
        for rule in res.get("Properties", {}).get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", []):
            key = rule.get("ServerSideEncryptionByDefault", {}).get("KMSMasterKeyID")
            if key is not None:
                out[resolver.arn(logical)] = str(resolver.value(key))
    if geo_streams is not None:
        for fn in template.of_type("AWS::Lambda::Function").values():
            key = fn.get("Properties", {}).get("Environment", {}).get("Variables", {}).get(EnvVar.GEO_STREAM_KMS_KEY)
            if key is not None:
                out[geo_streams] = str(resolver.value(key))
                break
    for queue_id, queue in template.of_type("AWS::SQS::Queue").items():
        key = queue.get("Properties", {}).get("KmsMasterKeyId")
        if key is not None:
            out[resolver.arn(queue_id)] = str(resolver.value(key))
    return out


def _async_retries(template: StackTemplate, functions: Mapping[str, Component]) -> dict[Component, int]:
    out = dict.fromkeys(functions.values(), 2)  # Lambda retries an asynchronous invocation twice by default
    for res in template.of_type("AWS::Lambda::EventInvokeConfig").values():
        p = res.get("Properties", {})
        part = functions.get(referenced_id(p.get("FunctionName")) or str(p.get("FunctionName")))
        if part is not None and "MaximumRetryAttempts" in p:
            out[part] = int(p["MaximumRetryAttempts"])
    return out


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
