"""A one-line progress display for commands that take more than a moment (terminals only).

:class:`Progress` redraws one status line on standard error: the command, the current
step, a count when the step has one, and the elapsed time. It draws only when that stream
is a terminal (and ``TERM`` is not ``dumb``) and the user did not ask for quiet (``-q``);
otherwise every method does nothing, so logs and pipes get no control characters.

Usage::

    with Progress("build", quiet=args.quiet) as progress:
        progress.step("reading counts.csv")
        counts = read_counts_csv(path)
        progress.step("simulating", total=len(windows))
        for window in windows:
            ...
            progress.advance()

Notes
-----
A daemon thread redraws the line every ``interval`` seconds (default 0.2), so a long
step still shows its clock moving; the line is erased on :meth:`Progress.close` (and on
leaving the ``with`` block), before the command prints its results. Nothing here
imports beyond the standard library.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

SPINNER = "|/-\\"


def should_draw(stream: TextIO, quiet: bool = False) -> bool:
    """True when a progress line belongs on ``stream``: a terminal, not ``TERM=dumb``, not quiet."""
    if quiet or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


class Progress:
    """One redrawn status line: ``<label>: <step> [done/total] <elapsed> s`` (see the module docstring).

    Parameters
    ----------
    label : str
        What runs (the command name).
    quiet : bool
        Never draw (the ``-q`` flag).
    stream : TextIO, optional
        Where to draw (default ``sys.stderr``).
    enabled : bool, optional
        Force drawing on or off (default: :func:`should_draw`).
    verbose : bool
        Instead of one redrawn line, print each step as its own line with the elapsed time (the
        ``-v`` flag; also when ``stream`` is not a terminal, so logs keep the timings).
    interval : float
        Seconds between redraws by the background thread.
    """

    def __init__(self, label: str, *, quiet: bool = False, stream: TextIO | None = None,
                 enabled: bool | None = None, interval: float = 0.2, verbose: bool = False) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.verbose = verbose and not quiet
        self.enabled = False if self.verbose else should_draw(self.stream, quiet) if enabled is None else enabled
        self.interval = interval
        self._text = ""
        self._done = 0
        self._total: int | None = None
        self._start = time.monotonic()
        self._ticks = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0  # characters drawn last time (to erase)

    # -- the interface -------------------------------------------------------------
    def step(self, text: str, total: int | None = None) -> None:
        """Start a step (its count, if any, restarts at 0 of ``total``)."""
        self._text, self._done, self._total = text, 0, total
        if self.verbose:
            self._write(f"{self.label}: {text} ({time.monotonic() - self._start:.2f} s)\n")
        self._draw()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more units of the current step done."""
        self._done += n
        self._draw()

    def update(self, done: int, total: int | None = None) -> None:
        """Set the current step's count (and its total, when it changes)."""
        self._done = done
        if total is not None:
            self._total = total
        self._draw()

    def close(self, *, finished: bool = True) -> None:
        """Stop redrawing and erase the line (idempotent); verbose: print the total time once when ``finished``."""
        if self.verbose and finished and not self._stop.is_set():
            self._write(f"{self.label}: done ({time.monotonic() - self._start:.2f} s)\n")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.enabled:
            with self._lock:
                self._write("\r" + " " * self._width + "\r")
                self._width = 0

    def __enter__(self) -> Progress:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(finished=exc_type is None)

    # -- drawing -------------------------------------------------------------------
    def line(self) -> str:
        """The status line as it would be drawn now (without control characters)."""
        count = ""
        if self._total:
            count = f" {self._done:,}/{self._total:,} ({100 * self._done / self._total:.0f}%)"
        elif self._done:
            count = f" {self._done:,}"
        spin = SPINNER[self._ticks % len(SPINNER)]
        return f"{spin} {self.label}: {self._text}{count} {time.monotonic() - self._start:.1f} s"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._ticks += 1
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or self._stop.is_set():
            return
        columns = shutil.get_terminal_size((80, 24)).columns
        text = self.line()[:max(10, columns - 1)]
        with self._lock:
            self._write("\r" + text + " " * max(0, self._width - len(text)))
            self._width = len(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, never fail the command
            self.enabled = False
            self.verbose = False
