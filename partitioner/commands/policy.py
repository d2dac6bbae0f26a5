"""``python -m partitioner policy``: would the rebalance policy publish the candidate spec, and why."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from partitioner.commands.args import add_quiet, add_single_zoom, when
from partitioner.commands.exits import EXIT_OK, EXIT_REDEPLOY
from partitioner.commands.io import (
    check_inputs,
    check_output,
    read_counts,
    read_spec,
    report_stream,
    write_text,
)
from partitioner.output.metrics import evaluate
from partitioner.output.render import summary_line


def cmd_policy(args: argparse.Namespace) -> int:
    from partitioner.control.policy import RebalancePolicy

    check_inputs(("CURRENT", args.current), ("CANDIDATE", args.candidate), ("COUNTS", args.counts))
    check_output(args.json, "--json")
    out = report_stream(args.json)
    policy = RebalancePolicy.from_json(args.policy, where="--policy")
    now = when(args.now, "--now") or datetime.now(UTC)
    last = when(args.last_published, "--last-published")
    current, candidate = read_spec(args.current, "CURRENT"), read_spec(args.candidate, "CANDIDATE")
    counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
    decision = policy.decide(current, candidate, counts, now, last)
    print(decision.render(), file=out)
    print("current:   " + summary_line(evaluate(current, counts)).replace("\n", "\n           "), file=out)
    print("candidate: " + summary_line(evaluate(candidate, counts)).replace("\n", "\n           "), file=out)
    if args.json:
        write_text(args.json, json.dumps(decision.to_dict(), indent=1) + "\n")
    return EXIT_REDEPLOY if decision.redeploy else EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``policy`` sub-command."""
    q = sub.add_parser("policy", help="would the policy redeploy?", description="Decide whether CANDIDATE "
                       "should replace CURRENT under the load COUNTS.csv, and why.",
                       epilog="exit status: 0 keep the current spec, 3 redeploy (publish the candidate), 2 bad input")
    q.add_argument("current", metavar="CURRENT.json")
    q.add_argument("candidate", metavar="CANDIDATE.json")
    q.add_argument("counts", metavar="COUNTS.csv")
    q.add_argument("--policy", metavar="JSON", help='thresholds as JSON, e.g. \'{"high_watermark": 0.85}\'')
    q.add_argument("--last-published", metavar="ISO", help="when the current spec was published")
    q.add_argument("--now", metavar="ISO", help="decision time (default: now, UTC)")
    q.add_argument("--json", metavar="DECISION.json", help="also write the decision as JSON ('-' for stdout)")
    add_single_zoom(q)
    add_quiet(q)
    q.set_defaults(func=cmd_policy)
