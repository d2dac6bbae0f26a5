"""Command line: ``python -m partitioner <command> ...`` (no AWS access needed).

Commands
--------
``build COUNTS.csv --max-load N -o spec.json [--previous old.json] [--strategy compact|seed] [--version N]``
    Build a spec from load per quadkey; print the partition table and summary.
``evaluate COUNTS.csv spec.json [--json metrics.json]``
    Measure a spec under a load (an old spec under new load shows the mismatch).
``diff old.json new.json [--counts COUNTS.csv]``
    Partition ids added / removed / changed; with counts, the load that keeps its
    partition and worker and the load that moves.
``geojson spec.json [-o out.geojson] [--counts COUNTS.csv]``
    The spec as a GeoJSON FeatureCollection (stdout without ``-o``).
``plot spec.json [COUNTS.csv] -o map.png [--mismatch bars.png]``
    Partition map with utilisation bars (PNG); with counts, a heat underlay.
``policy current.json candidate.json COUNTS.csv [--policy JSON] [--last-published ISO] [--now ISO]``
    Would the rebalance policy publish the candidate? Prints the reasons.
``simulate WINDOWS [--max-load N] [--window-s S] [--latency-s L] [--strategies a,b] [--json OUT] [--plot OUT.png]``
    Replay a day of windows (a directory of counts CSVs or a built-in scenario) through the
    control loop and compare strategies against the floor (:mod:`partitioner.simulate`).
``demo [--out DIR] [--max-load N]``
    The partitioner on the bundled sample (``partitioner/data/sample_counts.csv``):
    prints the table and writes ``spec.json``, ``spec.geojson`` and ``map.png``.

Conventions
-----------
* ``-`` as an input reads standard input (one input per command); ``-o -`` / ``--json -`` write
  standard output, and the human-readable report then goes to standard error, so stdout holds
  only the data asked for (:mod:`partitioner.cliio`).
* Every argument and output path is checked before work starts; files are written atomically.
* ``-q`` turns the progress line off; ``-v`` prints each step with its time on standard error.
* ``--version`` prints the package version. A closed pipe (``| head``) and Ctrl-C end the
  command quietly (exit 141 and 130, no traceback).

Exit status
-----------
``0``
    Success; ``diff``: the specs list the same partitions; ``policy``: keep the current spec.
``1``
    ``diff`` only: the specs differ (partitions or workers added, removed or changed).
``2``
    Bad input: errors from the library (:class:`partitioner.errors.PartitionerError`: bad
    quadkey, negative or NaN weight, mixed zooms with ``--single-zoom``, empty file, invalid
    spec) and bad arguments print one line ``error: <message naming the value and where it came
    from>`` on stderr, like argparse's own usage errors, and write nothing.
``3``
    ``policy`` only: the policy would redeploy (publish the candidate).
``130`` / ``141``
    Interrupted (Ctrl-C) / standard output closed early.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from partitioner import __version__
from partitioner.cliio import (
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
    write_via,
)
from partitioner.counts import Counts, read_counts_csv
from partitioner.errors import PartitionerError
from partitioner.metrics import evaluate, spec_diff, stability
from partitioner.progress import Progress
from partitioner.render import render_stability, render_table, summary_line
from partitioner.spec import Spec

SAMPLE_COUNTS = Path(__file__).resolve().parent / "data" / "sample_counts.csv"
DEMO_MAX_LOAD = 2500.0  # the seed's cap; the sample holds ~29.5k events (lower bound 12)
DEFAULT_MAX_WORKERS = 1000  # build refuses a --max-load that needs more workers than this (--max-workers)
EXIT_OK = 0
EXIT_DIFFERENT = 1  # diff: the specs differ
EXIT_ERROR = 2
EXIT_REDEPLOY = 3  # policy: the candidate would be published
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_PIPE = 141  # 128 + SIGPIPE

__all__ = ["EXIT_DIFFERENT", "EXIT_ERROR", "EXIT_OK", "EXIT_REDEPLOY", "CliError", "main", "make_parser", "run"]


def _progress(args: argparse.Namespace, label: str) -> Progress:
    return Progress(label, quiet=args.quiet, verbose=args.verbose)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return v


def _count(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return v


def _when(text: str | None, what: str) -> datetime | None:
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"{what} {text!r} is not an ISO-8601 timestamp") from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _check_version(version: int | None, previous: Spec | None, previous_path: str | None) -> None:
    if version is None:
        return
    if version < 1:
        raise CliError(f"--version {version} must be 1 or more")
    if previous is not None and version <= previous.version:
        raise CliError(f"--version {version} must be above the version of --previous {previous_path!r} "
                       f"(v{previous.version})")


def _check_workers(counts: Counts, max_load: float, max_workers: int, source: str) -> None:
    from partitioner.build import lower_bound

    need = lower_bound(counts.total, max_load)
    if need > max_workers:
        raise CliError(f"--max-load {max_load:g} needs at least {need:,} workers for the total load "
                       f"{counts.total:,.6g} of {source} (more than --max-workers {max_workers:,}); "
                       "raise --max-load or --max-workers")


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> int:
    from partitioner.build import build_with_report

    check_inputs(("COUNTS", args.counts), ("--previous", args.previous))
    check_one_stdout(("-o", args.output), ("--json", args.json))
    check_distinct(("-o", args.output), ("--json", args.json), ("COUNTS", args.counts), ("--previous", args.previous))
    for opt, path in (("-o", args.output), ("--json", args.json)):
        check_output(path, opt)
    out = report_stream(args.output, args.json)
    with _progress(args, "build") as progress:
        progress.step(f"reading {args.counts}")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
        previous = read_spec(args.previous, "--previous") if args.previous else None
        _check_version(args.version, previous, args.previous)
        _check_workers(counts, args.max_load, args.max_workers, args.counts)
        progress.step(f"building from {len(counts):,} quadkeys")
        report = build_with_report(counts, args.max_load, previous=previous, strategy=args.strategy,
                                   version=args.version, stream_name=args.stream_name)
        spec = report.spec
        progress.step("measuring the spec")
        text = spec.to_json() + "\n"
        metrics = dataclasses.replace(evaluate(spec, counts), spec_bytes=len(text.encode()))
        moved = stability(previous, spec, counts) if previous is not None else None
        progress.step(f"writing {args.output}")
        write_text(args.output, text)
        if args.json:
            write_text(args.json, json.dumps(metrics.to_dict(), indent=1) + "\n")
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    check_inputs(("COUNTS", args.counts), ("SPEC", args.spec))
    check_output(args.json, "--json")
    out = report_stream(args.json)
    with _progress(args, "evaluate") as progress:
        progress.step(f"reading {args.counts}")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
        progress.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        progress.step("measuring the spec")
        metrics = dataclasses.replace(evaluate(spec, counts), spec_bytes=len((spec.to_json() + "\n").encode()))
        if args.json:
            write_text(args.json, json.dumps(metrics.to_dict(), indent=1) + "\n")
    print(render_table(metrics, limit=args.limit), file=out)
    if args.json and args.json != STDIO:
        print(f"wrote {args.json}", file=out)
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    check_inputs(("OLD", args.old), ("NEW", args.new), ("--counts", args.counts))
    with _progress(args, "diff") as progress:
        progress.step("reading the specs")
        old, new = read_spec(args.old, "OLD"), read_spec(args.new, "NEW")
        d = spec_diff(old, new)
        progress.step("measuring moved load")
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
    import numpy as np

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


def cmd_geojson(args: argparse.Namespace) -> int:
    from partitioner.geojson import spec_to_geojson

    check_inputs(("SPEC", args.spec), ("--counts", args.counts))
    output = args.output or STDIO
    check_output(output, "-o")
    with _progress(args, "geojson") as progress:
        progress.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        counts = read_counts(args.counts, "--counts", single_zoom=args.single_zoom) if args.counts else None
        progress.step("drawing the partitions")
        text = json.dumps(spec_to_geojson(spec, counts), separators=(",", ":"))
        write_text(output, text + "\n")
    if output != STDIO:
        print(f"wrote {output} ({len(spec.partitions)} features)")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from partitioner.plot import plot_mismatch, plot_spec

    check_inputs(("SPEC", args.spec), ("COUNTS", args.counts))
    if args.mismatch and args.counts is None:
        raise CliError(f"--mismatch {args.mismatch!r} needs COUNTS.csv (the new load to put on the spec)")
    check_one_stdout(("-o", args.output), ("--mismatch", args.mismatch))
    check_distinct(("-o", args.output), ("--mismatch", args.mismatch))
    check_output(args.output, "-o", suffix=".png")
    check_output(args.mismatch, "--mismatch", suffix=".png")
    out = report_stream(args.output, args.mismatch)
    with _progress(args, "plot") as progress:
        progress.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom) if args.counts else None
        progress.step(f"drawing {args.output}")
        write_via(args.output, lambda tmp: plot_spec(spec, tmp, counts), suffix=".png")
        if args.mismatch and counts is not None:
            progress.step(f"drawing {args.mismatch}")
            write_via(args.mismatch, lambda tmp: plot_mismatch(spec, counts, tmp), suffix=".png")
    for path in (args.output, args.mismatch):
        if path and path != STDIO:
            print(f"wrote {path}", file=out)
    return EXIT_OK


def cmd_policy(args: argparse.Namespace) -> int:
    from partitioner.policy import RebalancePolicy

    check_inputs(("CURRENT", args.current), ("CANDIDATE", args.candidate), ("COUNTS", args.counts))
    check_output(args.json, "--json")
    out = report_stream(args.json)
    policy = RebalancePolicy.from_json(args.policy, where="--policy")
    now = _when(args.now, "--now") or datetime.now(UTC)
    last = _when(args.last_published, "--last-published")
    current, candidate = read_spec(args.current, "CURRENT"), read_spec(args.candidate, "CANDIDATE")
    counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom)
    decision = policy.decide(current, candidate, counts, now, last)
    print(decision.render(), file=out)
    print("current:   " + summary_line(evaluate(current, counts)).replace("\n", "\n           "), file=out)
    print("candidate: " + summary_line(evaluate(candidate, counts)).replace("\n", "\n           "), file=out)
    if args.json:
        write_text(args.json, json.dumps(decision.to_dict(), indent=1) + "\n")
    return EXIT_REDEPLOY if decision.redeploy else EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from partitioner.simulate.command import run_command

    return run_command(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from partitioner.build import build_spec, build_with_report
    from partitioner.geojson import write_geojson
    from partitioner.plot import plot_spec

    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create output directory {str(out)!r}: {exc.strerror}") from exc
    counts = read_counts_csv(SAMPLE_COUNTS)
    print(f"sample: {len(counts)} quadkeys at zoom {counts.grid_zoom}, total load {counts.total:.0f}, "
          f"max_load {args.max_load:g} ({SAMPLE_COUNTS})\n")
    report = build_with_report(counts, args.max_load, created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    spec = report.spec
    metrics = evaluate(spec, counts)
    print(render_table(metrics, limit=args.limit))
    seed = evaluate(build_spec(counts, args.max_load, strategy="seed"), counts)
    print(f"\nSeed strategy on the same load: {seed.worker_count} workers (lower bound {seed.lower_bound}), "
          f"max utilisation {100 * seed.max_utilisation:.1f}%, median P^2/(4piA) {seed.median_compactness:.2f}, "
          f"boundary-load share {100 * seed.boundary_load_share:.1f}%")
    spec_path, gj_path, png_path = out / "spec.json", out / "spec.geojson", out / "map.png"
    try:
        spec.save(spec_path)
    except OSError as exc:
        raise CliError(f"cannot write {str(spec_path)!r}: {exc.strerror}") from exc
    write_geojson(spec, gj_path, counts)
    plot_spec(spec, png_path, counts, title=f"sample (London, zoom {counts.grid_zoom}): {metrics.region_count} "
                                            f"regions on {metrics.worker_count} workers")
    print(f"\nwrote {spec_path}, {gj_path}, {png_path}")
    return 0


# ---------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------


def _quiet(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true",
                   help="no progress line (it is drawn on stderr only when stderr is a terminal)")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="print each step and its time on stderr (also when stderr is not a terminal)")


def _single_zoom(p: argparse.ArgumentParser) -> None:
    p.add_argument("--single-zoom", action="store_true",
                   help="reject counts with rows at more than one zoom (default: a rolled-up quadtree is fine)")


def _add_build(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``build`` sub-command."""
    b = sub.add_parser("build", help="build a spec from COUNTS.csv", description="Build a spec from load per "
                       "quadkey and print the partition table and summary.")
    b.add_argument("counts", metavar="COUNTS.csv")
    b.add_argument("--max-load", type=_positive, required=True, help="cap on each worker's load")
    b.add_argument("-o", "--output", required=True, metavar="SPEC.json", help="where to write the spec")
    b.add_argument("--previous", metavar="OLD.json", help="the live spec: keep ids sticky to it")
    b.add_argument("--strategy", choices=("compact", "seed"), default="compact",
                   help="compact (default) or seed (the published seed algorithm, the baseline)")
    b.add_argument("--version", type=_count, help="spec version (default previous + 1, or 1)")
    b.add_argument("--stream-name", help="geo stream name to record in the spec")
    b.add_argument("--json", metavar="METRICS.json", help="also write the metrics as JSON")
    b.add_argument("--limit", type=_count, default=40, help="max partition/worker lines in the table (default 40)")
    b.add_argument("--max-workers", type=_count, default=DEFAULT_MAX_WORKERS, metavar="N",
                   help=f"refuse a --max-load that needs more than N workers (default {DEFAULT_MAX_WORKERS})")
    _single_zoom(b)
    _quiet(b)
    b.set_defaults(func=cmd_build)


