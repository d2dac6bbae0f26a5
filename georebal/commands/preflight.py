"""``python -m georebal preflight``: the account's level quotas against the configured fleet, before a deploy.

Reads the deployment's settings (cdk.json and ``-c``, :mod:`georebal.settings`), takes the fleet size from
``--workers`` (default: ``fleet_workers``), computes what that fleet needs of every level quota
(:func:`geokernel.aws_budget.levels.needs`), reads the account's applied values (:mod:`georebal.account`) and prints
one row per quota: the need outside swaps and at the peak, twice the peak (the margin asked for), the account's
value, what is already in use, the margin and the verdict.

Exit status 0 when every quota fits with the 2x margin; 2 otherwise, with one line per failing quota on standard
error naming the quota, the need, the account's value and what to change (the quota's code, the cdk.json settings).
"""

from __future__ import annotations

import argparse
import math
import sys

from geokernel.aws_budget.levels import LEVEL_BY_KEY, Verdict, needs, number, verdicts
from geokernel.aws_budget.report import MIN_MARGIN
from georebal.account import read_account
from georebal.aws import Connect
from georebal.errors import SettingsError
from georebal.exits import EXIT_ERROR, EXIT_OK
from georebal.fleet import describe, fleet_of
from georebal.settings import add_settings_arguments, settings_of
from infra.config import NEW_TABLE_READS, NEW_TABLE_WRITES, GeoConfig
from infra.fleet_size import warm_for

HEADER = ("quota", "unit", "need", "peak", f"x{MIN_MARGIN:g}", "account", "in use", "margin", "verdict", "read from")


def cmd_preflight(args: argparse.Namespace, connect: Connect) -> int:
    config = settings_of(args)
    workers = args.workers or config.fleet_workers
    if not workers:
        raise SettingsError("no fleet size: give --workers N, or set fleet_workers in cdk.json (the worker slots "
                            "the deployment is sized for)")
    fleet = fleet_of(config, workers)
    aws = connect(args.region, args.profile)
    rows = verdicts(fleet, read_account(aws, config, [LEVEL_BY_KEY[key] for key in needs(fleet)]))
    print(f"preflight: {describe(config, workers)}; region {aws.region}")
    print(table(rows))
    for line in notes(config, workers):
        print(f"note: {line}")
    failing = [v for v in rows if not v.fits]
    for verdict in failing:
        print(f"error: {verdict.refusal()}", file=sys.stderr)
    if failing:
        print(f"preflight: {len(failing)} of {len(rows)} quotas do not fit {workers:,} workers with a "
              f"{MIN_MARGIN:g}x margin (or could not be read)", file=sys.stderr)
        return EXIT_ERROR
    print(f"preflight: every quota fits {workers:,} workers with a {MIN_MARGIN:g}x margin")
    return EXIT_OK


def cells(v: Verdict) -> tuple[str, ...]:
    """One table row."""
    n, h, margin = v.need, v.have, v.margin
    shown = "-" if margin is None or math.isinf(margin) else f"{margin:.2f}x"
    verdict = "ok" if v.fits else ("NOT READ" if margin is None else "TOO LOW")
    account = "?" if h.value is None else f"{number(h.value)} {h.source}"
    via = h.via if h.value is not None else f"{h.via}: {h.error}"
    return (v.quota.title, v.quota.unit.value, number(n.steady), number(n.peak), number(MIN_MARGIN * n.peak), account,
            number(h.used) if h.used else "-", shown, verdict, via)


def table(rows: tuple[Verdict, ...]) -> str:
    """The verdicts as an aligned text table (numbers right-aligned)."""
    lines = [HEADER, *(cells(v) for v in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER) - 1)]
    right = {2, 3, 4, 6, 7}
    out = []
    for line in lines:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths, strict=False))]
        out.append("  ".join([*parts, line[-1]]).rstrip())
    return "\n".join(out)


def notes(config: GeoConfig, workers: int) -> list[str]:
    """What else the operator should know: a leases table warmed for fewer workers than checked."""
    writes, reads = warm_for(workers, NEW_TABLE_WRITES, NEW_TABLE_READS)
    if config.leases_warm_writes >= writes and config.leases_warm_reads >= reads:
        return []
    have = (f"{config.leases_warm_writes:,} write / {config.leases_warm_reads:,} read units/s"
            if config.leases_warm_writes or config.leases_warm_reads else "not pre-warmed (a new table's 4,000 / 12,000)")
    return [f"the leases table is {have}; {workers:,} workers need {max(writes, NEW_TABLE_WRITES):,} / "
            f"{max(reads, NEW_TABLE_READS):,} for a {MIN_MARGIN:g}x margin (infra/fleet_size.py): set "
            f"fleet_workers={workers} in cdk.json (or leases_warm_writes / leases_warm_reads)"]


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of workers, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``preflight`` sub-command."""
    p = sub.add_parser(
        "preflight", help="check the account's level quotas for the configured fleet",
        description="Read the account's applied quotas (Service Quotas, Kinesis DescribeLimits, Lambda "
                    "GetAccountSettings, EC2 subnets with vpc_id) and check the fleet cdk.json configures at --workers "
                    f"worker slots against each, with a {MIN_MARGIN:g}x margin over its peak (a swap or a code rollout "
                    "runs two fleets).",
        epilog="exit status: 0 every quota fits; 2 a quota does not fit or could not be read (one line each on "
               "stderr, naming the quota and the setting to change), or bad input")
    p.add_argument("--workers", type=positive, metavar="N",
                   help="the fleet size to check, in worker slots (default: fleet_workers of cdk.json)")
    add_settings_arguments(p)
    p.add_argument("--region", help="the region to deploy to (default: AWS_REGION / the profile's)")
    p.add_argument("--profile", help="the AWS CLI profile to use (default: the environment's credentials)")
    p.set_defaults(func=cmd_preflight)
