"""``python -m georebal replay``: put events again into the deployment's ingest stream, at a set rate.

From an archive (``SOURCE``: a file, a folder or ``s3://bucket/prefix`` of JSON events, gzip'd or not, one per line
or back to back as Firehose writes them: :mod:`georebal.archive`), or from the ingest stream itself (``--from`` /
``--to``: every shard read from ``--from`` until a record that arrived at ``--to`` or later; ``--to`` is cut to the
moment the replay starts, so it never reads its own records: :mod:`georebal.ingest`). Puts in PutRecords batches,
paced to ``--rate``, refused records put again in per-entity order (:mod:`georebal.puts`); a progress line every few
seconds on standard error; ``--dry-run`` reads and counts only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from georebal.archive import Archive, is_s3, local_objects, s3_objects
from georebal.aws import Aws, Connect
from georebal.deployment import add_deployment_arguments, resolve
from georebal.errors import InputError, PutError
from georebal.exits import EXIT_FAILED, EXIT_OK
from georebal.ingest import TimeRange, retention_hours
from georebal.progress import EVERY_S, Progress, say_err
from georebal.puts import OutRecord, Putter, PutTotals
from georebal.settings import settings_of
from georebal.smoke.clock import Clock, SystemClock, took

Source = tuple[Iterator[OutRecord], Callable[[], float | None], str]


def cmd_replay(args: argparse.Namespace, connect: Connect, *, clock: Clock | None = None) -> int:
    clock = clock or SystemClock()
    if (args.source is None) == (args.start is None):
        raise InputError("give an archive (SOURCE: a file, a folder or s3://bucket/prefix) or --from and --to (a time "
                         "range of the ingest stream), not both")
    if args.start is not None and args.end is None:
        raise InputError("--from needs --to (the end of the time range to replay)")
    local = args.source is not None and not is_s3(args.source)
    aws = None if local and args.dry_run else connect(args.region, args.profile)
    stream = "the ingest stream" if aws is None else resolve(args, aws, ("IngestStreamName",)).name("IngestStreamName")
    records, fraction, what = (archive_source(args, aws) if args.source is not None
                               else stream_source(args, _need(aws), stream, clock))
    verb = "counted" if args.dry_run else "sent"
    progress = Progress("replay", clock, verb=verb, fraction=fraction, every_s=args.progress)
    putter = Putter(None if aws is None else aws.client("kinesis"), stream, clock, rate=args.rate,
                    dry_run=args.dry_run, progress=progress)
    pace = f" at {args.rate:,g} events/s" if args.rate else ""
    print(f"replay: {what} -> {stream!r}{pace}{' (dry run: nothing is put)' if args.dry_run else ''}", flush=True)
    try:
        for record in records:
            putter.add(record)
        totals = putter.finish()
    except PutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(summary(totals, stream, progress.elapsed(), args.dry_run))
    return EXIT_OK


def _need(aws: Aws | None) -> Aws:
    assert aws is not None  # a stream source always connects
    return aws


def archive_source(args: argparse.Namespace, aws: Aws | None) -> Source:
    fields = settings_of(args).event_fields
    objects = s3_objects(_need(aws).client("s3"), args.source) if is_s3(args.source) else local_objects(args.source)
    archive = Archive(objects, fields)

    def records() -> Iterator[OutRecord]:
        yield from archive.records()
        if archive.skipped.count:
            say_err(f"replay: warning: {archive.skipped.count:,} event(s) skipped, the first {archive.skipped.first}")

    return records(), archive.fraction, f"{len(objects):,} file(s) under {args.source!r} ({archive.total:,} bytes)"


def stream_source(args: argparse.Namespace, aws: Aws, stream: str, clock: Clock) -> Source:
    start, end = args.start.timestamp(), min(args.end.timestamp(), clock.now())
    if end <= start:
        raise InputError(f"--from {_iso(start)!r} is not before --to {_iso(end)!r} (--to is cut to now)")
    kinesis = aws.client("kinesis")
    kept_s = retention_hours(kinesis, stream) * 3600
    if start < clock.now() - kept_s:
        say_err(f"replay: warning: --from {_iso(start)} is older than the retention of {stream!r} "
                f"({kept_s // 3600} h): the records that arrived before {_iso(clock.now() - kept_s)} are gone")
    tr = TimeRange(kinesis, stream, start, end, clock)
    limit = 10_000 if args.rate is None else max(100, min(10_000, int(args.rate * 10)))
    records = (r.out(stream) for r in tr.records(limit))
    return records, tr.fraction, (f"{stream!r} records that arrived from {_iso(start)} to {_iso(end)} "
                                  f"({len(tr.shards)} shard(s))")


def summary(totals: PutTotals, stream: str, seconds: float, dry_run: bool) -> str:
    if dry_run:
        return f"replay: {totals.records:,} event(s), {totals.bytes:,} bytes, would be put to {stream!r}"
    rate = totals.records / seconds if seconds > 0 else 0.0
    return (f"replay: {totals.records:,} event(s) put to {stream!r} in {took(seconds)} ({rate:,.0f}/s), "
            f"{totals.calls:,} PutRecords call(s), {totals.retried:,} refusal(s) put again")


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instant(text: str) -> datetime:
    """An ISO 8601 time (``2026-05-16T14:00:00Z``; without a zone: UTC)."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an ISO time like 2026-05-16T14:00:00Z, got {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``replay`` sub-command."""
    p = sub.add_parser(
        "replay", help="put archived events, or a time range of the ingest stream, into the ingest stream again",
        description="Read events from an archive (a file, a folder or s3://bucket/prefix; JSON lines or JSON objects "
                    "back to back as Firehose writes them; gzip'd or not) or a time range of the ingest stream "
                    "(--from/--to), and put them into the deployment's ingest stream, each with its entity id as "
                    "partition key, at --rate events/s, in per-entity order.",
        epilog="exit status: 0 every event put (or counted); 1 records could not be put after the retries (the "
               "line says how many were put before); 2 bad input or no such deployment")
    p.add_argument("source", nargs="?", metavar="SOURCE", help="a file, a folder or s3://bucket/prefix of events")
    p.add_argument("--from", dest="start", type=instant, metavar="ISO",
                   help="replay the ingest stream's records that arrived from this time (AT_TIMESTAMP)")
    p.add_argument("--to", dest="end", type=instant, metavar="ISO", help="... until this time (not included)")
    p.add_argument("--rate", type=positive, metavar="N", help="events per second at most (default: as fast as "
                                                              "the stream takes them)")
    p.add_argument("--dry-run", action="store_true", help="read and count, put nothing")
    p.add_argument("--progress", type=positive, default=EVERY_S, metavar="S",
                   help=f"seconds between two progress lines (default {EVERY_S:g})")
    add_deployment_arguments(p, ("IngestStreamName",))
    p.set_defaults(func=cmd_replay)