def _add_evaluate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``evaluate`` sub-command."""
    e = sub.add_parser("evaluate", help="measure a spec under a load",
                       description="Attribute COUNTS.csv to SPEC.json and print the table (planned -> actual "
                                   "when the load differs from the spec's) and metrics.")
    e.add_argument("counts", metavar="COUNTS.csv")
    e.add_argument("spec", metavar="SPEC.json")
    e.add_argument("--json", metavar="METRICS.json", help="write the metrics as JSON ('-' for stdout)")
    e.add_argument("--limit", type=_count, default=40, help="max partition/worker lines in the table (default 40)")
    _single_zoom(e)
    _quiet(e)
    e.set_defaults(func=cmd_evaluate)


def _add_diff(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``diff`` sub-command."""
    d = sub.add_parser("diff", help="compare two specs", description="Partition ids added/removed/changed and "
                       "the load that keeps its partition and worker.",
                       epilog="exit status: 0 same partitions and workers, 1 the specs differ, 2 bad input")
    d.add_argument("old", metavar="OLD.json")
    d.add_argument("new", metavar="NEW.json")
    d.add_argument("--counts", metavar="COUNTS.csv", help="measure moved load under this load")
    _single_zoom(d)
    _quiet(d)
    d.set_defaults(func=cmd_diff)


