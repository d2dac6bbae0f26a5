"""Each part of the loop signs its AWS calls as its own principal, holding exactly its synthesized role's statements.

:func:`create_principals` (moto's IAM access control still off) creates in moto one IAM role per part with the
statements the template gives that part's role (:class:`~local.wiring.stack_wiring.RolePolicy`), a harness user
allowed everything (the replay, the observer, the report: not parts of the system) and an unattributed user allowed
nothing, assumes each role through STS, and returns their keys as :class:`Principals`. :func:`enforce` then turns
moto's access control on (``INITIAL_NO_AUTH_ACTION_COUNT`` 0 through moto's ``/moto-api/reset-auth``, as moto's own
server-mode tests do; moto's docs, ``iam.rst``): from then on moto authenticates every request by its signature
and checks its action against the caller's policies.

The workers and the Spark job are processes of their own: they get their role's keys in their environment
(:meth:`Principals.environment`), as an ECS task or an EMR job run gets its role's. The router, partitioner,
deployer and hooks run in this process: a part's calls are signed with its keys while the loop runs it inside
``with acting_as(component):`` (:func:`acting_as`, a context variable read at signing time by the credentials of
boto3's default session, :func:`sign_as_acting_part`). A call made outside any part is signed as the unattributed
user and denied, so a part the loop forgot to name shows up as a denial, never as a silent pass.

Notes
-----
moto checks most services' actions against resource ``*`` only (S3 and SQS are checked per bucket, key and queue),
so moto's copy of a role keeps each statement's actions and S3/SQS resources and allows the rest on ``*``, and
drops conditions; the twin's own gate (:mod:`local.iam.gate`) holds every call against the whole statements.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.session
from botocore.credentials import CredentialProvider, CredentialResolver, Credentials, ReadOnlyCredentials

from local.wiring.stack_wiring import Component, RolePolicy
from local.wiring.template import ACCOUNT_ID

HARNESS_USER = "georebal-twin-harness"
UNATTRIBUTED_USER = "georebal-twin-unattributed"
#: Services whose resources moto's access control checks (the rest it checks against ``*``).
MOTO_RESOURCE_SERVICES = frozenset({"s3", "sqs"})
#: moto names a bucket listing by its API operation, not IAM's ``s3:ListBucket``.
MOTO_S3_ALIASES = {"s3:ListBucket": ("s3:ListObjects", "s3:ListObjectsV2")}

_ACTING: ContextVar[Component | None] = ContextVar("georebal_acting_part", default=None)


@dataclass(frozen=True)
class Principal:
    """One principal's name and keys (a role's session, or an IAM user)."""

    name: str
    arn: str
    access_key: str
    secret_key: str
    token: str | None = None

    def frozen(self) -> ReadOnlyCredentials:
        return ReadOnlyCredentials(self.access_key, self.secret_key, self.token)

    def environment(self) -> dict[str, str]:
        """The ``AWS_*`` variables a process signs as this principal with (boto3's environment provider)."""
        env = {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        env["AWS_SESSION_TOKEN"] = self.token or ""
        return env


@dataclass(frozen=True)
class Principals:
    """The parts' role sessions, the harness user and the unattributed user."""

    parts: Mapping[Component, Principal]
    harness: Principal
    unattributed: Principal

    def of(self, component: Component | None) -> Principal:
        return self.unattributed if component is None else self.parts[component]

    def by_key(self) -> dict[str, tuple[Component | None, Principal]]:
        """Access key -> (part or None for the harness and the unattributed user, principal)."""
        out: dict[str, tuple[Component | None, Principal]] = {p.access_key: (c, p) for c, p in self.parts.items()}
        out[self.harness.access_key] = (None, self.harness)
        out[self.unattributed.access_key] = (None, self.unattributed)
        return out


def moto_document(role: RolePolicy) -> dict[str, Any]:
    """moto's copy of a role's statements (see the module docstring): actions kept, resources where moto checks them."""
    statements = []
    for st in role.statements:
        if st.get("Effect") != "Allow" or "Action" not in st:
            continue
        actions = [st["Action"]] if isinstance(st["Action"], str) else list(st["Action"])
        by_service: dict[str, list[str]] = {}
        for a in actions:
            by_service.setdefault(a.split(":", 1)[0].lower(), []).extend([a, *MOTO_S3_ALIASES.get(a, ())])
        for service, acts in sorted(by_service.items()):
            resource = st.get("Resource", "*") if service in MOTO_RESOURCE_SERVICES else "*"
            statements.append({"Effect": "Allow", "Action": acts, "Resource": resource})
    return {"Version": "2012-10-17", "Statement": statements or [{"Effect": "Deny", "Action": "*", "Resource": "*"}]}


def _user(iam: Any, name: str, document: Mapping[str, Any] | None) -> Principal:
    iam.create_user(UserName=name)
    if document is not None:
        iam.put_user_policy(UserName=name, PolicyName="twin", PolicyDocument=json.dumps(document))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return Principal(name, f"arn:aws:iam::{ACCOUNT_ID}:user/{name}", key["AccessKeyId"], key["SecretAccessKey"])


def create_principals(iam: Any, sts: Any, roles: Mapping[Component, RolePolicy]) -> Principals:
    """Create the roles and users in moto (access control still off) and assume each role; see the module docstring."""
    harness = _user(iam, HARNESS_USER, {"Version": "2012-10-17",
                                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    unattributed = _user(iam, UNATTRIBUTED_USER, None)
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"AWS": harness.arn}}]}
    parts: dict[Component, Principal] = {}
    for component, role in sorted(roles.items()):
        arn = iam.create_role(RoleName=role.logical_id, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        iam.put_role_policy(RoleName=role.logical_id, PolicyName="synthesized",
                            PolicyDocument=json.dumps(moto_document(role)))
        creds = sts.assume_role(RoleArn=arn, RoleSessionName=str(component), DurationSeconds=43200)
        c = creds["Credentials"]
        parts[component] = Principal(role.logical_id, creds["AssumedRoleUser"]["Arn"], c["AccessKeyId"],
                                     c["SecretAccessKey"], c["SessionToken"])
    return Principals(parts, harness, unattributed)


def enforce(endpoint_url: str, after_calls: int = 0) -> None:
    """Turn moto's IAM access control on after ``after_calls`` more requests (moto's ``/moto-api/reset-auth``)."""
    # a plain-text body: werkzeug reads a form-encoded one (urllib's default) into the form, and moto reads request.data
    req = urllib.request.Request(f"{endpoint_url}/moto-api/reset-auth", data=str(after_calls).encode(), method="POST",
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        json.loads(resp.read() or b"{}")


@contextlib.contextmanager
def acting_as(component: Component) -> Iterator[None]:
    """Sign this thread's calls through boto3's default session as ``component`` inside the block."""
    token = _ACTING.set(component)
    try:
        yield
    finally:
        _ACTING.reset(token)


def acting() -> Component | None:
    """The part this thread acts as (None outside :func:`acting_as`)."""
    return _ACTING.get()


class _ActingCredentials(Credentials):  # type: ignore[misc]
    """Credentials whose keys are those of the part the signing thread acts as, read at each signature."""

    def __init__(self, principals: Principals) -> None:
        super().__init__(principals.unattributed.access_key, principals.unattributed.secret_key, method="georebal-twin")
        self._principals = principals

    def get_frozen_credentials(self) -> ReadOnlyCredentials:
        return self._principals.of(_ACTING.get()).frozen()


class _ActingProvider(CredentialProvider):  # type: ignore[misc]
    METHOD = "georebal-twin"
    CANONICAL_NAME = "georebal-twin"

    def __init__(self, principals: Principals) -> None:
        super().__init__()
        self._principals = principals

    def load(self) -> Credentials:
        return _ActingCredentials(self._principals)


def sign_as_acting_part(principals: Principals) -> boto3.session.Session:
    """Make boto3's default session sign as the acting part (call before any in-process part makes a client)."""
    core = botocore.session.get_session()
    core.register_component("credential_provider", CredentialResolver(providers=[_ActingProvider(principals)]))
    boto3.setup_default_session(botocore_session=core)
    assert boto3.DEFAULT_SESSION is not None
    return boto3.DEFAULT_SESSION
