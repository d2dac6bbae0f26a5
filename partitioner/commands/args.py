"""What the commands share on their command lines: argument types, the ``-q``/``-v`` and ``--single-zoom`` options."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from partitioner.commands.io import CliError
from partitioner.commands.progress import Progress


def progress(args: argparse.Namespace, label: str) -> Progress:
    """The command's progress line, as ``-q`` / ``-v`` ask."""
    return Progress(label, quiet=args.quiet, verbose=args.verbose)


def positive(text: str) -> float:
    """argparse type: a positive finite number."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return v


def fraction(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number in (0, 1]")
    return v


def count(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return v


def when(text: str | None, what: str) -> datetime | None:
    """The ISO-8601 timestamp ``text`` of option ``what`` (UTC when it names no zone); None for None."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"{what} {text!r} is not an ISO-8601 timestamp") from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``-q`` (no progress line) or ``-v`` (every step and its time)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true",
                   help="no progress line (it is drawn on stderr only when stderr is a terminal)")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="print each step and its time on stderr (also when stderr is not a terminal)")


def add_single_zoom(p: argparse.ArgumentParser) -> None:
    """``--single-zoom``: refuse counts of several zooms."""
    p.add_argument("--single-zoom", action="store_true",
                   help="reject counts with rows at more than one zoom (default: a rolled-up quadtree is fine)")
