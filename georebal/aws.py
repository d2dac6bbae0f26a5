"""The AWS session the commands use, behind a small protocol so tests hand in fakes (recorded responses, moto).

A command asks ``connect(region, profile)`` for an :class:`Aws` and then ``aws.client("service-quotas")``; the CLI
passes :func:`connect` (boto3), tests pass their own.
"""

from __future__ import annotations

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
    """A :class:`Session` for ``region`` and ``profile``; raises :class:`AwsError` naming what is missing."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except BotoCoreError as exc:
        raise AwsError(f"--profile {profile!r}: {exc}") from None
    if not session.region_name:
        raise AwsError("no AWS region: give --region or set AWS_REGION (the region you deploy to)")
    return Session(session)
