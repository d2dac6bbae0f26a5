"""``python -m partitioner build``: a spec from load per quadkey, its partition table and summary."""

from __future__ import annotations

import argparse
import dataclasses

from geokernel.partition_spec.model import Spec
from partitioner.builders import build_with_report
from partitioner.builders.registry import STRATEGIES
from partitioner.commands.args import add_quiet, add_single_zoom, count, fraction, positive, progress
from partitioner.commands.exits import EXIT_OK
from partitioner.commands.io import (
    STDIO,
    CliError,
    check_distinct,
    check_inputs,
    check_one_stdout,
    check_output,
    read_counts,
    read_spec,
    report_stream,
    write_text,
)
from partitioner.load.bound import lower_bound
from partitioner.load.counts import Counts
from partitioner.output.compare import stability
from partitioner.output.metrics import evaluate
from partitioner.output.render import render_stability, render_table

DEFAULT_MAX_WORKERS = 1000  # build refuses a --max-load that needs more workers than this (--max-workers)


def _check_version(version: int | None, previous: Spec | None, previous_path: str | None) -> None:
    if version is None:
        return
    if version < 1:
        raise CliError(f"--version {version} must be 1 or more")
    if previous is not None and version <= previous.version:
        raise CliError(f"--version {version} must be above the version of --previous {previous_path!r} "
                       f"(v{previous.version})")


def _check_workers(counts: Counts, max_load: float, max_workers: int, source: str) -> None:
    need = lower_bound(counts.total, max_load)
    if need > max_workers:
        raise CliError(f"--max-load {max_load:g} needs at least {need:,} workers for the total load "
                       f"{counts.total:,.6g} of {source} (more than --max-workers {max_workers:,}); "
                       "raise --max-load or --max-workers")


def cmd_build(args: argparse.Namespace) -> int:
    check_inputs(("COUNTS", args.counts), ("--previous", args.previous))
    check_one_stdout(("-o", args.output), ("--json", args.json))
    check_distinct(("-o", args.output), ("--json", args.json), ("COUNTS", args.counts), ("--previous", args.previous))
    for opt, path in (("-o", args.output), ("--json", args.json)):
        check_output(path, opt)
    out = report_stream(args.output, args.json)
    with progress(args, "build") as line:
        line.step(f"reading {args.counts}")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
        previous = read_spec(args.previous, "--previous") if args.previous else None
        _check_version(args.version, previous, args.previous)
        _check_workers(counts, args.max_load, args.max_workers, args.counts)
        line.step(f"building from {len(counts):,} quadkeys")
        report = build_with_report(counts, args.max_load, previous=previous, strategy=args.strategy,
                                   version=args.version, stream_name=args.stream_name, fill=args.fill)
        spec = report.spec
        line.step("measuring the spec")
        text = spec.to_json() + "\n"
        metrics = dataclasses.replace(evaluate(spec, counts), spec_bytes=len(text.encode()))
        moved = stability(previous, spec, counts) if previous is not None else None
        line.step(f"writing {args.output}")
        write_text(args.output, text)
        if args.json:
            write_text(args.json, metrics.to_json())
    print(render_table(metrics, limit=args.limit), file=out)
    print(f"Build: strategy {report.strategy}, mode {report.mode}, hot cells {report.hot_cells} "
          f"({report.hash_split_cells} split by entity hash)", file=out)
    for note in report.notes:
        print(f"note: {note}", file=out)
    for problem in report.problems:
        print(f"problem: {problem}", file=out)
    if moved is not None:
        print(render_stability(moved), file=out)
    if args.output != STDIO:
        print(f"wrote {args.output}", file=out)
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``build`` sub-command."""
    b = sub.add_parser("build", help="build a spec from COUNTS.csv", description="Build a spec from load per "
                       "quadkey and print the partition table and summary.")
    b.add_argument("counts", metavar="COUNTS.csv")
    b.add_argument("--max-load", type=positive, required=True, help="cap on each worker's load")
    b.add_argument("-o", "--output", required=True, metavar="SPEC.json", help="where to write the spec")
    b.add_argument("--previous", metavar="OLD.json", help="the live spec: keep ids sticky to it")
    b.add_argument("--fill", type=fraction, default=1.0, metavar="F",
                   help="pack workers to F x --max-load, in (0, 1] (default 1; the partitioner Lambda builds below 1: "
                        "a snapshot the local loop kept after a rejected build names its fill)")
    b.add_argument("--strategy", choices=STRATEGIES, default=STRATEGIES[0],
                   help="compact (default) or seed (the published seed algorithm, the baseline)")
    b.add_argument("--version", type=count, help="spec version (default previous + 1, or 1)")
    b.add_argument("--stream-name", help="geo stream name to record in the spec")
    b.add_argument("--json", metavar="METRICS.json", help="also write the metrics as JSON")
    b.add_argument("--limit", type=count, default=40, help="max partition/worker lines in the table (default 40)")
    b.add_argument("--max-workers", type=count, default=DEFAULT_MAX_WORKERS, metavar="N",
                   help=f"refuse a --max-load that needs more than N workers (default {DEFAULT_MAX_WORKERS})")
    add_single_zoom(b)
    add_quiet(b)
    b.set_defaults(func=cmd_build)
