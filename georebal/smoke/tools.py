"""What the smoke run needs besides AWS credentials, checked before anything is deployed: the CDK CLI, a Docker
engine (``cdk deploy`` builds the worker image) and the account's CDK bootstrap; and how it runs a command
(:class:`Runner`: tests pass a recorder, no cdk runs there)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from georebal.errors import SmokeError


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> int:
        """Run ``argv`` in ``cwd`` with ``env`` over the process's environment; its exit status."""
        ...


def run_command(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> int:
    """:class:`Runner` of a real process, its output straight to this terminal."""
    return subprocess.run(list(argv), cwd=cwd, env={**os.environ, **env}, check=False).returncode


def check_tools(root: Path, cdk: Path, which: Callable[[str], str | None] = shutil.which) -> None:
    """Raise :class:`SmokeError` naming the missing tool and how to get it."""
    path = cdk if cdk.is_absolute() else root / cdk
    if not os.access(path, os.X_OK):
        raise SmokeError(f"no CDK CLI at {str(path)!r}: run `bash scripts/bootstrap.sh cdk` (the pinned CLI), or give "
                         f"--cdk PATH")
    if which("docker") is None:
        raise SmokeError("no `docker` on PATH: cdk deploy builds the worker image with a Docker engine (docs/DEPLOY.md, "
                         "Prerequisites)")


def check_bootstrap(ssm: Any, qualifier: str, account: str, region: str) -> str:
    """The CDK bootstrap version of ``account`` in ``region`` (SSM ``/cdk-bootstrap/<qualifier>/version``); raises
    :class:`SmokeError` when the account is not bootstrapped. A parameter that cannot be read (no permission) is
    not a refusal: cdk deploy says it, then. Returns what to print."""
    name = f"/cdk-bootstrap/{qualifier}/version"
    try:
        version = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        if code == "ParameterNotFound":
            raise SmokeError(f"account {account} is not bootstrapped for the CDK in {region} (no SSM parameter "
                             f"{name}): run `node_modules/.bin/cdk bootstrap aws://{account}/{region}` once") from None
        return f"CDK bootstrap not checked ({name}: {code})"
    return f"CDK bootstrap version {version} ({name})"
