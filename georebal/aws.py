"""The AWS session the commands use, behind a small protocol so tests hand in fakes (recorded responses, moto).

A command asks ``connect(region, profile)`` for an :class:`Aws` and then ``aws.client("service-quotas")``; the CLI
passes :func:`connect` (boto3), tests pass their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from georebal.errors import AwsError


class Aws(Protocol):
    """An account and region to ask: ``client(name)`` is a boto3-style client of that AWS service."""

    @property
    def region(self) -> str: ...

    def client(self, service: str) -> Any: ...


#: Makes the session from ``--region`` and ``--profile`` (None: the environment's, like the AWS CLI).
Connect = Callable[[str | None, str | None], Aws]


@dataclass
class Session:
    """A boto3 session: standard retries (throttling is retried, as the AWS CLI does), one client per service."""

    session: Any
    _clients: dict[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return str(self.session.region_name)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            from botocore.config import Config

            self._clients[service] = self.session.client(service, config=Config(retries={"mode": "standard"}))
        return self._clients[service]


def connect(region: str | None, profile: str | None) -> Aws:
    """A :class:`Session` for ``region`` and ``profile``; raises :class:`AwsError` naming what is missing.

    Without ``region``: the environment's or the profile's (``AWS_DEFAULT_REGION``, the profile's ``region``), else
    ``AWS_REGION`` (which the CDK CLI and the other SDKs read, botocore not)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.Session(region_name=region, profile_name=profile)
        if not session.region_name and os.environ.get("AWS_REGION"):  # botocore reads AWS_DEFAULT_REGION only
            session = boto3.Session(region_name=os.environ["AWS_REGION"], profile_name=profile)
    except BotoCoreError as exc:
        raise AwsError(f"--profile {profile!r}: {exc}") from None
    if not session.region_name:
        raise AwsError("no AWS region: give --region or set AWS_REGION (the region you deploy to)")
    return Session(session)


def caller_account(aws: Aws) -> str:
    """The account ``aws``'s credentials belong to (STS ``GetCallerIdentity``, what ``aws sts get-caller-identity``
    asks); raises :class:`AwsError` naming what is missing: credentials, valid ones, or a way to reach STS."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        return str(aws.client("sts").get_caller_identity()["Account"])
    except NoCredentialsError:
        raise AwsError("no AWS credentials: set AWS_PROFILE (or --profile) or AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY for a sandbox account, as for the AWS CLI (`aws sts "
                       "get-caller-identity` must work)") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AwsError(f"the AWS credentials were refused by STS in {aws.region} ({error.get('Code', 'error')}: "
                       f"{error.get('Message', '')}); renew them (`aws sts get-caller-identity` must work)") from None
    except BotoCoreError as exc:
        raise AwsError(f"cannot ask STS who the credentials are in {aws.region} ({exc})") from None
