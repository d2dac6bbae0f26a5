"""Where a deployed stack's resources are: its outputs (CloudFormation ``DescribeStacks``), or names given one by one.

The commands that act on a deployment (``locate``, ``replay``, ``redrive``) take ``--stack NAME`` (default
``<prefix>-geo-rebalancer``, the stack ``app.py`` names, with the ``prefix`` of cdk.json and ``-c``, as ``preflight``
reads them) and read the outputs they need from it; a name given on the command line (``--control-table``,
``--ingest-stream``...) wins over the output, and when every name a command needs is given, no stack is asked.
The output keys are fixed (``infra/rebalancer.py``), also with the construct in a stack of your own (``--stack``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from georebal.aws import Aws
from georebal.errors import DeploymentError
from georebal.settings import add_settings_arguments, settings_of

#: The stack outputs a command may need, and the option that names each instead.
OUTPUT_OPTIONS: dict[str, tuple[str, str]] = {
    "IngestStreamName": ("--ingest-stream", "the ingest stream"),
    "ControlTable": ("--control-table", "the control table"),
    "SpecsBucket": ("--specs-bucket", "the specs bucket"),
    "LeasesTable": ("--leases-table", "the leases table"),
    "RouterFailureQueue": ("--queue-url", "the router's failure queue (its URL)"),
}
STACK_SUFFIX = "-geo-rebalancer"  # app.py: f"{config.prefix}-geo-rebalancer"


def _dest(output: str) -> str:
    return OUTPUT_OPTIONS[output][0].lstrip("-").replace("-", "_")


def add_deployment_arguments(p: argparse.ArgumentParser, outputs: Sequence[str]) -> None:
    """``--stack``, one option per output of ``outputs``, ``--cdk-json``, ``-c``, ``--region`` and ``--profile``."""
    g = p.add_argument_group("the deployment", "Names come from the stack's outputs; an option given wins.")
    g.add_argument("--stack", metavar="NAME",
                   help="the deployed stack (default: <prefix>-geo-rebalancer, prefix from cdk.json and -c)")
    for output in outputs:
        option, what = OUTPUT_OPTIONS[output]
        g.add_argument(option, dest=_dest(output), metavar="NAME" if output != "RouterFailureQueue" else "URL",
                       help=f"{what} (default: the stack output {output})")
    add_settings_arguments(p)
    p.add_argument("--region", help="the deployment's region (default: AWS_REGION / the profile's)")
    p.add_argument("--profile", help="the AWS CLI profile to use (default: the environment's credentials)")


@dataclass(frozen=True)
class Deployment:
    """The names a command needs (output key -> name) and where each came from (for messages)."""

    names: Mapping[str, str]
    origins: Mapping[str, str]

    def name(self, output: str) -> str:
        return self.names[output]

    def origin(self, output: str) -> str:
        """``--control-table`` or ``stack output ControlTable of 'x-geo-rebalancer'``."""
        return self.origins[output]


def stack_name(args: argparse.Namespace) -> str:
    """``--stack``, else ``<prefix>-geo-rebalancer`` of the settings (cdk.json and ``-c``)."""
    return str(args.stack) if args.stack else f"{settings_of(args).prefix}{STACK_SUFFIX}"


def given(args: argparse.Namespace, outputs: Sequence[str]) -> dict[str, str]:
    """The names of ``outputs`` given on the command line."""
    return {o: str(getattr(args, _dest(o))) for o in outputs if getattr(args, _dest(o), None)}


def resolve(args: argparse.Namespace, aws: Aws, outputs: Sequence[str]) -> Deployment:
    """The names of ``outputs``: those given as options, the others from the stack's outputs."""
    names = given(args, outputs)
    origins = {o: OUTPUT_OPTIONS[o][0] for o in names}
    missing = [o for o in outputs if o not in names]
    if not missing:
        return Deployment(names, origins)
    stack = stack_name(args)
    values = stack_outputs(aws.client("cloudformation"), stack, aws.region)
    absent = [o for o in missing if not values.get(o)]
    if absent:
        options = ", ".join(OUTPUT_OPTIONS[o][0] for o in absent)
        raise DeploymentError(f"stack {stack!r} has no output {', '.join(absent)} (it has: "
                              f"{', '.join(sorted(values)) or 'none'}); give {options}")
    names.update({o: values[o] for o in missing})
    origins.update({o: f"stack output {o} of {stack!r}" for o in missing})
    return Deployment(names, origins)


def stack_outputs(cloudformation: Any, stack: str, region: str) -> dict[str, str]:
    """The outputs of ``stack`` (``DescribeStacks``); :class:`DeploymentError` naming the stack when it cannot."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack).get("Stacks", [])
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if "does not exist" in str(error.get("Message", "")):
            raise DeploymentError(f"--stack {stack!r}: no such stack in {region} (give --stack, or -c prefix=... "
                                  f"as it was deployed, or name the resources: --control-table ...)") from None
        raise DeploymentError(f"--stack {stack!r}: cannot read its outputs in {region} ({error.get('Code', 'error')}: "
                              f"{error.get('Message', '')})") from None
    except BotoCoreError as exc:
        raise DeploymentError(f"--stack {stack!r}: cannot read its outputs in {region} ({exc})") from None
    if not stacks:
        raise DeploymentError(f"--stack {stack!r}: no such stack in {region}")
    return {str(o["OutputKey"]): str(o.get("OutputValue", "")) for o in stacks[0].get("Outputs", [])}


def client_error(exc: ClientError) -> str:
    """``Code: Message`` of a botocore ``ClientError``."""
    error = exc.response.get("Error", {})
    return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
