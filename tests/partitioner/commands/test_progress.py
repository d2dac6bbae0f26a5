"""Tests for partitioner.commands.progress: the one-line progress display (terminals only) and the CLI's -q."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

from partitioner.commands.progress import Progress, should_draw

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "partitioner" / "data" / "sample_counts.csv"


def test_nothing_is_drawn_on_a_stream_that_is_not_a_terminal() -> None:
    # GIVEN a progress display on a plain stream (a log file, a pipe)
    stream = io.StringIO()
    # WHEN used
    with Progress("build", stream=stream) as progress:
        progress.step("reading", total=10)
        progress.advance(3)
    # THEN nothing was written and it was off
    assert stream.getvalue() == ""
    assert not progress.enabled
    assert not should_draw(stream)


def test_quiet_turns_it_off_and_a_drawn_line_says_step_count_and_time() -> None:
    # GIVEN a forced display
    stream = io.StringIO()
    with Progress("simulate", stream=stream, enabled=True, interval=0.01) as progress:
        progress.step("windows", total=8)
        progress.update(2)
        progress.advance()
        time.sleep(0.05)  # the background thread redraws meanwhile
        line = progress.line()
    # THEN the line names the command, the step, the count and the elapsed time
    assert "simulate: windows 3/8 (38%)" in line and line.endswith(" s")
    out = stream.getvalue()
    assert "simulate: windows 3/8 (38%)" in out
    # AND closing erased it (the last write blanks the line and returns the cursor)
    assert out.endswith("\r") and out.rstrip("\r").split("\r")[-1].strip() == ""
    assert not should_draw(io.StringIO(), quiet=True)


def _run_on_a_terminal(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal; return (status, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "partitioner", *args], stdout=subprocess.PIPE, stderr=slave,
                            cwd=tmp_path, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, out.decode(), shown.decode(errors="replace")


def test_build_shows_progress_on_a_terminal_and_not_with_q(tmp_path: Path) -> None:
    # GIVEN the bundled sample WHEN built with stderr on a terminal
    status, out, shown = _run_on_a_terminal(["build", str(SAMPLE), "--max-load", "2500", "-o", "s.json"], tmp_path)
    # THEN the terminal saw the steps, and stdout (the table) has no control characters
    assert status == 0, shown
    assert "build: reading" in shown and "build: building from 2,177 quadkeys" in shown
    assert "\r" not in out and "Workers:" in out
    # AND with -q the terminal sees nothing
    status, out, shown = _run_on_a_terminal(["build", str(SAMPLE), "--max-load", "2500", "-o", "s.json", "-q"],
                                            tmp_path)
    assert status == 0 and shown == "" and "Workers:" in out


def test_verbose_prints_each_step_as_a_line_and_done_only_when_finished() -> None:
    # GIVEN verbose displays on a plain stream (a log)
    ok, failed = io.StringIO(), io.StringIO()
    # WHEN one finishes and one is left by an exception
    with Progress("build", stream=ok, verbose=True) as progress:
        progress.step("reading")
        progress.step("building", total=3)
        progress.advance()
    try:
        with Progress("build", stream=failed, verbose=True) as progress:
            progress.step("reading")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    # THEN one line per step, no control characters, and "done" only for the finished one
    lines = ok.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["build: reading", "build: building", "build: done"]
    assert "\r" not in ok.getvalue()
    assert failed.getvalue().splitlines() == [failed.getvalue().splitlines()[0]]
    assert failed.getvalue().startswith("build: reading (")
    # AND quiet wins over verbose
    quiet = io.StringIO()
    with Progress("build", stream=quiet, verbose=True, quiet=True) as progress:
        progress.step("reading")
    assert quiet.getvalue() == ""
