"""local.iam.policy: IAM's evaluation of identity statements (explicit deny, allow, implicit deny, conditions)."""

from __future__ import annotations

import pytest

from local.iam.policy import PolicyError, Statement, evaluate, matches, statements_of

STREAMS = "arn:aws:kinesis:us-east-1:123456789012:stream/georebal-geo-v*"


def _allow(actions: list[str] | str, resources: list[str] | str, **extra: object) -> dict[str, object]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources, **extra}


def test_wildcards_match_actions_without_case_and_resources_with_case() -> None:
    # GIVEN IAM's wildcards WHEN matched THEN * spans any run (slashes included), ? one character, and only actions
    # ignore case
    assert matches("kinesis:Put*", "KINESIS:PutRecords", case_sensitive=False)
    assert matches(STREAMS, "arn:aws:kinesis:us-east-1:123456789012:stream/georebal-geo-v12")
    assert not matches(STREAMS, "arn:aws:kinesis:us-east-1:123456789012:stream/GEOREBAL-geo-v12")
    assert matches("arn:aws:s3:::b/*", "arn:aws:s3:::b/specs/v1.json") and matches("v?", "v1")
    assert matches("a[1]", "a[1]")  # brackets are literal in IAM, not a character class


def test_an_allow_on_the_resource_allows_and_anything_else_is_denied_with_the_reason() -> None:
    # GIVEN a role allowed to write the geo streams
    role = statements_of([{"Statement": [_allow(["kinesis:PutRecords", "kinesis:ListShards"], STREAMS)]}])
    # WHEN a put to a geo stream, a put elsewhere and an account-level action are evaluated
    ok = evaluate(role, "kinesis:PutRecords", STREAMS.replace("*", "3"))
    elsewhere = evaluate(role, "kinesis:PutRecords", "arn:aws:kinesis:us-east-1:123456789012:stream/other")
    account = evaluate(role, "kinesis:DescribeLimits", "*")
    # THEN only the first is allowed, and each refusal says whether the action was granted on another resource
    assert ok.allowed and not elsewhere.allowed and not account.allowed
    assert "on this resource" in elsewhere.reason and account.reason == "no identity-based policy allows the action"


def test_an_explicit_deny_wins_over_any_allow() -> None:
    # GIVEN an allow of every S3 action and a deny of deletes
    role = statements_of([_allow("s3:*", "*"), {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"}])
    # WHEN a delete and a put are evaluated THEN the delete is denied explicitly and the put allowed
    assert not evaluate(role, "s3:DeleteObject", "arn:aws:s3:::b/k").allowed
    assert "explicitly denied" in evaluate(role, "s3:DeleteObject", "arn:aws:s3:::b/k").reason
    assert evaluate(role, "s3:PutObject", "arn:aws:s3:::b/k").allowed


def test_not_action_and_not_resource_invert_their_match() -> None:
    # GIVEN an allow of everything but IAM actions, on everything but one bucket
    role = statements_of([{"Effect": "Allow", "NotAction": "iam:*", "NotResource": "arn:aws:s3:::secret/*"}])
    # THEN a read elsewhere is allowed; an IAM action or the excluded bucket are not
    assert evaluate(role, "s3:GetObject", "arn:aws:s3:::b/k").allowed
    assert not evaluate(role, "iam:PassRole", "arn:aws:iam::1:role/r").allowed
    assert not evaluate(role, "s3:GetObject", "arn:aws:s3:::secret/k").allowed


def test_conditions_need_their_keys_unless_if_exists_and_unknown_operators_are_not_guessed() -> None:
    # GIVEN PassRole allowed only to ECS tasks, and a statement with an operator the twin does not evaluate
    cond = {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
    role = statements_of([_allow("iam:PassRole", "*", Condition=cond)])
    odd = statements_of([_allow("s3:GetObject", "*", Condition={"NumericLessThan": {"s3:max-keys": "10"}})])
    lax = statements_of([_allow("s3:GetObject", "*", Condition={"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}})])
    # WHEN evaluated with and without the key THEN the key decides, IfExists passes without it, and the odd
    # operator is named instead of guessed
    assert evaluate(role, "iam:PassRole", "r", {"iam:PassedToService": "ecs-tasks.amazonaws.com"}).allowed
    assert not evaluate(role, "iam:PassRole", "r", {"iam:PassedToService": "lambda.amazonaws.com"}).allowed
    assert "no such key" in evaluate(role, "iam:PassRole", "r").reason
    assert evaluate(lax, "s3:GetObject", "x").allowed
    assert "not evaluated by the twin" in evaluate(odd, "s3:GetObject", "x").reason


@pytest.mark.parametrize("bad", [{"Effect": "Maybe", "Action": "s3:*", "Resource": "*"},
                                 {"Effect": "Allow", "Action": "s3:*"},
                                 {"Effect": "Allow", "Action": 3, "Resource": "*"}])
def test_a_malformed_statement_is_refused_naming_the_bad_value(bad: dict[str, object]) -> None:
    # GIVEN a statement with a bad effect, no resource, or a non-string action WHEN read THEN it is refused
    with pytest.raises(PolicyError):
        Statement.from_json(bad)
