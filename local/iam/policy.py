"""IAM's evaluation of identity policies, for the twin: does a role's policy allow one action on one resource?

:func:`evaluate` follows IAM's policy evaluation logic for one principal's identity-based statements
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html): an explicit ``Deny``
that matches wins; else an ``Allow`` that matches allows; else the request is implicitly denied. A statement
matches when its ``Action`` (or ``NotAction``) matches the action, its ``Resource`` (or ``NotResource``) matches
the resource and each of its conditions holds.

Notes
-----
* Actions match case-insensitively, resources case-sensitively; ``*`` matches any run of characters and ``?`` one
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html).
* Conditions: the ``String*``, ``Arn*`` and ``Bool`` operators, with ``...IfExists``. A key the request's context
  does not hold makes the condition false (``IfExists``: true), as in IAM; an operator not listed here is not
  guessed: the statement does not match and :attr:`Decision.reason` names the operator.
* Resource-based policies, permission boundaries, SCPs and session policies are not evaluated: the stack sets none
  on the parts' roles.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from local.errors import LocalRunError


class PolicyError(LocalRunError, ValueError):
    """A policy statement is malformed; the message names the bad value."""


class Effect(StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


@lru_cache(maxsize=4096)
def _pattern(text: str, case_sensitive: bool) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(text), 0 if case_sensitive else re.IGNORECASE)


def matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM's wildcard match: ``*`` any run of characters, ``?`` one; nothing else is special."""
    escaped = pattern.replace("[", "[[]")
    return _pattern(escaped, case_sensitive).fullmatch(value) is not None


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PolicyError(f"a statement's {what} must be a string or a list of strings, got {value!r}")


@dataclass(frozen=True)
class Statement:
    """One statement of an identity policy."""

    effect: Effect
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_action: bool = False
    not_resource: bool = False
    conditions: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    sid: str = ""

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Statement:
        try:
            effect = Effect(str(doc.get("Effect")))
        except ValueError:
            raise PolicyError(f"a statement's Effect must be 'Allow' or 'Deny', got {doc.get('Effect')!r}") from None
        action_key = "NotAction" if "NotAction" in doc else "Action"
        resource_key = "NotResource" if "NotResource" in doc else "Resource"
        if action_key not in doc or resource_key not in doc:
            raise PolicyError(f"an identity statement needs Action and Resource, got keys {sorted(doc)!r}")
        conditions = {op: {k: _strings(v, f"condition {op}.{k}") for k, v in keys.items()}
                      for op, keys in dict(doc.get("Condition", {})).items()}
        return cls(effect, _strings(doc[action_key], action_key), _strings(doc[resource_key], resource_key),
                   action_key == "NotAction", resource_key == "NotResource", conditions, str(doc.get("Sid", "")))

    def covers(self, action: str, resource: str) -> bool:
        """Does the statement apply to this action and resource (conditions aside)?"""
        hit_action = any(matches(a, action, case_sensitive=False) for a in self.actions)
        hit_resource = any(matches(r, resource) for r in self.resources)
        return hit_action != self.not_action and hit_resource != self.not_resource

    def covers_action(self, action: str) -> bool:
        return any(matches(a, action, case_sensitive=False) for a in self.actions) != self.not_action


@dataclass(frozen=True)
class Decision:
    """The outcome of one evaluation: allowed or not, and why (the matching statement or what was missing)."""

    allowed: bool
    reason: str


_OPERATORS = {
    "StringEquals": lambda want, got: got in want,
    "StringNotEquals": lambda want, got: got not in want,
    "StringEqualsIgnoreCase": lambda want, got: got.lower() in {w.lower() for w in want},
    "StringLike": lambda want, got: any(matches(w, got) for w in want),
    "StringNotLike": lambda want, got: not any(matches(w, got) for w in want),
    "ArnEquals": lambda want, got: got in want,
    "ArnLike": lambda want, got: any(matches(w, got) for w in want),
    "ArnNotEquals": lambda want, got: got not in want,
    "ArnNotLike": lambda want, got: not any(matches(w, got) for w in want),
    "Bool": lambda want, got: got.lower() in {w.lower() for w in want},
}


def conditions_hold(statement: Statement, context: Mapping[str, str]) -> tuple[bool, str]:
    """(every condition holds, why not) for a request whose condition keys are ``context``."""
    for op, keys in statement.conditions.items():
        base = op.removesuffix("IfExists")
        test = _OPERATORS.get(base)
        if test is None:
            return False, f"condition operator {op!r} is not evaluated by the twin"
        for key, want in keys.items():
            got = context.get(key)
            if got is None:
                if op.endswith("IfExists"):
                    continue
                return False, f"condition {op} on {key!r}: the request has no such key"
            if not test(want, got):
                return False, f"condition {op} {key!r} = {got!r}, not {list(want)!r}"
    return True, ""


def evaluate(statements: Sequence[Statement], action: str, resource: str,
             context: Mapping[str, str] | None = None) -> Decision:
    """Allow or deny ``action`` on ``resource`` under ``statements`` (see the module docstring)."""
    ctx = context or {}
    allowed_by: Statement | None = None
    near: list[str] = []
    for st in statements:
        if not st.covers(action, resource):
            continue
        holds, why = conditions_hold(st, ctx)
        if not holds:
            near.append(why)
            continue
        if st.effect is Effect.DENY:
            return Decision(False, f"explicitly denied by statement {st.sid or st.actions!r}")
        allowed_by = allowed_by or st
    if allowed_by is not None:
        return Decision(True, f"allowed by statement {allowed_by.sid or list(allowed_by.actions)!r}")
    if near:
        return Decision(False, f"no statement allows it: {near[0]}")
    on_other = any(st.effect is Effect.ALLOW and st.covers_action(action) for st in statements)
    return Decision(False, "no identity-based policy allows the action on this resource" if on_other else
                    "no identity-based policy allows the action")


def statements_of(documents: Iterable[Mapping[str, Any]]) -> tuple[Statement, ...]:
    """Every statement of policy documents (``{"Statement": [...]}``) or of bare statement mappings."""
    out: list[Statement] = []
    for doc in documents:
        raw = doc.get("Statement", doc) if isinstance(doc, Mapping) else doc
        for st in raw if isinstance(raw, list) else [raw]:
            out.append(Statement.from_json(st))
    return tuple(out)
