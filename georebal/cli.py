"""Command line: ``python -m georebal <command> ...``, the operator's tools for a deployment in an AWS account.

A small dispatcher: each command is a module under :mod:`georebal.commands` whose ``add_parser(sub)`` registers
its sub-parser and sets ``func(args, connect)``; add a command by adding its module to :data:`COMMANDS`. The
installed ``georebal`` command and ``python -m georebal`` reach :func:`main` through :mod:`georebal.launch`, which
first checks what this module imports (boto3, the CDK app's settings from a checkout) and names what is missing.

Commands
--------
``preflight [--workers N] [--cdk-json PATH] [-c KEY=VALUE ...] [--region R] [--profile P]``
    The account's level quotas (Fargate vCPU, network interfaces, subnet addresses, Kinesis shards, Lambda
    concurrency, EMR Serverless vCPU or Glue DPUs) against the configured fleet, with a 2x margin.
``smoke [--events N] [--keep] [--active-timeout S] [--output-timeout S] [--poll S] [--cdk PATH] [--workdir DIR]
[--cdk-json PATH] [-c KEY=VALUE ...] [--region R] [--profile P]``
    Preflight, then deploy a tiny fleet under its own prefix, send events before any spec exists, wait for v1 and
    for every event in the output, check (none lost, the router's failure queue empty, no AccessDenied in the
    Lambdas' and workers' logs), and destroy it (unless ``--keep``), deleting the geo streams.
``locate --lat LAT --lon LON [--entity ID] [--spec FILE] [--json] [DEPLOYMENT]``
    Where the router sends an event there: partition, worker and slot, geo stream, shard and ExplicitHashKey (the
    router's own RoutingTable), in the live spec with the slot's lease holder now, or in a spec file.
``replay (SOURCE | --from ISO --to ISO) [--rate N] [--dry-run] [--progress S] [DEPLOYMENT]``
    Put events again into the ingest stream: from an archive (a file, a folder or ``s3://bucket/prefix``; JSON
    lines or Firehose's back-to-back objects; gzip'd or not) or a time range of the ingest stream itself.
``redrive [--message FILE] [--keep-messages] [--dry-run] [--max-messages N] [--rate N] [DEPLOYMENT]``
    For each message of the router's failure queue: read its shard's sequence range of the ingest stream and put
    the records back onto it; delete the message once its whole range was put.

``DEPLOYMENT`` is ``--stack NAME`` (default ``<prefix>-geo-rebalancer``; its outputs name the resources) or the names
themselves (``--control-table``, ``--specs-bucket``, ``--leases-table``, ``--ingest-stream``, ``--queue-url``), with
``--cdk-json``, ``-c``, ``--region`` and ``--profile`` (:mod:`georebal.deployment`).

Exit status
-----------
``0``
    Success (``preflight``: every quota fits; ``smoke``: every check passed).
``1``
    ``smoke``: a check failed, or the deploy did (the summary names which). ``replay``, ``redrive``: records could
    not be put after the retries; ``redrive``: a range not whole in the stream (records gone) or a message that is
    not a failure message (each named; those messages are kept).
``2``
    ``preflight``: a quota does not fit or could not be read, one line each on stderr (``smoke`` stops there too,
    before deploying). Bad input: errors of the
    package (:class:`georebal.errors.GeorebalError`: a bad cdk.json or ``-c`` setting, no region, no such stack or
    output, a point outside the events' limits, an archive or message that does not parse) and bad arguments
    print one line ``error: <message>`` on stderr, like argparse's own usage errors.
``130`` / ``141``
    Interrupted (Ctrl-C) / standard output closed early.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from georebal import __version__
from georebal.aws import Connect, connect
from georebal.commands import locate, preflight, redrive, replay, smoke
from georebal.errors import GeorebalError
from georebal.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_PIPE

__all__ = ["COMMANDS", "main", "make_parser"]

COMMANDS = (preflight, smoke, locate, replay, redrive)


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="georebal",
                                 description="Geo Rebalancer operations: look at or act on a deployment in an AWS "
                                             "account (credentials and region as for the AWS CLI).",
                                 epilog="exit status: 0 ok, 1 a smoke check failed or records not put (replay, "
                                        "redrive), 2 refused (preflight) or bad input, 130 interrupted, 141 output "
                                        "pipe closed")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None, *, aws: Connect = connect) -> int:
    """Run the CLI with the AWS session ``aws`` makes (tests pass fakes); return the exit status."""
    args = make_parser().parse_args(argv)
    try:
        status: int = args.func(args, aws)
        sys.stdout.flush()
    except GeorebalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # the reader went away (| head): stop quietly
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status
