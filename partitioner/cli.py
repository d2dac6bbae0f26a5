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
``counts EVENTS... --window-s S --zoom Z -o DIR [--lat/--lon/--time/--entity COL] [--ts-unit U] [--skip-bad]``
    Count a recorded event log (CSV, JSON lines, Parquet) into one ``quadkey,weight`` CSV per window
    (named by the window's start), the directory ``simulate`` replays (:mod:`partitioner.load.eventlog`).
``demo [--out DIR] [--max-load N]``
    The partitioner on the bundled sample (``partitioner/data/sample_counts.csv``):
    prints the table and writes ``spec.json``, ``spec.geojson`` and ``map.png``.

Conventions
-----------
* ``-`` as an input reads standard input (one input per command); ``-o -`` / ``--json -`` write
  standard output, and the human-readable report then goes to standard error, so stdout holds
  only the data asked for (:mod:`partitioner.commands.io`).
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
    Bad input: errors from the library (:class:`geokernel.errors.PartitionerError`: bad
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
import os
import sys
from collections.abc import Sequence

from geokernel.errors import PartitionerError
from partitioner import __version__
from partitioner.commands import build, counts, demo, draw, measure, policy, simulate
from partitioner.commands.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_PIPE

__all__ = ["main", "make_parser", "run"]


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

    for add in (build.add_parser, measure.add_evaluate, measure.add_diff, draw.add_geojson, draw.add_plot,
                policy.add_parser, simulate.add_parser, counts.add_parser, demo.add_parser):
        add(sub)
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
