"""The twin of the deployed stack: its wiring read from the synthesized template, its IAM enforced.

:func:`wire_twin` synthesizes the CDK app with the run's settings (:mod:`local.wiring.synth`), reads what it wires
(:func:`local.wiring.stack_wiring.read_wiring`: the parts' roles, the router's event source mapping, the S3
notifications, the encryption keys), creates one principal per part in moto (:mod:`local.iam.principals`), puts the
IAM gate in front of moto (:mod:`local.iam.gate`), makes boto3's default session sign as the acting part and turns
moto's access control on. From then on every part calls AWS as its role in the synthesized template would.

Call it after the resources exist and before any part makes a client; use the returned :class:`Twin`'s ``aws``
(the harness's keys) from then on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from geo_service.runtime.config import DEFAULT_TRANSFORM
from geokernel.contracts.stream import geo_stream_prefix
from local.aws import REGION, EmbeddedAws, Names
from local.config import RunConfig
from local.environment import geofence_events
from local.iam.gate import IamGate
from local.iam.principals import Principals, create_principals, enforce, sign_as_acting_part
from local.wiring.stack_wiring import Component, Wiring, read_wiring
from local.wiring.synth import synthesized_template
from local.wiring.template import ACCOUNT_ID, Resolver, StackTemplate, twin_names


@dataclass(frozen=True)
class Twin:
    """What :func:`wire_twin` set up: the harness's view of AWS, the wiring, the principals and the gate."""

    aws: EmbeddedAws
    wiring: Wiring
    principals: Principals
    gate: IamGate
    template: str  # the synthesized template's path

    def environment(self, part: Component) -> dict[str, str]:
        """The ``AWS_*`` keys of ``part``'s role, for a process of its own (a worker, the Spark job)."""
        return self.principals.of(part).environment()


def stack_context(cfg: RunConfig, stateful: bool) -> dict[str, Any]:
    """The ``cdk.json`` context overrides that make the stack the run's: names, swap mode, transform, handoff, and the
    geofence bus when the transform's transitions are pushed."""
    context: dict[str, Any] = {"prefix": cfg.prefix, "swap_mode": cfg.swap_mode, "state_handoff": stateful}
    if not cfg.event_fields.is_default:
        context["event_fields"] = cfg.event_fields.to_json()
    if cfg.transform != DEFAULT_TRANSFORM:
        context["geo_transform"] = cfg.transform
    if geofence_events(cfg.transform):  # the task role may put on the loop's bus (local.aws.Names.geofence_bus)
        context["geofence_event_bus"] = Names(cfg.prefix).geofence_bus
    return context


def wire_twin(aws: EmbeddedAws, cfg: RunConfig, stateful: bool, say: Callable[[str], None]) -> Twin:
    """Synthesize, read the wiring, create the principals, gate moto and turn its access control on."""
    path, took_s = synthesized_template(stack_context(cfg, stateful))
    template = StackTemplate.read(path)
    resolver = Resolver(template, twin_names(template, aws.names), REGION, aws.endpoint_url)
    geo_streams = f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/{geo_stream_prefix(cfg.prefix)}*"
    wiring = read_wiring(template, resolver, geo_streams)
    principals = create_principals(aws.client("iam"), aws.client("sts"), wiring.roles)
    gate = IamGate(principals, wiring.roles, wiring.encryption_keys, REGION)
    harness = dataclasses.replace(aws, harness_keys=(principals.harness.access_key, principals.harness.secret_key))
    sign_as_acting_part(principals)
    aws.server.gate = gate
    enforce(aws.endpoint_url)
    source = f"synthesized in {took_s:.0f}s" if took_s else "kept from an earlier run"
    say(f"stack wiring from {path.parent.name}/{path.name} ({source}): router event source "
        f"{_describe(wiring)}; IAM enforced: each part signs as its synthesized role "
        f"({', '.join(sorted(str(c) for c in wiring.roles))})")
    return Twin(harness, wiring, principals, gate, str(path))


def _describe(wiring: Wiring) -> str:
    es = wiring.event_source(Component.ROUTER)
    retries = "until the record expires" if es.max_retry_attempts < 0 else f"{es.max_retry_attempts} retries"
    age = "no age limit" if es.max_record_age_s < 0 else f"records up to {es.max_record_age_s}s old"
    return f"{es.starting_position}, batches of {es.batch_size}, {retries}, {age}"
