"""``python -m georebal smoke``: deploy a tiny fleet to a sandbox account, send events, check, destroy.

What needs to be there comes first, each refusal one line (exit 2): valid settings, a region and credentials
(STS), the CDK CLI and Docker, the account's CDK bootstrap; then ``preflight`` with the smoke settings (its
refusal stops the run, nothing deployed). Then :class:`georebal.smoke.flow.Smoke`: ``cdk deploy`` of
``<prefix>-geo-rebalancer`` under a prefix of its own (``georebal-smoke-<5 hex>``, :mod:`georebal.smoke.plan`),
the probes, the waits and checks, and ``cdk destroy --force`` (unless ``--keep``). Exit 0 when every check passed,
1 when one failed.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

from georebal.aws import Connect, caller_account
from georebal.commands import preflight
from georebal.exits import EXIT_ERROR
from georebal.settings import add_settings_arguments, cdk_context, context_overrides, load_settings
from georebal.smoke.clock import Clock, SystemClock
from georebal.smoke.flow import Limits, Smoke, say_out
from georebal.smoke.plan import CDK, DEFAULT_QUALIFIER, SMOKE_CONTEXT, SmokePlan, new_prefix, smoke_context
from georebal.smoke.tools import Runner, check_bootstrap, check_tools, run_command
from infra.config import GeoConfig

QUALIFIER_KEY = "@aws-cdk/core:bootstrapQualifier"


def make_plan(args: argparse.Namespace, token: str | None = None) -> tuple[SmokePlan, GeoConfig]:
    """The plan ``args`` ask for and its settings, checked as ``cdk synth`` would (a bad one raises SettingsError);
    the prefix ``georebal-smoke-<token>`` (default: random) unless ``-c prefix=...``."""
    overrides = context_overrides(args.context)
    context = smoke_context(new_prefix(token), overrides)
    config = load_settings(args.cdk_json, context)
    root = args.cdk_json.resolve().parent
    qualifier = {**cdk_context(args.cdk_json), **overrides}.get(QUALIFIER_KEY) or DEFAULT_QUALIFIER
    workdir = args.workdir or root / "cdk.out" / f"smoke-{context['prefix']}"
    return SmokePlan(context=context, root=root, workdir=workdir.resolve(), cdk=args.cdk, profile=args.profile,
                     qualifier=str(qualifier)), config


def cmd_smoke(args: argparse.Namespace, connect: Connect, *, runner: Runner = run_command, clock: Clock | None = None,
              which: Callable[[str], str | None] = shutil.which) -> int:
    plan, config = make_plan(args)
    aws = connect(args.region, args.profile)
    account = caller_account(aws)
    check_tools(plan.root, plan.cdk, which)
    bootstrap = check_bootstrap(aws.client("ssm"), plan.qualifier, account, aws.region)
    say_out(f"account {account}, region {aws.region}, stack {plan.stack_name}; {bootstrap}; files in {plan.workdir}")
    ask = argparse.Namespace(workers=None, cdk_json=args.cdk_json, region=args.region, profile=args.profile,
                             context=[f"{key}={value}" for key, value in plan.context.items()])
    if preflight.cmd_preflight(ask, lambda region, profile: aws):
        say_out("preflight refused the smoke fleet (above): nothing was deployed")
        return EXIT_ERROR
    limits = Limits(events=args.events, active_s=args.active_timeout, output_s=args.output_timeout, poll_s=args.poll)
    return Smoke(plan=plan, aws=aws, run=runner, clock=clock or SystemClock(), limits=limits,
                 fields=config.event_fields, keep=args.keep)()


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 100,000, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``smoke`` sub-command."""
    limits = Limits()
    settings = " ".join(f"{k}={v}" for k, v in SMOKE_CONTEXT.items())
    p = sub.add_parser(
        "smoke", help="deploy a tiny fleet to a sandbox account, send events, check, destroy",
        description="Preflight, then `cdk deploy` a 2-worker fleet under its own prefix (georebal-smoke-<id>, "
                    f"settings {settings}), put --events events to the ingest stream before any spec exists, wait "
                    "for v1 to go live and for every event in the output bucket, check that none was lost, that the "
                    "router's failure queue is empty and that no Lambda or worker logged AccessDenied, then `cdk "
                    "destroy --force` and delete the geo streams. Costs about a dollar (docs/DEPLOY.md, \"Smoke test "
                    "on a sandbox account\"). Use a sandbox account: it creates and deletes real resources.",
        epilog="exit status: 0 every check passed; 1 a check (or the deploy) failed; 2 refused before deploying "
               "(no credentials or region, no CDK CLI or Docker, no CDK bootstrap, preflight) or bad input; 130 "
               "interrupted (the stack is destroyed first unless --keep)")
    p.add_argument("--events", type=_count, default=limits.events, metavar="N",
                   help=f"events to send (default {limits.events:,})")
    p.add_argument("--keep", action="store_true", help="leave the stack deployed (print how to destroy it)")
    p.add_argument("--active-timeout", type=_seconds, default=limits.active_s, metavar="S",
                   help=f"most seconds from the first event until v1 is active (default {limits.active_s:g})")
    p.add_argument("--output-timeout", type=_seconds, default=limits.output_s, metavar="S",
                   help=f"most seconds from v1 active until every event is in the output (default {limits.output_s:g})")
    p.add_argument("--poll", type=_seconds, default=limits.poll_s, metavar="S",
                   help=f"seconds between two looks (default {limits.poll_s:g})")
    p.add_argument("--cdk", type=Path, default=CDK, metavar="PATH", help=f"the CDK CLI (default {CDK})")
    p.add_argument("--workdir", type=Path, metavar="DIR",
                   help="where the outputs file and the cloud assembly go (default cdk.out/smoke-<prefix>)")
    add_settings_arguments(p)
    p.add_argument("--region", help="the region to deploy to (default: AWS_REGION / the profile's)")
    p.add_argument("--profile", help="the AWS CLI profile to use (default: the environment's credentials)")
    p.set_defaults(func=cmd_smoke)
