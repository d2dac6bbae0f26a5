"""The twin's IAM gate: every request to the embedded AWS is held against its signer's synthesized role.

:class:`IamGate` runs inside the moto server's request lock (``local.aws.SerialMotoServer``), before moto. For a
request signed by a part it reads what the request needs (:func:`local.iam.requests.read_call`: the action on each
resource, and the KMS permission an encrypted target implies) and evaluates each against that part's statements
(:func:`local.iam.policy.evaluate`). A refused request gets AWS's own ``AccessDenied`` answer, which the part's SDK
raises like any AWS error, and is recorded as a :class:`Denial` naming the part, its role, the action and the
resource; the run fails on any. Behind it moto's access control authenticates the signature and checks the action
again (:mod:`local.iam.principals`); a refusal by moto is recorded the same way.

Counts per part (:attr:`IamGate.checked`) are what the report prints: how many authorizations the twin checked,
and how many requests held a resource it could not read (checked on the action alone, :attr:`IamGate.action_only`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from local.iam.policy import Statement, evaluate, statements_of
from local.iam.principals import Principals
from local.iam.requests import Call, read_call, signer
from local.wiring.stack_wiring import Component, RolePolicy

#: Error codes of a refusal by moto's access control (authentication or authorization).
MOTO_REFUSALS = (b"AccessDenied", b"InvalidClientTokenId", b"SignatureDoesNotMatch", b"InvalidAccessKeyId",
                 b"UnrecognizedClient")
_JSON_SERVICES = {"kinesis": "application/x-amz-json-1.1", "dynamodb": "application/x-amz-json-1.0",
                  "kms": "application/x-amz-json-1.1", "sqs": "application/x-amz-json-1.0",
                  "events": "application/x-amz-json-1.1"}


@dataclass(frozen=True)
class Denial:
    """One refused request: who, what, on which resource, and why."""

    at: float
    part: str
    principal: str
    action: str
    resource: str
    reason: str
    by: str  # "twin" (this gate) or "moto" (moto's access control)

    def line(self) -> str:
        return (f"{self.part} (role {self.principal}) may not {self.action} on {self.resource}: {self.reason} "
                f"[refused by {self.by}]")


class IamGate:
    """See the module docstring. ``roles``: each part's synthesized statements; ``encryption_keys``: resource ARN
    (or pattern) -> the KMS key encrypting it."""

    def __init__(self, principals: Principals, roles: Mapping[Component, RolePolicy],
                 encryption_keys: Mapping[str, str], region: str) -> None:
        self.keys = principals.by_key()
        self.harness_key = principals.harness.access_key
        self.statements: dict[Component, tuple[Statement, ...]] = {
            c: statements_of([r.document()]) for c, r in roles.items()}
        self.encryption_keys = dict(encryption_keys)
        self.region = region
        self.checked: Counter[str] = Counter()
        self.action_only: Counter[str] = Counter()
        self.denials: list[Denial] = []

    def check(self, environ: dict[str, Any], body: bytes) -> tuple[str, list[tuple[str, str]], bytes] | None:
        """None to let the request through, else the (status, headers, body) of AWS's AccessDenied answer."""
        call = read_call(environ, body, self.region, self.encryption_keys)
        if call is None or call.access_key == self.harness_key:
            return None
        part, principal = self.keys.get(call.access_key, (None, None))
        if part is None:
            who = principal.name if principal is not None else f"access key {call.access_key!r}"
            return self._deny(call, "-", who, call.checks[0].action if call.checks else call.operation, "*",
                              "signed by no part of the system (a call made outside local.iam.acting_as, or a "
                              "process without its role's keys)")
        assert principal is not None
        for check in call.checks:
            self.checked[part] += 1
            if check.resource is None:
                self.action_only[part] += 1
                if any(st.covers_action(check.action) for st in self.statements[part]):
                    continue
                return self._deny(call, part, principal.name, check.action, "(not readable from the request)",
                                  "no identity-based policy allows the action")
            decision = evaluate(self.statements[part], check.action, check.resource, {"aws:SecureTransport": "true"})
            if not decision.allowed:
                why = decision.reason + (f" (implied by {call.operation} on an encrypted target)" if check.implied else "")
                return self._deny(call, part, principal.name, check.action, check.resource, why)
        return None

    def resign(self, environ: dict[str, Any], body: bytes) -> None:
        """Sign a request the twin rewrote (the ``put-partial`` fault drops records from a put) again with its signer's
        keys, as that principal would have signed it: moto's access control checks the signature over the body."""
        signed = signer(environ)
        if signed is None:
            return
        key, region, service = signed
        _, principal = self.keys.get(key, (None, None))
        if principal is None:
            return
        names = [h for h in environ.get("HTTP_AUTHORIZATION", "").partition("SignedHeaders=")[2].split(",")[0].split(";")
                 if h and h not in ("x-amz-date", "authorization", "x-amz-security-token")]
        headers = {h: str(environ.get("HTTP_" + h.upper().replace("-", "_"), "")) for h in names}
        if "content-type" in names:
            headers["content-type"] = str(environ.get("CONTENT_TYPE", ""))
        url = f"http://{environ.get('HTTP_HOST', 'localhost')}{environ.get('PATH_INFO', '/')}"
        request = AWSRequest(method=str(environ.get("REQUEST_METHOD", "POST")), url=url, data=body, headers=headers)
        SigV4Auth(principal.frozen(), service, region).add_auth(request)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in request.headers:
                environ["HTTP_" + name.upper().replace("-", "_")] = request.headers[name]

    def observe(self, environ: dict[str, Any], status: str, chunks: list[bytes]) -> None:
        """Record a refusal by moto's own access control (a 400/403 naming one of :data:`MOTO_REFUSALS`)."""
        if not status.startswith(("400", "403")):
            return
        text = b"".join(chunks)[:2000]
        code = next((c for c in MOTO_REFUSALS if c in text), None)
        if code is None:
            return
        call = read_call(environ, b"", self.region, {})
        part, principal = self.keys.get(call.access_key, (None, None)) if call else (None, None)
        action = call.checks[0].action if call and call.checks else "?"
        resource = str(call.checks[0].resource) if call and call.checks else "?"
        self.denials.append(Denial(time.time(), str(part or "-"), principal.name if principal else "?", action,
                                   resource, code.decode() + ": " + text.decode(errors="replace")[:200], "moto"))

    def _deny(self, call: Call, part: Any, principal: str, action: str, resource: str,
              reason: str) -> tuple[str, list[tuple[str, str]], bytes]:
        self.denials.append(Denial(time.time(), str(part), principal, action, resource, reason, "twin"))
        message = (f"User: {principal} is not authorized to perform: {action} on resource: {resource} because "
                   f"{reason}")
        if call.service == "s3":
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>{message}'
                    f"</Message></Error>").encode()
            return "403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))], body
        code = "AccessDenied" if call.service == "sqs" else "AccessDeniedException"
        body = json.dumps({"__type": code, "message": message}).encode()
        content_type = _JSON_SERVICES.get(call.service, "application/x-amz-json-1.1")
        return "400 Bad Request", [("Content-Type", content_type), ("Content-Length", str(len(body)))], body

    def summary(self) -> list[str]:
        """The report's lines: calls checked per part, then every denial."""
        parts = ", ".join(f"{p} {n}" for p, n in sorted(self.checked.items()))
        only = sum(self.action_only.values())
        lines = [f"IAM (each part signs as its synthesized role; moto's access control on): {sum(self.checked.values())} "
                 f"authorizations checked ({parts}); {only} on the action alone (resource not readable from the "
                 f"request); {len(self.denials)} denied"]
        seen: Counter[str] = Counter(d.line() for d in self.denials)
        lines += [f"  DENIED {line}" + (f" (x{n})" if n > 1 else "") for line, n in seen.most_common(20)]
        if len(seen) > 20:
            lines.append(f"  ... and {len(seen) - 20} more kinds")
        return lines
