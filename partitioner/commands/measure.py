"""``python -m partitioner evaluate`` and ``diff``: a spec measured under a load, two specs compared."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from geokernel.partition_spec.model import Spec
from partitioner.commands.args import add_quiet, add_single_zoom, count, progress
from partitioner.commands.exits import EXIT_DIFFERENT, EXIT_OK
from partitioner.commands.io import (
    STDIO,
    check_inputs,
    check_output,
    read_counts,
    read_spec,
    report_stream,
    write_text,
)
from partitioner.load.counts import Counts
from partitioner.output.compare import spec_diff, stability
from partitioner.output.metrics import evaluate
from partitioner.output.render import render_stability, render_table


def cmd_evaluate(args: argparse.Namespace) -> int:
    check_inputs(("COUNTS", args.counts), ("SPEC", args.spec))
    check_output(args.json, "--json")
    out = report_stream(args.json)
    with progress(args, "evaluate") as line:
        line.step(f"reading {args.counts}")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
        line.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        line.step("measuring the spec")
        metrics = dataclasses.replace(evaluate(spec, counts), spec_bytes=len((spec.to_json() + "\n").encode()))
        if args.json:
            write_text(args.json, metrics.to_json())
    print(render_table(metrics, limit=args.limit), file=out)
    if args.json and args.json != STDIO:
        print(f"wrote {args.json}", file=out)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    check_inputs(("OLD", args.old), ("NEW", args.new), ("--counts", args.counts))
    with progress(args, "diff") as line:
        line.step("reading the specs")
        old, new = read_spec(args.old, "OLD"), read_spec(args.new, "NEW")
        d = spec_diff(old, new)
        line.step("measuring moved load")
        counts = read_counts(args.counts, "--counts", single_zoom=args.single_zoom) if args.counts \
            else _spec_load_counts(old)
        moved = stability(old, new, counts)
    print(render_stability(moved, d))
    if not args.counts:
        print("(moved load estimated from the old spec's recorded loads; pass --counts COUNTS.csv for the "
              "current load)")
    same = not (d.added or d.removed or d.changed or d.workers_added or d.workers_removed)
    return EXIT_OK if same else EXIT_DIFFERENT


def _spec_load_counts(spec: Spec) -> Counts:
    """Counts that put each partition's recorded load on its listed cells (evenly), for diff without counts."""
    acc: dict[str, float] = {}
    for p in spec.partitions:
        cells = [q for q in p.quadkeys if q]
        for q in cells:
            acc[q] = acc.get(q, 0.0) + p.load / len(cells)
    if not acc:
        return Counts(("0",), np.zeros(1), f"spec v{spec.version} loads")
    zoom = max(len(q) for q in acc)
    # spread coarse cells' load over one representative descendant so every row shares one zoom
    rows: dict[str, float] = {}
    for q, w in acc.items():
        key = q + "0" * (zoom - len(q))
        rows[key] = rows.get(key, 0.0) + w
    return Counts(tuple(rows), np.array(list(rows.values()), dtype=np.float64), f"spec v{spec.version} loads")


def add_evaluate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``evaluate`` sub-command."""
    e = sub.add_parser("evaluate", help="measure a spec under a load",
                       description="Attribute COUNTS.csv to SPEC.json and print the table (planned -> actual "
                                   "when the load differs from the spec's) and metrics.")
    e.add_argument("counts", metavar="COUNTS.csv")
    e.add_argument("spec", metavar="SPEC.json")
    e.add_argument("--json", metavar="METRICS.json", help="write the metrics as JSON ('-' for stdout)")
    e.add_argument("--limit", type=count, default=40, help="max partition/worker lines in the table (default 40)")
    add_single_zoom(e)
    add_quiet(e)
    e.set_defaults(func=cmd_evaluate)


def add_diff(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``diff`` sub-command."""
    d = sub.add_parser("diff", help="compare two specs", description="Partition ids added/removed/changed and "
                       "the load that keeps its partition and worker.",
                       epilog="exit status: 0 same partitions and workers, 1 the specs differ, 2 bad input")
    d.add_argument("old", metavar="OLD.json")
    d.add_argument("new", metavar="NEW.json")
    d.add_argument("--counts", metavar="COUNTS.csv", help="measure moved load under this load")
    add_single_zoom(d)
    add_quiet(d)
    d.set_defaults(func=cmd_diff)