def _add_geojson(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``geojson`` sub-command."""
    g = sub.add_parser("geojson", help="spec -> GeoJSON", description="Write the spec as a GeoJSON "
                       "FeatureCollection (one MultiPolygon per partition; the catch-all has null geometry).")
    g.add_argument("spec", metavar="SPEC.json")
    g.add_argument("-o", "--output", metavar="OUT.geojson", help="output file (default stdout)")
    g.add_argument("--counts", metavar="COUNTS.csv", help="report load/utilisation under this load")
    _single_zoom(g)
    _quiet(g)
    g.set_defaults(func=cmd_geojson)


def _add_plot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``plot`` sub-command."""
    p = sub.add_parser("plot", help="draw a spec to PNG", description="Partition map (web mercator, cells "
                       "coloured by worker) with per-worker utilisation bars.")
    p.add_argument("spec", metavar="SPEC.json")
    p.add_argument("counts", nargs="?", metavar="COUNTS.csv", help="heat underlay and utilisation under this load")
    p.add_argument("-o", "--output", required=True, metavar="MAP.png")
    p.add_argument("--mismatch", metavar="BARS.png", help="also draw planned vs actual load per worker")
    _single_zoom(p)
    _quiet(p)
    p.set_defaults(func=cmd_plot)


def _add_policy(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    _single_zoom(q)
    _quiet(q)
    q.set_defaults(func=cmd_policy)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``demo`` sub-command."""
    m = sub.add_parser("demo", help="run on the bundled sample", description="Build a spec from the bundled "
                       "sample (London, zoom 15) and write spec.json, spec.geojson and map.png.")
    m.add_argument("--out", default="demo-out", metavar="DIR", help="output directory (default ./demo-out)")
    m.add_argument("--max-load", type=_positive, default=DEMO_MAX_LOAD,
                   help=f"cap on each worker's load (default {DEMO_MAX_LOAD:g})")
    m.add_argument("--limit", type=_count, default=40, help="max partition/worker lines in the table (default 40)")
    _quiet(m)  # accepted like every command's (demo has no progress line to silence)
    m.set_defaults(func=cmd_demo)


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="partitioner",
                                 description="Geo Rebalancer partitioner: build, measure and compare partition "
                                             "specs from load per quadkey (CSV header 'quadkey,weight'). "
                                             "'-' reads stdin or writes stdout.",
                                 epilog="exit status: 0 ok (diff: same partitions; policy: keep), 1 diff: the "
                                        "specs differ, 2 bad input or arguments (nothing written), 3 policy: "
                                        "redeploy, 130 interrupted, 141 output pipe closed")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for add in (_add_build, _add_evaluate, _add_diff, _add_geojson, _add_plot, _add_policy):
        add(sub)
    from partitioner.simulate.command import add_parser as add_simulate

    add_simulate(sub, _positive).set_defaults(func=cmd_simulate)
    _add_demo(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (see the module docstring: 0, 1, 2, 3, 130, 141)."""
    args = make_parser().parse_args(argv)
    try:
        status: int = args.func(args)
        sys.stdout.flush()
    except PartitionerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader went away (| head): stop quietly; point stdout at /dev/null so the
        # interpreter's final flush does not raise again (docs.python.org/3/library/signal.html#note-on-sigpipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status


def run() -> None:
    """The installed ``partitioner`` command (``[project.scripts]`` in pyproject.toml)."""
    raise SystemExit(main())
