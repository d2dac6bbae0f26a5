"""``python -m partitioner counts``: a recorded event log -> one ``quadkey,weight`` CSV per window (for ``simulate``).

The output directory is written whole or not at all: the files go to a temporary directory next to it,
renamed to ``DIR`` at the end, so a bad row (exit 2, one line naming file, line and value) or Ctrl-C
leaves nothing behind. ``DIR`` must not exist, or be an empty directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from partitioner.commands.args import add_quiet, positive, progress
from partitioner.commands.exits import EXIT_OK
from partitioner.commands.io import CliError
from partitioner.commands.progress import Progress
from partitioner.load.eventcols import EventColumns, column_names
from partitioner.load.eventlog import CountOptions, CountResult, count_events, full_windows, window_csv, window_name
from partitioner.load.eventread import file_format
from partitioner.load.eventtimes import TIME_UNITS

QUARANTINE = "quarantine.jsonl"


def _check_output_dir(path: str) -> Path:
    """``DIR`` must be creatable: absent (its parent a writable directory) or an empty directory."""
    p = Path(path)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise CliError(f"-o {path!r} exists and is not an empty directory (give a new directory)")
    parent = p.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise CliError(f"-o {path!r}: directory {str(parent)!r} does not exist or is not writable")
    return p


def _write(result: CountResult, windows: range, out: Path, line: Progress) -> int:
    """Write ``windows`` (and the quarantine) into a temporary directory, then rename it to ``out``."""
    tmp = Path(tempfile.mkdtemp(prefix=".partitioner-counts-", dir=out.resolve().parent))
    try:
        counts = result.counts
        line.step(f"writing {len(windows):,} windows", total=len(windows))
        for w in windows:
            (tmp / window_name(counts, w)).write_text(window_csv(counts, w), encoding="utf-8")
            line.advance()
        if result.bad:
            at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            text = "".join(json.dumps(b.quarantine(at).to_dict()) + "\n" for b in result.bad)
            (tmp / QUARANTINE).write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o777 & ~_umask())
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except OSError as exc:
        raise CliError(f"cannot write -o {str(out)!r}: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(tmp)
    return len(windows)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def cmd_counts(args: argparse.Namespace) -> int:
    """The ``counts`` command (returns the exit status; library errors propagate to the CLI's handler)."""
    for path in args.events:
        file_format(path)
    out = _check_output_dir(args.output)
    columns = EventColumns(args.lat, args.lon, args.time, args.entity or "entity_id", args.entity is not None,
                           column_names(args.columns))
    options = CountOptions(args.window_s, args.zoom, args.ts_unit, args.skip_bad)
    options.check()
    with progress(args, "counts") as line:
        result = count_events(args.events, columns, options, on_file=lambda name: line.step(f"reading {name}"))
        windows, dropped = (result.counts.windows(), ()) if args.keep_partial else full_windows(result)
        n = _write(result, windows, out, line)
    c = result.counts
    entities = "" if result.entities is None else f" from {result.entities:,} entities"
    cells = int(((c.window >= windows.start) & (c.window < windows.stop)).sum())
    print(f"counted {result.events:,} events{entities} in {len(args.events)} file(s): {n:,} windows of "
          f"{args.window_s:g} s, {cells:,} quadkey-windows at zoom {c.zoom}; wrote {args.output}")
    if dropped:
        edges = " and ".join(f"{window_name(c, w).removesuffix('.csv')} ({100 * share:.0f} % of it in the log)"
                             for w, share in dropped)
        print(f"left out the partial edge window(s) {edges}: they hold only the load recorded inside the log's span "
              "(--keep-partial keeps them)")
    if result.bad:
        reasons = ", ".join(f"{k} {v:,}" for k, v in result.bad_by_reason().items())
        print(f"skipped {len(result.bad):,} bad rows ({reasons}); see {out / QUARANTINE}", file=sys.stderr)
    return EXIT_OK


def _zoom(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``counts`` sub-command."""
    p = sub.add_parser("counts", help="count an event log into windows of load per quadkey (for simulate)",
                       description="Count recorded events (CSV separated by , ; tab or |, .tsv, .txt, JSON lines, "
                                   "Parquet; .gz for the text formats) per window floor(t / window_s) and web-mercator quadkey at --zoom; write one "
                                   "quadkey,weight CSV per window into DIR, named by the window's start (UTC), "
                                   "which 'simulate DIR' replays. A bad row stops the run (exit 2, nothing "
                                   "written) unless --skip-bad.")
    p.add_argument("events", nargs="+", metavar="EVENTS", help="event files, read in the order given")
    p.add_argument("--window-s", type=positive, required=True, help="window length in seconds")
    p.add_argument("--zoom", type=_zoom, required=True, help="quadkey zoom (1-30)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="new (or empty) directory to write")
    p.add_argument("--lat", default="lat", metavar="COL", help="latitude column (default lat)")
    p.add_argument("--lon", default="lon", metavar="COL", help="longitude column (default lon)")
    p.add_argument("--time", default="ts", metavar="COL", help="time column (default ts)")
    p.add_argument("--entity", metavar="COL",
                   help="entity column, counted for the summary (default entity_id, when the file has it)")
    p.add_argument("--columns", metavar="NAMES", default="",
                   help="the columns of CSV files without a header line, in order, comma separated (e.g. "
                        "entity_id,ts,lon,lat); default: the first line names them")
    p.add_argument("--ts-unit", "--time-unit", dest="ts_unit", choices=TIME_UNITS, default="auto",
                   help="how times are written, the ts_unit of the deployment's event field mapping (the same rule): "
                        "auto (numbers by magnitude: below 1e11 epoch s, below 1e14 ms, else us; ISO-8601 text "
                        "parsed), s, ms, us (epoch numbers only) or iso (ISO-8601 text only); a time must lie in "
                        "[2000-01-01, now + 1 day] (default auto; --time-unit is the old name)")
    p.add_argument("--keep-partial", action="store_true",
                   help="keep a first or last window the log covers less than 90%% of (left out by default: it "
                        "holds only part of the window's load)")
    p.add_argument("--skip-bad", action="store_true",
                   help=f"skip bad rows, print a summary on stderr, write them to DIR/{QUARANTINE}")
    add_quiet(p)
    p.set_defaults(func=cmd_counts)
