"""``python -m partitioner demo``: the partitioner on the bundled sample, with its table, GeoJSON and map."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from partitioner.builders import build_spec, build_with_report
from partitioner.commands.args import add_quiet, count, positive
from partitioner.commands.io import CliError
from partitioner.load.read import read_counts_csv
from partitioner.output.metrics import evaluate
from partitioner.output.render import render_table

SAMPLE_COUNTS = Path(__file__).resolve().parent.parent / "data" / "sample_counts.csv"
DEMO_MAX_LOAD = 2500.0  # the greedy baseline's example cap; the sample holds ~29.5k events (lower bound 12)


def cmd_demo(args: argparse.Namespace) -> int:
    from partitioner.output.geojson import write_geojson
    from partitioner.output.plot import plot_spec

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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``demo`` sub-command."""
    m = sub.add_parser("demo", help="run on the bundled sample", description="Build a spec from the bundled "
                       "sample (London, zoom 15) and write spec.json, spec.geojson and map.png.")
    m.add_argument("--out", default="demo-out", metavar="DIR", help="output directory (default ./demo-out)")
    m.add_argument("--max-load", type=positive, default=DEMO_MAX_LOAD,
                   help=f"cap on each worker's load (default {DEMO_MAX_LOAD:g})")
    m.add_argument("--limit", type=count, default=40, help="max partition/worker lines in the table (default 40)")
    add_quiet(m)  # accepted like every command's (demo has no progress line to silence)
    m.set_defaults(func=cmd_demo)
