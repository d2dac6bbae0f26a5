"""``python -m partitioner geojson`` and ``plot``: a spec drawn as GeoJSON or as a PNG map."""

from __future__ import annotations

import argparse
import json

from partitioner.commands.args import add_quiet, add_single_zoom, progress
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
    write_via,
)


def cmd_geojson(args: argparse.Namespace) -> int:
    from partitioner.output.geojson import spec_to_geojson

    check_inputs(("SPEC", args.spec), ("--counts", args.counts))
    output = args.output or STDIO
    check_output(output, "-o")
    with progress(args, "geojson") as line:
        line.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        counts = read_counts(args.counts, "--counts", single_zoom=args.single_zoom) if args.counts else None
        line.step("drawing the partitions")
        text = json.dumps(spec_to_geojson(spec, counts), separators=(",", ":"))
        write_text(output, text + "\n")
    if output != STDIO:
        print(f"wrote {output} ({len(spec.partitions)} features)")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from partitioner.output.plot import plot_mismatch, plot_spec

    check_inputs(("SPEC", args.spec), ("COUNTS", args.counts))
    if args.mismatch and args.counts is None:
        raise CliError(f"--mismatch {args.mismatch!r} needs COUNTS.csv (the new load to put on the spec)")
    check_one_stdout(("-o", args.output), ("--mismatch", args.mismatch))
    check_distinct(("-o", args.output), ("--mismatch", args.mismatch))
    check_output(args.output, "-o", suffix=".png")
    check_output(args.mismatch, "--mismatch", suffix=".png")
    out = report_stream(args.output, args.mismatch)
    with progress(args, "plot") as line:
        line.step(f"reading {args.spec}")
        spec = read_spec(args.spec, "SPEC")
        counts = read_counts(args.counts, "COUNTS", single_zoom=args.single_zoom) if args.counts else None
        line.step(f"drawing {args.output}")
        write_via(args.output, lambda tmp: plot_spec(spec, tmp, counts), suffix=".png")
        if args.mismatch and counts is not None:
            line.step(f"drawing {args.mismatch}")
            write_via(args.mismatch, lambda tmp: plot_mismatch(spec, counts, tmp), suffix=".png")
    for path in (args.output, args.mismatch):
        if path and path != STDIO:
            print(f"wrote {path}", file=out)
    return EXIT_OK


def add_geojson(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``geojson`` sub-command."""
    g = sub.add_parser("geojson", help="spec -> GeoJSON", description="Write the spec as a GeoJSON "
                       "FeatureCollection (one MultiPolygon per partition; the catch-all has null geometry).")
    g.add_argument("spec", metavar="SPEC.json")
    g.add_argument("-o", "--output", metavar="OUT.geojson", help="output file (default stdout)")
    g.add_argument("--counts", metavar="COUNTS.csv", help="report load/utilisation under this load")
    add_single_zoom(g)
    add_quiet(g)
    g.set_defaults(func=cmd_geojson)


def add_plot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``plot`` sub-command."""
    p = sub.add_parser("plot", help="draw a spec to PNG", description="Partition map (web mercator, cells "
                       "coloured by worker) with per-worker utilisation bars.")
    p.add_argument("spec", metavar="SPEC.json")
    p.add_argument("counts", nargs="?", metavar="COUNTS.csv", help="heat underlay and utilisation under this load")
    p.add_argument("-o", "--output", required=True, metavar="MAP.png")
    p.add_argument("--mismatch", metavar="BARS.png", help="also draw planned vs actual load per worker")
    add_single_zoom(p)
    add_quiet(p)
    p.set_defaults(func=cmd_plot)
