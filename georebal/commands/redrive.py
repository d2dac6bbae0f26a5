"""``python -m georebal redrive``: put the records of the router's failed batches back onto the ingest stream.

Takes the failure messages from the router's failure queue (``RouterFailureQueue``; each received kept invisible
``--visibility`` seconds while it is redriven) or from a file (``--message FILE``: message bodies), and for each
reads its range of the ingest stream and puts the records again (:mod:`georebal.redriving`); a message is deleted
only once its whole range was read and put (not with ``--keep-messages``, ``--dry-run`` or a file). One line per
message with the records redriven; a warning naming the message when its range is older than the stream's
retention or not whole. Stops at the first put that fails after the retries (that message and the later ones stay).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from georebal.aws import Connect
from georebal.commands.replay import positive
from georebal.deployment import add_deployment_arguments, resolve
from georebal.errors import PutError
from georebal.exits import EXIT_FAILED, EXIT_OK
from georebal.failures import FailureMessage, Unreadable, delete, from_file, receive
from georebal.progress import say_err
from georebal.redriving import Outcome, Redriver
from georebal.smoke.clock import Clock, SystemClock

VISIBILITY_S = 900
WAIT_S = 2


def cmd_redrive(args: argparse.Namespace, connect: Connect, *, clock: Clock | None = None) -> int:
    aws = connect(args.region, args.profile)
    queue = None if args.message else resolve(args, aws, ("RouterFailureQueue",)).name("RouterFailureQueue")
    sqs = None if queue is None else aws.client("sqs")
    redriver = Redriver(aws.client("kinesis"), clock or SystemClock(), lambda line: say_err(f"warning: {line}"),
                        rate=args.rate, dry_run=args.dry_run)
    messages = from_file(args.message) if args.message else queue_messages(sqs, str(queue), args)
    done: list[Outcome] = []
    bad = 0
    for message in messages:
        if isinstance(message, Unreadable):
            say_err(f"warning: message {message.message_id}: not redriven, kept: {message.why}")
            bad += 1
            continue
        try:
            outcome = redriver.redrive(message)
        except PutError as exc:
            print(f"error: message {message.message_id}: {exc}; stopped: it and the later messages are kept",
                  file=sys.stderr)
            return EXIT_FAILED
        deleted = outcome.complete and not (args.keep_messages or args.dry_run) and message.receipt is not None
        if deleted:
            delete(sqs, str(queue), message)
        print(line(outcome, deleted, args.dry_run), flush=True)
        done.append(outcome)
    print(summary(done, bad, queue or str(args.message)))
    return EXIT_OK if all(o.complete for o in done) and not bad else EXIT_FAILED


def queue_messages(sqs: Any, queue: str, args: argparse.Namespace) -> Iterator[FailureMessage | Unreadable]:
    """The queue's messages one at a time, until none comes, one comes again (its visibility ran out: every message
    was seen) or ``--max-messages``."""
    seen: set[str] = set()
    while args.max_messages is None or len(seen) < args.max_messages:
        got = receive(sqs, queue, visibility_s=args.visibility, wait_s=args.wait)
        if not got or got[0].message_id in seen:
            return
        seen.add(got[0].message_id)
        yield got[0]


def line(outcome: Outcome, deleted: bool, dry_run: bool) -> str:
    m = outcome.message
    verb = "would be redriven" if dry_run else "redriven"
    kept = "deleted" if deleted else ("kept (not whole)" if not outcome.complete else "kept")
    return f"message {m.message_id}: {m.range}: {outcome.records:,} record(s) {verb} to {m.stream!r}, {kept}"


def summary(done: list[Outcome], bad: int, where: str) -> str:
    if not done and not bad:
        return f"redrive: no message in {where}"
    whole = sum(o.complete for o in done)
    unread = f", {bad} unreadable (kept)" if bad else ""
    return (f"redrive: {len(done) + bad} message(s) from {where}: {sum(o.records for o in done):,} record(s) "
            f"redriven; {whole} whole, {len(done) - whole} not whole (kept){unread}")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``redrive`` sub-command."""
    p = sub.add_parser(
        "redrive",
        help="put the records of the router's failed batches (its failure queue) back onto the ingest stream",
        description="For each message of the router's failure queue (or of --message FILE): read its shard's "
                    "records from startSequenceNumber to endSequenceNumber and put them back onto the ingest stream "
                    "(same data and partition key, in order); then delete the message, only once every record of "
                    "its range was put. Warns, naming the message, when its range is older than the stream's "
                    "retention (the records are gone).",
        epilog="exit status: 0 every message redriven whole (or none); 1 a range not whole (records gone), a message "
               "that is not a failure message, or puts that failed after the retries; 2 bad input or no such "
               "deployment")
    p.add_argument("--message", type=Path, metavar="FILE",
                   help="redrive the message bodies in FILE (JSON; several back to back, one per line or a list) "
                        "instead of the queue's")
    p.add_argument("--keep-messages", action="store_true", help="leave the messages in the queue")
    p.add_argument("--dry-run", action="store_true", help="read the ranges and count, put and delete nothing")
    p.add_argument("--max-messages", type=_count, metavar="N", help="redrive at most N messages of the queue")
    p.add_argument("--rate", type=positive, metavar="N", help="records per second at most (default: no limit)")
    p.add_argument("--visibility", type=_count, default=VISIBILITY_S, metavar="S",
                   help=f"seconds a received message stays invisible while redriven (default {VISIBILITY_S})")
    p.add_argument("--wait", type=_count, default=WAIT_S, metavar="S",
                   help=f"seconds to wait for a message before the queue counts as empty (default {WAIT_S})")
    add_deployment_arguments(p, ("RouterFailureQueue",))
    p.set_defaults(func=cmd_redrive)
